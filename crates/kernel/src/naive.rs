//! `naive`: one thread per output element, CUDA cores only, obviously correct.
//!
//! Thread (n, m, l) walks K in blocks of 16 values: it decodes the 16 e2m1 values of
//! row m of A and row n of B, sums their 16 products (exact in f32: multiples of 1/4
//! below 2^10), multiplies by the two e4m3 scales read from the blocked layout (exact),
//! and accumulates in f32; at the end the [`epilogue`](crate::epilogue) (alpha, bias, one
//! rounding to fp16 or bf16). It reads the scales exactly
//! where every other kernel does, so it also checks the layout the host produces.
//!
//! It runs on any GPU CUDA 13 supports (the portable PTX targets sm_75) and is the reference for shapes
//! too large to check on the CPU.

use nvfp4::{e2m1, e4m3, layout, shape::SF_VECTOR};

use crate::epilogue::{Epilogue, OUT_BYTES};
use crate::ptx::{memory, special};
use crate::{GemmArgs, Launch, MAX_GRID_YZ};

/// Threads per CTA, along N.
pub const BLOCK_N: u32 = 128;

/// Packed bytes per scale block (16 values, two per byte).
const BLOCK_BYTES: u32 = SF_VECTOR / 2;

/// Launch geometry: x covers N, y and z are grid-stride over M and L.
pub const fn launch(m: u32, n: u32, l: u32) -> Launch {
    let y = if m < MAX_GRID_YZ { m } else { MAX_GRID_YZ };
    let z = if l < MAX_GRID_YZ { l } else { MAX_GRID_YZ };
    Launch { grid: [n.div_ceil(BLOCK_N), y, z], block: [BLOCK_N, 1, 1], dynamic_smem: 0 }
}

/// The kernel body, run by every thread.
#[inline(always)]
pub fn gemm(args: &GemmArgs) {
    let n = special::ctaid_x() * BLOCK_N + special::tid_x();
    if n >= args.n {
        return;
    }
    let row_bytes = (args.k / 2) as u64;
    let sf_cols = args.k / SF_VECTOR;
    let sfa_batch = layout::batch_bytes(args.m, sf_cols);
    let sfb_batch = layout::batch_bytes(args.n, sf_cols);
    let epilogue = Epilogue::load(args);

    let mut l = special::ctaid_z();
    while l < args.l {
        let b_row = args.b + (l as u64 * args.n as u64 + n as u64) * row_bytes;
        let sfb = args.sfb + l as u64 * sfb_batch;
        let mut m = special::ctaid_y();
        while m < args.m {
            let a_row = args.a + (l as u64 * args.m as u64 + m as u64) * row_bytes;
            let sfa = args.sfa + l as u64 * sfa_batch;
            let mut acc = 0.0f32;
            for block in 0..sf_cols {
                let a16 = memory::ld_global_nc_u64(a_row + (block * BLOCK_BYTES) as u64);
                let b16 = memory::ld_global_nc_u64(b_row + (block * BLOCK_BYTES) as u64);
                let mut dot = 0.0f32;
                for byte in 0..BLOCK_BYTES {
                    let (a_even, a_odd) = e2m1::unpack((a16 >> (8 * byte)) as u8);
                    let (b_even, b_odd) = e2m1::unpack((b16 >> (8 * byte)) as u8);
                    dot += e2m1::decode(a_even) * e2m1::decode(b_even);
                    dot += e2m1::decode(a_odd) * e2m1::decode(b_odd);
                }
                let scale_a = e4m3::decode(memory::ld_global_nc_u8(sfa + layout::offset(m, block, sf_cols)));
                let scale_b = e4m3::decode(memory::ld_global_nc_u8(sfb + layout::offset(n, block, sf_cols)));
                acc += dot * (scale_a * scale_b);
            }
            let c = args.c + ((l as u64 * args.m as u64 + m as u64) * args.n as u64 + n as u64) * OUT_BYTES as u64;
            memory::st_global_b16(c, epilogue.one(acc, n));
            m += special::nctaid_y();
        }
        l += special::nctaid_z();
    }
}

// The GPU entry point: `.entry nvfp4_gemm_naive`.
gemm_entry_point!(nvfp4_gemm_naive => gemm);
