//! NVFP4 operands to fp16, on the CPU and with the kernel crate's `dequant` kernel (on the
//! GPU or under the emulator): the first half of the "dequantize, then cuBLAS fp16"
//! baseline, and the fp16 operands of the cuBLAS baselines.
//!
//! Every e2m1 value times its e4m3 scale is exact in fp16, so all three must agree bit
//! for bit (a NaN scale gives the canonical NaN 0x7FFF, as `cvt.rn.f16x2.f32` writes).

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use half::f16;
use kernel::dequant::{self, DequantArgs};
use nvfp4::shape::SF_VECTOR;
use nvfp4::{e2m1, e4m3, layout};
use rayon::prelude::*;

use crate::device::Gpu;
use crate::embedded;
use crate::error::{CudaContext as _, Error, Result};

/// The canonical fp16 NaN the GPU's conversion writes.
pub const CANONICAL_NAN: u16 = 0x7FFF;

/// The fp16 value of one e2m1 code times one e4m3 scale (exact; NaN scale: 0x7FFF).
pub fn value(code: u8, scale_bits: u8) -> f16 {
    if e4m3::is_nan(scale_bits) {
        return f16::from_bits(CANONICAL_NAN);
    }
    f16::from_f32(e2m1::decode(code) * e4m3::decode(scale_bits))
}

/// Dequantizes one operand on the CPU: `packed` [L][rows][K/2], `blocked` scales (L
/// batches of `layout::batch_bytes(rows, K/16)`), into fp16 [L][rows][K].
pub fn dequantize(packed: &[u8], blocked: &[u8], rows: u32, k: u32, l: u32) -> Vec<f16> {
    let sf_cols = k / SF_VECTOR;
    let half_k = k as usize / 2;
    let batch_bytes = layout::batch_bytes(rows, sf_cols) as usize;
    assert_eq!(packed.len(), l as usize * rows as usize * half_k, "packed operand size");
    assert_eq!(blocked.len(), l as usize * batch_bytes, "blocked scale size");
    let mut out = vec![f16::ZERO; l as usize * rows as usize * k as usize];
    out.par_chunks_mut(k as usize).enumerate().for_each(|(row, dst)| {
        let (batch, r) = (row / rows as usize, (row % rows as usize) as u32);
        let src = &packed[row * half_k..(row + 1) * half_k];
        let scales = &blocked[batch * batch_bytes..(batch + 1) * batch_bytes];
        for (byte_index, &byte) in src.iter().enumerate() {
            let j = (2 * byte_index) as u32 / SF_VECTOR;
            let scale = scales[layout::offset(r, j, sf_cols) as usize];
            let (even, odd) = e2m1::unpack(byte);
            dst[2 * byte_index] = value(even, scale);
            dst[2 * byte_index + 1] = value(odd, scale);
        }
    });
    out
}

/// Runs the `dequant` kernel under the emulator on one operand (same layouts as
/// [`dequantize`]); the output starts as NaN poison so unwritten elements show.
pub fn emulated(packed: &[u8], blocked: &[u8], rows: u32, k: u32, l: u32) -> Result<Vec<f16>> {
    let memory = emu::GlobalMemory::new();
    let out_len = l as usize * rows as usize * k as usize;
    let poison: Vec<u8> = (0..out_len).flat_map(|_| crate::verify::POISON.to_bits().to_le_bytes()).collect();
    let args = DequantArgs {
        src: memory.alloc_from("packed", packed),
        sf: memory.alloc_from("scales", blocked),
        dst: memory.alloc_from("fp16", &poison),
        rows,
        k,
        l,
    };
    let launch = dequant::launch(rows, k, l);
    let config = emu::LaunchConfig { grid: launch.grid, block: launch.block, dynamic_smem: launch.dynamic_smem };
    emu::launch(&memory, config, || dequant::dequant(&args))?;
    let mut bytes = vec![0u8; out_len * 2];
    memory.read(args.dst, &mut bytes).map_err(Error::Failed)?;
    Ok(bytes.chunks_exact(2).map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]]))).collect())
}

/// The `dequant` kernel loaded on a GPU.
#[derive(Debug)]
pub struct Dequantizer<'g> {
    gpu: &'g Gpu,
    function: CudaFunction,
}

/// The PTX build and entry point the dequantizer is loaded from (portable: any GPU).
pub const PTX: (&str, &str) = ("portable", "nvfp4_dequant_fp16");

impl<'g> Dequantizer<'g> {
    pub fn new(gpu: &'g Gpu) -> Result<Dequantizer<'g>> {
        let (target, entry) = PTX;
        let module = embedded::load_module(&gpu.ctx, target)?;
        let function = module.load_function(entry).context(format!("finding kernel {entry}"))?;
        Ok(Dequantizer { gpu, function })
    }

    /// Enqueues one dequantization of `rows` x `k` (x `l`) values on the GPU's stream.
    ///
    /// # Safety
    ///
    /// `src`, `sf` and `dst` must be device allocations of at least the sizes
    /// [`DequantArgs`] describes for this shape, `dst` 16-byte aligned.
    pub unsafe fn launch(&self, src: u64, sf: u64, dst: u64, rows: u32, k: u32, l: u32) -> Result<()> {
        let geometry = dequant::launch(rows, k, l);
        let config = LaunchConfig {
            grid_dim: (geometry.grid[0], geometry.grid[1], geometry.grid[2]),
            block_dim: (geometry.block[0], geometry.block[1], geometry.block[2]),
            shared_mem_bytes: 0,
        };
        let mut builder = self.gpu.stream.launch_builder(&self.function);
        builder.arg(&src).arg(&sf).arg(&dst).arg(&rows).arg(&k).arg(&l);
        // SAFETY: the arguments match `nvfp4_dequant_fp16`'s signature; the caller vouches
        // for the buffers.
        unsafe { builder.launch(config) }.context("launching the dequantizer")?;
        Ok(())
    }
}

/// Elements where two fp16 buffers differ bit for bit (any two NaNs count as equal), and
/// the first such index.
pub fn bit_differences(got: &[f16], want: &[f16]) -> (u64, Option<usize>) {
    let differs = |(g, w): (&f16, &f16)| g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan());
    let count = got.par_iter().zip(want.par_iter()).filter(|&p| differs(p)).count() as u64;
    let first = if count > 0 { got.iter().zip(want).position(differs) } else { None };
    (count + got.len().abs_diff(want.len()) as u64, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_times_every_scale_is_exact_in_fp16() {
        for code in 0..16u8 {
            for scale in 0..=255u8 {
                let v = value(code, scale);
                if e4m3::is_nan(scale) {
                    assert_eq!(v.to_bits(), CANONICAL_NAN);
                    continue;
                }
                let exact = e2m1::decode(code) as f64 * e4m3::decode(scale) as f64;
                assert_eq!(v.to_f64(), exact, "code {code:#x} scale {scale:#04x}");
                assert_eq!(v.is_sign_negative(), (code & 8 != 0) != (scale & 0x80 != 0), "sign of zero kept");
            }
        }
    }

    #[test]
    fn cpu_dequantization_reads_the_blocked_layout() {
        // One row block of 130 rows (two tiles of rows), K = 128 (8 scales per row).
        let (rows, k, l) = (130u32, 128u32, 2u32);
        let sf_cols = k / 16;
        let packed: Vec<u8> = (0..l * rows * k / 2).map(|i| (i * 37 + 11) as u8).collect();
        let mut plain = vec![0u8; (l * rows * sf_cols) as usize];
        for (i, s) in plain.iter_mut().enumerate() {
            *s = e4m3::encode((1 + i % 5) as f32 * 0.25);
        }
        let mut blocked = vec![0u8; l as usize * layout::batch_bytes(rows, sf_cols) as usize];
        layout::to_blocked(&plain, rows, sf_cols, l, &mut blocked);
        let out = dequantize(&packed, &blocked, rows, k, l);
        for batch in 0..l {
            for r in 0..rows {
                for kk in 0..k {
                    let row = (batch * rows + r) as usize;
                    let byte = packed[row * (k as usize / 2) + kk as usize / 2];
                    let code = if kk % 2 == 0 { byte & 0xF } else { byte >> 4 };
                    let scale = plain[row * sf_cols as usize + (kk / 16) as usize];
                    let want = e2m1::decode(code) * e4m3::decode(scale);
                    assert_eq!(out[row * k as usize + kk as usize].to_f32(), want, "l {batch} r {r} k {kk}");
                }
            }
        }
    }

    #[test]
    fn bit_differences_counts_and_locates() {
        let a = [f16::ONE, f16::NAN, f16::from_bits(CANONICAL_NAN), f16::ZERO];
        let b = [f16::ONE, f16::from_bits(CANONICAL_NAN), f16::NAN, f16::NEG_ZERO];
        assert_eq!(bit_differences(&a, &b), (1, Some(3)), "-0 and +0 differ in bits; NaNs do not");
        assert_eq!(bit_differences(&a, &a), (0, None));
    }
}
