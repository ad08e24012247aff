//! The kernel crate's plain read (`kernel::stream`): on the GPU for `host bench`'s decode
//! floor (the time reading a call's bytes takes after the benchmark's L2 flush), under the
//! emulator for the tests, and the XORs it must leave computed on the CPU.

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use kernel::stream::{self, StreamArgs, WORD_BYTES};

use crate::device::Gpu;
use crate::embedded;
use crate::error::{CudaContext as _, Error, Result};

/// The PTX build and entry point the read is loaded from (portable: any GPU).
pub const PTX: (&str, &str) = ("portable", "nvfp4_stream_read");

/// `bytes` as the kernel reads it: 16-byte words, the last one zero-padded.
pub fn padded(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.resize(bytes.len().next_multiple_of(WORD_BYTES as usize), 0);
    bytes
}

/// The u32 each warp of a launch on `sms` SMs leaves over `padded` bytes (a multiple of 16):
/// the XOR of the words t, t + T, ... of its 32 threads (T threads in the grid), each word
/// folded to one u32 by XOR of its four.
pub fn expected(padded: &[u8], sms: u32) -> Vec<u32> {
    assert!(padded.len().is_multiple_of(WORD_BYTES as usize), "whole 16-byte words");
    let launch = stream::launch(sms);
    let threads = (launch.grid[0] * launch.block[0]) as usize;
    let mut out = vec![0u32; stream::out_words(sms) as usize];
    for (i, word) in padded.chunks_exact(WORD_BYTES as usize).enumerate() {
        let folded = word.chunks_exact(4).fold(0, |x, b| x ^ u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        out[i % threads / 32] ^= folded;
    }
    out
}

/// Runs the read under the emulator over `padded` bytes as on `sms` SMs; returns what it
/// wrote (the output starts as poison, 0xFFFF_FFFF).
pub fn emulated(padded: &[u8], sms: u32) -> Result<Vec<u32>> {
    let memory = emu::GlobalMemory::new();
    let words = stream::out_words(sms) as usize;
    let args = StreamArgs {
        src: memory.alloc_from("bytes", padded),
        words: padded.len() as u64 / WORD_BYTES,
        out: memory.alloc_from("xors", &vec![0xFF; words * 4]),
    };
    let launch = stream::launch(sms);
    let config = emu::LaunchConfig { grid: launch.grid, block: launch.block, dynamic_smem: launch.dynamic_smem };
    emu::launch(&memory, config, || stream::stream_read(&args))?;
    let mut bytes = vec![0u8; words * 4];
    memory.read(args.out, &mut bytes).map_err(Error::Failed)?;
    Ok(bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

/// The read loaded on a GPU, with its input and output on the device.
#[derive(Debug)]
pub struct Reader<'g> {
    gpu: &'g Gpu,
    function: CudaFunction,
    src: CudaSlice<u8>,
    out: CudaSlice<u32>,
    words: u64,
}

impl<'g> Reader<'g> {
    /// Loads the kernel and copies `padded` bytes (a multiple of 16) to the device.
    pub fn new(gpu: &'g Gpu, padded: &[u8]) -> Result<Reader<'g>> {
        let (target, entry) = PTX;
        let module = embedded::load_module(&gpu.ctx, target)?;
        let function = module.load_function(entry).context(format!("finding kernel {entry}"))?;
        let src = gpu.stream.clone_htod(padded).context("copying the bytes to read")?;
        let words = stream::out_words(gpu.info.multiprocessors) as usize;
        let out = gpu.stream.alloc_zeros::<u32>(words).context("allocating the read's XORs")?;
        Ok(Reader { gpu, function, src, out, words: padded.len() as u64 / WORD_BYTES })
    }

    /// Enqueues one read of all the bytes on the GPU's stream.
    pub fn launch(&self) -> Result<()> {
        let geometry = stream::launch(self.gpu.info.multiprocessors);
        let config = LaunchConfig {
            grid_dim: (geometry.grid[0], geometry.grid[1], geometry.grid[2]),
            block_dim: (geometry.block[0], geometry.block[1], geometry.block[2]),
            shared_mem_bytes: 0,
        };
        let (src, out) = (self.src.device_ptr(&self.gpu.stream).0, self.out.device_ptr(&self.gpu.stream).0);
        let mut builder = self.gpu.stream.launch_builder(&self.function);
        builder.arg(&src).arg(&self.words).arg(&out);
        // SAFETY: the arguments match `nvfp4_stream_read`'s signature: `src` holds `words`
        // 16-byte words and `out` one u32 per warp of this launch's grid.
        unsafe { builder.launch(config) }.context("launching the read")?;
        Ok(())
    }

    /// What the last launch wrote (one u32 per warp).
    pub fn xors(&self) -> Result<Vec<u32>> {
        self.gpu.stream.clone_dtoh(&self.out).context("copying the read's XORs back")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_read_once_under_emulation() {
        // One SM's grid (2048 threads), 3.4 passes over it and a partial last word.
        let bytes: Vec<u8> =
            (0..(2048 * 16 * 3 + 16 * 777 + 5) as u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let padded = padded(bytes);
        assert_eq!(padded.len() % 16, 0);
        let want = expected(&padded, 1);
        assert_eq!(want.len(), 64);
        assert!(want.iter().all(|&x| x != 0), "the data must make every warp's XOR non-zero");
        // A word skipped or read twice would change its warp's XOR.
        assert_eq!(emulated(&padded, 1).unwrap(), want);
    }
}
