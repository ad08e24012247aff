//! `dequant`: NVFP4 (packed e2m1 + blocked e4m3 scales) to fp16, row-major, exactly.
//!
//! Not part of our GEMM: this is the first half of the baseline "what you would do without
//! us" (dequantize both operands, then call cuBLAS's fp16 GEMM), written here so that the
//! baseline runs on the GPU, from Rust, and is tested under the emulator like every kernel.
//!
//! ```text
//! dst[l][r][k] = fp16( e2m1(src[l][r][k]) * e4m3(sf[l][r][k/16]) )
//! ```
//!
//! Each product has at most 6 significant bits and lies in [2^-10, 2688] (or is 0, or NaN
//! for a NaN scale), so it is exact in f32 and in fp16: the conversion never rounds.
//!
//! Thread (j, r, l) handles one 16-value block: one 8-byte load of packed values, one scale
//! byte read from the blocked layout (where every kernel reads it), 16 products, two
//! 16-byte stores. x covers the K/16 blocks of a row (consecutive threads write
//! consecutive 32-byte pieces: fully coalesced), y and z are grid-stride over rows and
//! batches, as in `naive`. Memory-bound: it reads 0.5625 bytes and writes 2 per value.

use nvfp4::{e2m1, e4m3, layout, shape::SF_VECTOR};

use crate::ptx::{cvt, memory, special};
use crate::{Launch, MAX_GRID_YZ};

/// Threads per CTA, along the K/16 blocks of a row.
pub const BLOCK: u32 = 128;

/// Packed bytes per 16-value block.
const BLOCK_BYTES: u64 = (SF_VECTOR / 2) as u64;

/// fp16 bytes per 16-value block.
const OUT_BYTES: u64 = SF_VECTOR as u64 * 2;

/// What one dequantization launch reads and writes.
///
/// `src` is `[L][rows][K/2]` packed e2m1 (low nibble = even k), `sf` the blocked e4m3
/// scales (L batches of `nvfp4::layout::batch_bytes(rows, K/16)` bytes), `dst`
/// `[L][rows][K]` fp16. K must be a multiple of 16 (every NVFP4 shape's K is a multiple of
/// 64), `dst` 16-byte aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct DequantArgs {
    pub src: u64,
    pub sf: u64,
    pub dst: u64,
    pub rows: u32,
    pub k: u32,
    pub l: u32,
}

/// Launch geometry: x covers the K/16 blocks of a row, y and z are grid-stride over rows
/// and batches.
pub const fn launch(rows: u32, k: u32, l: u32) -> Launch {
    let blocks = k / SF_VECTOR;
    let x = if blocks == 0 { 1 } else { blocks.div_ceil(BLOCK) };
    let y = if rows == 0 {
        1
    } else if rows < MAX_GRID_YZ {
        rows
    } else {
        MAX_GRID_YZ
    };
    let z = if l == 0 {
        1
    } else if l < MAX_GRID_YZ {
        l
    } else {
        MAX_GRID_YZ
    };
    Launch { grid: [x, y, z], block: [BLOCK, 1, 1], dynamic_smem: 0 }
}

/// The kernel body, run by every thread.
#[inline(always)]
pub fn dequant(args: &DequantArgs) {
    let j = special::ctaid_x() * BLOCK + special::tid_x();
    let sf_cols = args.k / SF_VECTOR;
    if j >= sf_cols {
        return;
    }
    let sf_batch = layout::batch_bytes(args.rows, sf_cols);
    let mut l = special::ctaid_z();
    while l < args.l {
        let mut r = special::ctaid_y();
        while r < args.rows {
            // Block j of row r of batch l: the packed row is K/2 = sf_cols * 8 bytes long.
            let block = (l as u64 * args.rows as u64 + r as u64) * sf_cols as u64 + j as u64;
            let packed = memory::ld_global_nc_u64(args.src + block * BLOCK_BYTES);
            let scale_bits = memory::ld_global_nc_u8(args.sf + l as u64 * sf_batch + layout::offset(r, j, sf_cols));
            let scale = e4m3::decode(scale_bits);
            // Byte p holds values 2p (low nibble) and 2p + 1 (high nibble): one fp16 pair,
            // the even value in the low half (little-endian order in memory). One
            // `cvt.rn.f16.f32` per value: the paired `cvt.rn.f16x2.f32` needs sm_80, and
            // this kernel is in the portable (sm_75) PTX.
            let pair = |p: u32| {
                let (even, odd) = e2m1::unpack((packed >> (8 * p)) as u8);
                let lo = cvt::f16_from_f32(e2m1::decode(even) * scale) as u32;
                let hi = cvt::f16_from_f32(e2m1::decode(odd) * scale) as u32;
                hi << 16 | lo
            };
            let out = args.dst + block * OUT_BYTES;
            memory::st_global_v4_b32(out, [pair(0), pair(1), pair(2), pair(3)]);
            memory::st_global_v4_b32(out + 16, [pair(4), pair(5), pair(6), pair(7)]);
            r += special::nctaid_y();
        }
        l += special::nctaid_z();
    }
}

/// The GPU entry point: `.entry nvfp4_dequant_fp16`.
///
/// # Safety
///
/// The addresses must be device allocations of the sizes [`DequantArgs`] describes and the
/// launch must use [`launch`]'s geometry (any grid is correct; that one is complete).
#[cfg(target_arch = "nvptx64")]
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn nvfp4_dequant_fp16(src: u64, sf: u64, dst: u64, rows: u32, k: u32, l: u32) {
    dequant(&DequantArgs { src, sf, dst, rows, k, l })
}
