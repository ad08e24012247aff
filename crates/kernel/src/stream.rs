//! `stream`: a plain streaming read, the floor of a decode call under the benchmark's method.
//!
//! Not part of our GEMM. At decode sizes a call is one pass over the weights, so its floor
//! is the time reading that many bytes takes. The copy bandwidth `host bench` measures (1
//! GiB copied, read plus written) is the card's steady state; a timed call starts instead
//! right after the benchmark's L2 flush, a memset that leaves L2 full of dirty lines, whose
//! write-back shares the DRAM with the call's reads. On the H100 any read of 58.7 MB took
//! at least 29.6 us there, 22.3 us after a flush that reads, where the copy bandwidth
//! predicts 19.6 (docs/perf-notes.md, session 27). `host bench` times this kernel over a
//! decode shape's bytes after the same flush and reports each row against it (`of read`).
//!
//! Thread t of the T in the grid reads the 16-byte words t, t + T, t + 2T, ... (a warp reads
//! 512 contiguous bytes per load), four loads issued before their first use, XORs them,
//! and each warp's lane 0 stores the XOR of the warp's words to `out[warp]`: nothing for the
//! compiler to drop, and a test can check that every word was read exactly once.

use crate::Launch;
use crate::ptx::{memory, special, warp};

/// Threads per CTA, and CTAs per SM in [`launch`].
pub const BLOCK: u32 = 512;
const CTAS_PER_SM: u32 = 4;
/// Bytes per load (one `ld.global.nc.v4.b32`), and loads in flight per thread.
pub const WORD_BYTES: u64 = 16;
const IN_FLIGHT: u64 = 4;
const WARP: u32 = 32;

/// What one read launch reads and where it leaves its XORs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct StreamArgs {
    /// `words` 16-byte words (a 16-byte aligned device address).
    pub src: u64,
    pub words: u64,
    /// One u32 per warp of the grid ([`out_words`]).
    pub out: u64,
}

/// The launch on a GPU with `sms` SMs: `CTAS_PER_SM` CTAs of [`BLOCK`] threads per SM.
pub const fn launch(sms: u32) -> Launch {
    let sms = if sms == 0 { 1 } else { sms };
    Launch { grid: [sms * CTAS_PER_SM, 1, 1], block: [BLOCK, 1, 1], dynamic_smem: 0 }
}

/// The u32s a launch of [`launch`]`(sms)` writes to `out`: one per warp.
pub const fn out_words(sms: u32) -> u32 {
    let l = launch(sms);
    l.grid[0] * l.block[0] / WARP
}

/// The kernel body, run by every thread.
#[inline(always)]
pub fn stream_read(args: &StreamArgs) {
    let threads = special::nctaid_x() as u64 * BLOCK as u64;
    let tid = special::ctaid_x() * BLOCK + special::tid_x();
    // Each 16-byte word folded to one u32 (XOR of its four); words past the end read as 0
    // (a predicated load), so all four loads are issued before the first XOR waits for one,
    // even in the last round (at decode sizes a thread has only one or two rounds).
    let word = |i: u64| {
        if i < args.words {
            let [a, b, c, d] = memory::ld_global_nc_v4_b32(args.src + i * WORD_BYTES);
            a ^ b ^ c ^ d
        } else {
            0
        }
    };
    let mut xor = 0;
    let mut i = tid as u64;
    while i < args.words {
        let loads = [word(i), word(i + threads), word(i + 2 * threads), word(i + 3 * threads)];
        xor ^= loads[0] ^ loads[1] ^ loads[2] ^ loads[3];
        i += IN_FLIGHT * threads;
    }
    // The warp's XOR: a butterfly of shuffles, the same in every lane.
    let lane = tid % WARP;
    let mut sum = xor;
    let mut offset = WARP / 2;
    while offset > 0 {
        sum ^= warp::shfl_sync_idx(sum, lane ^ offset);
        offset /= 2;
    }
    if lane == 0 {
        memory::st_global_b32(args.out + (tid / WARP) as u64 * 4, sum);
    }
}

/// The GPU entry point: `.entry nvfp4_stream_read`.
///
/// # Safety
///
/// `src` must hold `words` 16-byte words, 16-byte aligned, and `out` one u32 per warp of
/// the grid; any grid is correct.
#[cfg(target_arch = "nvptx64")]
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn nvfp4_stream_read(src: u64, words: u64, out: u64) {
    stream_read(&StreamArgs { src, words, out })
}
