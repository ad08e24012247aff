//! Hardware probes: one tiny kernel per instruction family the emulator models.
//!
//! Each probe runs one CTA, drives its instructions on known data, and writes what it
//! observes (shared-memory bytes, registers, accumulators, predicate results) raw into a
//! global output buffer. The host (`host selftest --probes`) runs every probe on the GPU and
//! under the emulator and compares both with an expected value it computes in plain Rust
//! from the PTX ISA's definitions: a difference between GPU and emulator is a modelling
//! error, found on real hardware instead of in a kernel.
//!
//! Every probe takes the same three parameters ([`ProbeArgs`]): `out` (the output buffer),
//! `input` (the probe's input bytes) and `aux` (two tensor maps for [`tma`], else 0). The
//! layouts of input and output are documented per probe; the host crate's `probes` module
//! holds the launch geometry, inputs and expected values.
//!
//! | entry | PTX targets | instructions |
//! |---|---|---|
//! | `probe_cvt` | sm_90a, sm_100a | `cvt.rn.f16x2.e4m3x2`, `cvt.rn.f16x2.f32`, `cvt.rn.f16.f32` |
//! | `probe_cp_async` | sm_90a, sm_100a | `cp.async.cg` 16 B / `.ca` 4 B with `src_size`, commit / wait_group, `cp.async.mbarrier.arrive.noinc` |
//! | `probe_warp` | all (sm_75 portable too) | `shfl.sync.idx` with source lanes past 31 |
//! | `probe_bulk` | sm_90a, sm_100a | `cp.async.bulk` (1-D), `mbarrier.arrive.expect_tx`, `test_wait` / `try_wait` parities |
//! | `probe_tma` | sm_90a, sm_100a | `cp.async.bulk.tensor.2d`, 128B swizzle, out-of-bounds zero and NaN fill |
//! | `probe_wgmma` | sm_90a | `wgmma.mma_async` m64n64k16 SS and RS |
//! | `probe_tcgen05_cp` | sm_100a | `tcgen05.alloc`, `tcgen05.cp.32x128b.warpx4`, `tcgen05.ld.32x32b` |
//! | `probe_tcgen05_mma` | sm_100a | `tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X`, `tcgen05.commit` |

/// The parameters every probe takes (device addresses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct ProbeArgs {
    /// Output buffer (its size is the probe's).
    pub out: u64,
    /// Input bytes.
    pub input: u64,
    /// A tensor map (`probe_tma`), otherwise unused.
    pub aux: u64,
}

/// Defines the GPU entry point `$name(out, input, aux)` of a probe body.
macro_rules! probe_entry_point {
    ($name:ident => $body:path) => {
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        #[allow(missing_docs)]
        pub unsafe extern "ptx-kernel" fn $name(out: u64, input: u64, aux: u64) {
            $body(&$crate::probes::ProbeArgs { out, input, aux })
        }
    };
}

/// Stores 16 bytes (four words) to global memory.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
#[inline(always)]
fn st_global_16(addr: u64, v: [u32; 4]) {
    use crate::ptx::memory::st_global_b32;
    st_global_b32(addr, v[0]);
    st_global_b32(addr + 4, v[1]);
    st_global_b32(addr + 8, v[2]);
    st_global_b32(addr + 12, v[3]);
}

/// Copies `bytes` (a multiple of 16) of shared memory to global memory, 16 bytes per
/// thread per step, with `threads` threads.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
#[inline(always)]
fn shared_to_global(src: crate::ptx::SmemAddr, dst: u64, bytes: u32, tid: u32, threads: u32) {
    let mut chunk = tid;
    while chunk < bytes / 16 {
        st_global_16(dst + (chunk * 16) as u64, crate::ptx::memory::ld_shared_v4_b32(src.offset(chunk * 16)));
        chunk += threads;
    }
}

// ---------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------

/// `probe_cvt`: the conversions the kernels use.
///
/// Input: [`cvt::F32_VALUES`] f32 (tricky values: ties, subnormals, overflow, NaN).
/// Output (u32 words unless said): words 0..256: `cvt.rn.f16x2.e4m3x2` of the pair
/// `(t, 255 - t)` (low byte t) for thread t, so every e4m3 byte appears in both halves;
/// words 256..288: `cvt.rn.f16x2.f32 d, in[2i], in[2i+1]` (the first operand in the upper
/// half); then 64 u16: `cvt.rn.f16.f32` of each input.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod cvt {
    use crate::ptx::{cvt, memory, special};
    use crate::{Launch, probes::ProbeArgs};

    pub const THREADS: u32 = 256;
    /// f32 inputs.
    pub const F32_VALUES: u32 = 64;
    pub const INPUT_BYTES: u32 = 4 * F32_VALUES;
    pub const OUTPUT_BYTES: u32 = 4 * 256 + 4 * (F32_VALUES / 2) + 2 * F32_VALUES;
    pub const LAUNCH: Launch = Launch { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem: 0 };

    #[inline(always)]
    fn input_f32(input: u64, i: u32) -> f32 {
        let pair = memory::ld_global_nc_u64(input + 8 * (i / 2) as u64);
        f32::from_bits((pair >> (32 * (i % 2))) as u32)
    }

    #[inline(always)]
    pub fn probe(args: &ProbeArgs) {
        let t = special::tid_x();
        let pair = (t | (255 - t) << 8) as u16;
        memory::st_global_b32(args.out + 4 * t as u64, cvt::f16x2_from_e4m3x2(pair));
        if t < F32_VALUES / 2 {
            let (hi, lo) = (input_f32(args.input, 2 * t), input_f32(args.input, 2 * t + 1));
            memory::st_global_b32(args.out + 4 * (256 + t) as u64, cvt::f16x2_from_f32(hi, lo));
        }
        if t < F32_VALUES {
            let at = 4 * (256 + F32_VALUES / 2) + 2 * t;
            memory::st_global_b16(args.out + at as u64, cvt::f16_from_f32(input_f32(args.input, t)));
        }
    }

    probe_entry_point!(probe_cvt => probe);
}

// ---------------------------------------------------------------------------------------
// cp.async
// ---------------------------------------------------------------------------------------

/// `probe_cp_async`: non-bulk asynchronous copies with partial sources, in two groups,
/// then one completing on an mbarrier.
///
/// One warp. Thread t owns four 16-byte shared slots, each first filled with
/// [`cp_async::FILL`] by `st.shared`:
/// - slot 0: `cp.async.cg` 16 bytes from `input + 16t` with `src_size = t % 17`;
/// - slot 1: `cp.async.ca` 4 bytes from `input + 512 + 4t` with `src_size = t % 5` (the
///   other 12 bytes of the slot must keep the fill);
/// - both committed as group 1; slot 2: `cp.async.cg` 16 full bytes from
///   `input + 1024 + 16t`, committed as group 2;
/// - slot 3: `cp.async.cg` from `input + 1536 + 16t` with `src_size = 5t % 17`, followed by
///   `cp.async.mbarrier.arrive.noinc` on an mbarrier of count 32 (the arrivals count toward
///   it), no commit.
///
/// After `wait_group 1` it reads slots 0 and 1 back with `ld.shared`, after `wait_group 0`
/// slot 2, after waiting for the mbarrier's phase 0 slot 3. Output: 64 bytes per thread
/// at `64t`: slots 0, 1, 2, 3.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod cp_async {
    use crate::ptx::mbarrier::Mbarrier;
    use crate::ptx::{barrier, cp_async, fence, memory, special};
    use crate::{Launch, probes::ProbeArgs};

    pub const THREADS: u32 = 32;
    pub const INPUT_BYTES: u32 = 2048;
    pub const OUTPUT_BYTES: u32 = 64 * THREADS;
    /// What every slot holds before the copies (each byte 0xEE).
    pub const FILL: u32 = 0xEEEE_EEEE;
    const BARRIER_AT: u32 = 2048;
    pub const LAUNCH: Launch = Launch { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem: 4096 };

    #[inline(always)]
    pub fn probe(args: &ProbeArgs) {
        let t = special::tid_x();
        let smem = special::dynamic_smem();
        let bar = Mbarrier(smem.offset(BARRIER_AT));
        if t == 0 {
            bar.init(THREADS);
            fence::mbarrier_init();
        }
        barrier::sync_unaligned(0, THREADS);
        let slot = |i: u32| smem.offset(512 * i + 16 * t);
        for i in 0..4 {
            memory::st_shared_v4_b32(slot(i), [FILL; 4]);
        }
        cp_async::cg_16(slot(0), args.input + (16 * t) as u64, t % 17);
        cp_async::ca_4(slot(1), args.input + (512 + 4 * t) as u64, t % 5);
        cp_async::commit_group();
        cp_async::cg_16(slot(2), args.input + (1024 + 16 * t) as u64, 16);
        cp_async::commit_group();
        let out = args.out + (64 * t) as u64;
        cp_async::wait_group::<1>();
        super::st_global_16(out, memory::ld_shared_v4_b32(slot(0)));
        super::st_global_16(out + 16, memory::ld_shared_v4_b32(slot(1)));
        cp_async::wait_group::<0>();
        super::st_global_16(out + 32, memory::ld_shared_v4_b32(slot(2)));
        cp_async::cg_16(slot(3), args.input + (1536 + 16 * t) as u64, 5 * t % 17);
        cp_async::mbarrier_arrive_noinc(bar);
        bar.wait(0);
        super::st_global_16(out + 48, memory::ld_shared_v4_b32(slot(3)));
    }

    probe_entry_point!(probe_cp_async => probe);
}

// ---------------------------------------------------------------------------------------
// Warp shuffle
// ---------------------------------------------------------------------------------------

/// `probe_warp`: `shfl.sync.idx.b32` with source lanes past 31 (the lane is `src & 31`
/// with clamp 0x1f).
///
/// Two warps. Thread t (lane l) offers `value(t) = 0x0101_0101 · t ^ 0xA5A5_0000` and
/// reads lane `src(l) = 7l + 3 + 32 (l % 3)`. Output: one word per thread.
pub mod warp {
    use crate::ptx::{memory, special, warp};
    use crate::{Launch, probes::ProbeArgs};

    pub const THREADS: u32 = 64;
    pub const OUTPUT_BYTES: u32 = 4 * THREADS;
    pub const LAUNCH: Launch = Launch { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem: 0 };

    /// What thread `t` offers.
    pub const fn value(t: u32) -> u32 {
        0x0101_0101u32.wrapping_mul(t) ^ 0xA5A5_0000
    }

    /// The source lane operand lane `l` passes.
    pub const fn src(l: u32) -> u32 {
        7 * l + 3 + 32 * (l % 3)
    }

    #[inline(always)]
    pub fn probe(args: &ProbeArgs) {
        let t = special::tid_x();
        let got = warp::shfl_sync_idx(value(t), src(t % 32));
        memory::st_global_b32(args.out + 4 * t as u64, got);
    }

    probe_entry_point!(probe_warp => probe);
}

// ---------------------------------------------------------------------------------------
// 1-D bulk copy and mbarrier phases
// ---------------------------------------------------------------------------------------

/// `probe_bulk`: two 1-D bulk copies completing one mbarrier phase, and the parity a
/// `test_wait` reports around each phase.
///
/// One warp. Thread 0 initialises the mbarrier (count 1) and records `test_wait` results
/// (1 = true) as output words:
/// - 0, 1: parity 0, parity 1 right after init (phase 0 current);
/// - 2: parity 0 after `arrive.expect_tx(1072)`, before any copy is issued (the arrival
///   is done but 1072 bytes are pending);
/// - then it issues `cp.async.bulk` of input[0..1024] to shared[0..1024] and of
///   input[1040..1088] to shared[1024..1072]; every thread waits for parity 0;
/// - 3, 4: parity 0, parity 1 after phase 0 completed;
/// - after a CTA barrier, one plain arrival completes phase 1: 5, 6: parity 1, parity 0;
/// - 7: 1 once a `try_wait.parity 1` loop right after init has returned (the phase before
///   the current one counts as complete: it passes at once).
///
/// Words 8..16 are 0; bytes 64..1136 are shared[0..1072] as read back by the warp.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod bulk {
    use crate::ptx::mbarrier::Mbarrier;
    use crate::ptx::{barrier, bulk, fence, memory, special};
    use crate::{Launch, probes::ProbeArgs};

    pub const THREADS: u32 = 32;
    pub const INPUT_BYTES: u32 = 1088;
    /// Bytes the two copies deliver.
    pub const COPIED: u32 = 1072;
    /// Where the shared bytes start in the output.
    pub const DATA_AT: u32 = 64;
    pub const OUTPUT_BYTES: u32 = DATA_AT + COPIED;
    const BARRIER_AT: u32 = 1536;
    pub const LAUNCH: Launch = Launch { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem: 2048 };

    #[inline(always)]
    pub fn probe(args: &ProbeArgs) {
        let t = special::tid_x();
        let smem = special::dynamic_smem();
        let bar = Mbarrier(smem.offset(BARRIER_AT));
        let observe = |word: u32, value: bool| memory::st_global_b32(args.out + 4 * word as u64, value as u32);
        // Words 8..16 are never observed (thread 0 writes 0..8 itself).
        if (8..16).contains(&t) {
            memory::st_global_b32(args.out + 4 * t as u64, 0);
        }
        if t == 0 {
            bar.init(1);
            fence::mbarrier_init();
            observe(0, bar.test_wait(0));
            observe(1, bar.test_wait(1));
            // try_wait on the phase before the current one passes at once (the
            // producer's first-lap wait on an `empty` barrier relies on it).
            bar.wait(1);
            observe(7, true);
        }
        barrier::sync_unaligned(0, THREADS);
        if t == 0 {
            bar.arrive_expect_tx(COPIED);
            observe(2, bar.test_wait(0));
            bulk::global_to_shared(smem, args.input, 1024, bar);
            bulk::global_to_shared(smem.offset(1024), args.input + 1040, 48, bar);
        }
        bar.wait(0);
        if t == 0 {
            observe(3, bar.test_wait(0));
            observe(4, bar.test_wait(1));
        }
        super::shared_to_global(smem, args.out + DATA_AT as u64, COPIED, t, THREADS);
        // Every thread has passed its wait for phase 0 before phase 1 completes.
        barrier::sync_unaligned(0, THREADS);
        if t == 0 {
            bar.arrive();
            observe(5, bar.test_wait(1));
            observe(6, bar.test_wait(0));
        }
    }

    probe_entry_point!(probe_bulk => probe);
}

// ---------------------------------------------------------------------------------------
// Tensor (TMA) copy
// ---------------------------------------------------------------------------------------

/// `probe_tma`: four 2-D tensor copies through host-built tensor maps with 128B swizzle.
///
/// The tensor (input) is [`tma::ROWS`] rows of [`tma::COLS`] 2-byte elements with a row
/// pitch of [`tma::PITCH`] bytes (the bytes between COLS and the pitch are not part of it);
/// the box is 64 x 16 elements (128-byte rows: one swizzle span). `aux` holds two tensor
/// maps of it, 128 bytes apart: map 0 as u16 with zero fill, map 1 as f16 with NaN fill
/// (`CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA`). Boxes at (x, y) = (0, 0)
/// (inside), (64, 32) (its right part and bottom rows outside) and (-16, -3) (negative
/// coordinates: the top-left outside) through map 0, and (64, 32) through map 1, land at
/// shared offsets 0, 2048, 4096, 6144. Output: the 8192 shared bytes as they are,
/// swizzle included (the NaN bits the hardware fills with are what box 3 measures).
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod tma {
    use crate::ptx::mbarrier::Mbarrier;
    use crate::ptx::{barrier, bulk, fence, special};
    use crate::{Launch, probes::ProbeArgs};

    pub const THREADS: u32 = 32;
    /// Tensor extent: elements per row (dimension 0) and rows (dimension 1).
    pub const COLS: u32 = 100;
    pub const ROWS: u32 = 40;
    /// Bytes per element.
    pub const ELEM_BYTES: u32 = 2;
    /// Global row pitch in bytes.
    pub const PITCH: u32 = 256;
    /// Box extent in elements.
    pub const BOX: [u32; 2] = [64, 16];
    /// Bytes per box in shared memory.
    pub const BOX_BYTES: u32 = BOX[0] * BOX[1] * ELEM_BYTES;
    /// Box origins (x, y) in elements, and the tensor map (0: zero fill, 1: NaN fill).
    pub const BOXES: [(i32, i32, u32); 4] = [(0, 0, 0), (64, 32, 0), (-16, -3, 0), (64, 32, 1)];
    /// Bytes of one tensor map (`CUtensorMap`); `aux` holds two.
    pub const MAP_BYTES: u32 = 128;
    pub const INPUT_BYTES: u32 = ROWS * PITCH;
    pub const OUTPUT_BYTES: u32 = BOXES.len() as u32 * BOX_BYTES;
    const BARRIER_AT: u32 = OUTPUT_BYTES;
    pub const LAUNCH: Launch = Launch { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem: 12288 };

    #[inline(always)]
    // `seq!` unrolls with literal indices (0 * BOX_BYTES and the like).
    #[allow(clippy::identity_op, clippy::erasing_op)]
    pub fn probe(args: &ProbeArgs) {
        let t = special::tid_x();
        // 1024-byte aligned (the 128B swizzle's repeat): the dynamic base is.
        let smem = special::dynamic_smem();
        let bar = Mbarrier(smem.offset(BARRIER_AT));
        if t == 0 {
            bar.init(1);
            fence::mbarrier_init();
        }
        barrier::sync_unaligned(0, THREADS);
        if t == 0 {
            bar.arrive_expect_tx(OUTPUT_BYTES);
            seq_macro::seq!(I in 0..4 {
                let (x, y, map) = BOXES[I];
                let map = args.aux + (map * MAP_BYTES) as u64;
                bulk::tensor_2d_global_to_shared(smem.offset(I * BOX_BYTES), map, x, y, bar);
            });
        }
        bar.wait(0);
        super::shared_to_global(smem, args.out, OUTPUT_BYTES, t, THREADS);
    }

    probe_entry_point!(probe_tma => probe);
}

// ---------------------------------------------------------------------------------------
// wgmma
// ---------------------------------------------------------------------------------------

/// `probe_wgmma`: D = A·Bᵀ for A 64x64, B 64x64 fp16 (K = 64: four k16 steps), once with
/// both operands in 128B-swizzled shared memory (SS) and once with A from registers (RS).
///
/// One warpgroup. Input: A then B, row-major `[64][64]` fp16 each. The threads store both
/// into shared memory 128B-swizzled (row r, 16-byte chunk c at chunk `c ^ (r % 8)`).
/// SS: the accumulators start at 1e30 (so a `scale-d = false` that reads them shows), four
/// `m64n64k16` with the descriptors advanced 32 bytes per step. RS: the A fragments read
/// from the swizzled tile with `ld.shared` per the documented fragment layout.
/// Output: thread `tid`'s 32 SS accumulators as f32 bits at `4 * (32 tid + v)`, then the
/// RS ones at `16384 + 4 * (32 tid + v)`.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod wgmma {
    use nvfp4::sm90::SmemDesc;
    use nvfp4::swizzle::Swizzle;

    use crate::ptx::{SmemAddr, barrier, fence, memory, special, wgmma};
    use crate::{Launch, probes::ProbeArgs};

    pub const THREADS: u32 = 128;
    /// Rows of A, rows of B (= N), K.
    pub const M: u32 = 64;
    pub const N: u32 = 64;
    pub const K: u32 = 64;
    const TILE_BYTES: u32 = 64 * 128;
    pub const INPUT_BYTES: u32 = 2 * TILE_BYTES;
    /// Where the RS accumulators start in the output.
    pub const RS_AT: u32 = THREADS * 32 * 4;
    pub const OUTPUT_BYTES: u32 = 2 * RS_AT;
    pub const LAUNCH: Launch = Launch { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem: 2 * TILE_BYTES };

    /// Shared address of fp16 element (row, k) of the swizzled tile at `tile`.
    #[inline(always)]
    fn element(tile: SmemAddr, row: u32, k: u32) -> SmemAddr {
        SmemAddr(Swizzle::B128.apply(tile.0 + 128 * row + 2 * k))
    }

    #[inline(always)]
    #[allow(clippy::identity_op, clippy::erasing_op)]
    fn store(out: u64, acc: &[f32; 32]) {
        seq_macro::seq!(V in 0..32 {
            memory::st_global_b32(out + 4 * V, acc[V].to_bits());
        });
    }

    #[inline(always)]
    #[allow(clippy::identity_op, clippy::erasing_op, clippy::eq_op)]
    pub fn probe(args: &ProbeArgs) {
        let tid = special::tid_x();
        let smem = special::dynamic_smem();
        let (a_tile, b_tile) = (smem, smem.offset(TILE_BYTES));
        // Both tiles: 1024 chunks of 16 bytes, swizzled on the absolute address (the tile
        // starts on a 1024-byte boundary).
        let mut chunk = tid;
        while chunk < 2 * TILE_BYTES / 16 {
            let src = args.input + 16 * chunk as u64;
            let (lo, hi) = (memory::ld_global_nc_u64(src), memory::ld_global_nc_u64(src + 8));
            let v = [lo as u32, (lo >> 32) as u32, hi as u32, (hi >> 32) as u32];
            memory::st_shared_v4_b32(SmemAddr(Swizzle::B128.apply(smem.0 + 16 * chunk)), v);
            chunk += THREADS;
        }
        fence::proxy_async_shared_cta();
        barrier::sync_unaligned(0, THREADS);

        let desc_a = SmemDesc::new(a_tile.0, 16, 1024, Swizzle::B128);
        let desc_b = SmemDesc::new(b_tile.0, 16, 1024, Swizzle::B128);
        let out = args.out + (128 * tid) as u64;

        // SS.
        let mut acc = [1e30f32; 32];
        wgmma::fence();
        for step in 0..K / 16 {
            // SAFETY: the tiles stay untouched and `acc` alive until the wait below.
            unsafe {
                wgmma::mma_async_ss_m64n64(&mut acc, desc_a.advance(32 * step), desc_b.advance(32 * step), step > 0)
            };
        }
        wgmma::commit_group();
        wgmma::wait_group::<0>();
        wgmma::fence_operand(&mut acc);
        store(out, &acc);

        // RS: the A fragments of the four k16 steps.
        let (w, lane) = (tid / 32, tid % 32);
        let (row, col) = (16 * w + lane / 4, 2 * (lane % 4));
        let fragment = |step: u32| {
            let k = 16 * step + col;
            [
                memory::ld_shared_b32(element(a_tile, row, k)),
                memory::ld_shared_b32(element(a_tile, row + 8, k)),
                memory::ld_shared_b32(element(a_tile, row, k + 8)),
                memory::ld_shared_b32(element(a_tile, row + 8, k + 8)),
            ]
        };
        let frags = [fragment(0), fragment(1), fragment(2), fragment(3)];
        let mut acc = [1e30f32; 32];
        wgmma::fence();
        seq_macro::seq!(S in 0..4 {
            // SAFETY: B stays untouched and `acc`, `frags` alive until the wait below.
            unsafe { wgmma::mma_async_rs_m64n64(&mut acc, &frags[S], desc_b.advance(32 * S), S > 0) };
        });
        wgmma::commit_group();
        wgmma::wait_group::<0>();
        wgmma::fence_operand(&mut acc);
        store(out + RS_AT as u64, &acc);
    }

    probe_entry_point!(probe_wgmma => probe);
}

// ---------------------------------------------------------------------------------------
// tcgen05
// ---------------------------------------------------------------------------------------

/// Shared pieces of the two tcgen05 probes: 4 warps, tensor memory allocated by warp 0,
/// its address handed over through shared memory.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_100a"))]
mod tmem {
    use crate::ptx::mbarrier::Mbarrier;
    use crate::ptx::tcgen05::{self, TmemAddr};
    use crate::ptx::{SmemAddr, barrier, cp_async, fence, memory, special};

    pub const THREADS: u32 = 128;

    /// Copies `bytes` of input to shared memory with cp.async (16-byte chunk at offset o
    /// to `place(o)`), allocates `columns` of tensor memory (warp 0, base written to
    /// `slot`), initialises `bar` (count 1); returns the tensor-memory base once all of
    /// it is visible to every thread.
    #[inline(always)]
    pub fn setup(
        input: u64,
        bytes: u32,
        place: impl Fn(u32) -> SmemAddr,
        slot: SmemAddr,
        columns: u32,
        bar: Mbarrier,
    ) -> TmemAddr {
        let tid = special::tid_x();
        let mut chunk = tid;
        while chunk < bytes / 16 {
            cp_async::cg_16(place(16 * chunk), input + 16 * chunk as u64, 16);
            chunk += THREADS;
        }
        cp_async::commit_group();
        cp_async::wait_group::<0>();
        // cp.async writes through the generic proxy; tcgen05.cp and .mma read through the
        // async proxy.
        fence::proxy_async_shared_cta();
        if tid / 32 == 0 {
            tcgen05::alloc(slot, columns);
        }
        if tid == 0 {
            bar.init(1);
            fence::mbarrier_init();
        }
        tcgen05::fence_before_thread_sync();
        barrier::sync_unaligned(0, THREADS);
        tcgen05::fence_after_thread_sync();
        TmemAddr(memory::ld_shared_b32(slot))
    }

    /// Warp w reads lanes 32w..32w+31, columns `column..column + 32` of `base`; thread
    /// (w, lane) writes its 32 words to `out + 4 * (row_words * (32w + lane) + column)`.
    #[inline(always)]
    #[allow(clippy::identity_op, clippy::erasing_op)]
    pub fn read_out(base: TmemAddr, column: u32, out: u64, row_words: u32) {
        let tid = special::tid_x();
        let mut regs = [0u32; 32];
        tcgen05::ld_32x32b_x32(base.lane(32 * (tid / 32)).column(column), &mut regs);
        tcgen05::wait_ld(&mut regs);
        let at = out + 4 * (row_words * tid + column) as u64;
        seq_macro::seq!(I in 0..32 {
            memory::st_global_b32(at + 4 * I, regs[I]);
        });
    }

    /// Frees the tensor memory once every warp is done with it.
    #[inline(always)]
    pub fn teardown(base: TmemAddr, columns: u32) {
        tcgen05::fence_before_thread_sync();
        barrier::sync_unaligned(0, THREADS);
        if special::tid_x() / 32 == 0 {
            tcgen05::fence_after_thread_sync();
            tcgen05::dealloc(base, columns);
            tcgen05::relinquish_alloc_permit();
        }
    }
}

/// `probe_tcgen05_cp`: eight 512-byte tiles copied into tensor memory with
/// `tcgen05.cp.32x128b.warpx4` (tile i to columns 4i..4i+3), read back whole with
/// `tcgen05.ld.32x32b.x32` by 4 warps.
///
/// Input: 8 tiles of 512 bytes. Output: 128 lanes x 32 columns of u32, lane-major
/// (`4 * (32 lane + column)`). Expected (PTX ISA `.warpx4`): source row r (16 bytes at
/// `16r` of a tile) lands in lanes r, r + 32, r + 64, r + 96, its word j in column 4i + j.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_100a"))]
pub mod tcgen05_cp {
    use nvfp4::sm100::SmemDesc;

    use super::tmem;
    use crate::ptx::mbarrier::Mbarrier;
    use crate::ptx::{special, tcgen05};
    use crate::{Launch, probes::ProbeArgs};

    pub const THREADS: u32 = tmem::THREADS;
    pub const TILES: u32 = 8;
    pub const INPUT_BYTES: u32 = 512 * TILES;
    pub const COLUMNS: u32 = 32;
    pub const OUTPUT_BYTES: u32 = 128 * COLUMNS * 4;
    const SLOT_AT: u32 = INPUT_BYTES;
    const BARRIER_AT: u32 = INPUT_BYTES + 8;
    pub const LAUNCH: Launch = Launch { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem: 8192 };

    #[inline(always)]
    pub fn probe(args: &ProbeArgs) {
        let smem = special::dynamic_smem();
        let bar = Mbarrier(smem.offset(BARRIER_AT));
        let tmem = tmem::setup(args.input, INPUT_BYTES, |o| smem.offset(o), smem.offset(SLOT_AT), COLUMNS, bar);
        if special::tid_x() == 0 {
            for i in 0..TILES {
                tcgen05::cp_32x128b_warpx4(tmem.column(4 * i), SmemDesc::scale_tile(smem.0 + 512 * i));
            }
            tcgen05::commit(bar);
        }
        bar.wait(0);
        tcgen05::fence_after_thread_sync();
        tmem::read_out(tmem, 0, args.out, COLUMNS);
        tmem::teardown(tmem, COLUMNS);
    }

    probe_entry_point!(probe_tcgen05_cp => probe);
}

/// `probe_tcgen05_mma`: D[128 x 64] = Σ over K = 256 of (A·SFA)(B·SFB)ᵀ with four
/// `tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X` (M 128, N 64, K 64).
///
/// Input: A [128][128 bytes] packed e2m1 (low nibble the even k), B [64][128 bytes], SFA
/// and SFB: four 512-byte blocked scale tiles each (tile k holds the scales of K
/// 64k..64k+63, rows of B past 64 unused). A and B are stored 128B-swizzled (one 128-byte
/// swizzle row per operand row), the descriptors advanced 32 bytes per MMA; the scale tiles
/// go to tensor memory with `tcgen05.cp.32x128b.warpx4` (SFA tile k at column 64 + 4k, SFB
/// at 80 + 4k). Output: D as f32 bits, row-major `[128][64]`.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_100a"))]
pub mod tcgen05_mma {
    use nvfp4::sm100::{InstrDesc, SmemDesc};
    use nvfp4::swizzle::Swizzle;

    use super::tmem;
    use crate::ptx::mbarrier::Mbarrier;
    use crate::ptx::{SmemAddr, special, tcgen05};
    use crate::{Launch, probes::ProbeArgs};

    pub const THREADS: u32 = tmem::THREADS;
    pub const M: u32 = 128;
    pub const N: u32 = 64;
    pub const K: u32 = 256;
    /// Byte offsets of the operands, in the input and in shared memory alike.
    pub const A_AT: u32 = 0;
    pub const B_AT: u32 = M * K / 2;
    pub const SFA_AT: u32 = B_AT + N * K / 2;
    pub const SFB_AT: u32 = SFA_AT + 512 * (K / 64);
    pub const INPUT_BYTES: u32 = SFB_AT + 512 * (K / 64);
    const SLOT_AT: u32 = INPUT_BYTES;
    const BARRIER_AT: u32 = INPUT_BYTES + 8;
    pub const OUTPUT_BYTES: u32 = M * N * 4;
    /// Tensor-memory columns: D, then SFA, then SFB.
    const COLUMNS: u32 = 128;
    const SFA_COLUMN: u32 = N;
    const SFB_COLUMN: u32 = N + 4 * (K / 64);
    const IDESC: InstrDesc = InstrDesc::nvfp4(M, N);
    pub const LAUNCH: Launch = Launch { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem: 32768 };

    #[inline(always)]
    pub fn probe(args: &ProbeArgs) {
        let smem = special::dynamic_smem();
        let bar = Mbarrier(smem.offset(BARRIER_AT));
        // A and B 128B-swizzled on the absolute address (both start on 1024-byte
        // boundaries), the scale tiles as they are.
        let place = |o: u32| {
            if o < SFA_AT { SmemAddr(Swizzle::B128.apply(smem.0 + o)) } else { smem.offset(o) }
        };
        let tmem = tmem::setup(args.input, INPUT_BYTES, place, smem.offset(SLOT_AT), COLUMNS, bar);
        if special::tid_x() == 0 {
            let a = SmemDesc::new(smem.0 + A_AT, 0, 1024, Swizzle::B128);
            let b = SmemDesc::new(smem.0 + B_AT, 0, 1024, Swizzle::B128);
            for k in 0..K / 64 {
                let (sfa, sfb) = (tmem.column(SFA_COLUMN + 4 * k), tmem.column(SFB_COLUMN + 4 * k));
                tcgen05::cp_32x128b_warpx4(sfa, SmemDesc::scale_tile(smem.0 + SFA_AT + 512 * k));
                tcgen05::cp_32x128b_warpx4(sfb, SmemDesc::scale_tile(smem.0 + SFB_AT + 512 * k));
                tcgen05::mma_mxf4nvf4_block_scale_4x(
                    tmem,
                    a.advance(32 * k),
                    b.advance(32 * k),
                    IDESC,
                    sfa,
                    sfb,
                    k > 0,
                );
            }
            tcgen05::commit(bar);
        }
        bar.wait(0);
        tcgen05::fence_after_thread_sync();
        tmem::read_out(tmem, 0, args.out, N);
        tmem::read_out(tmem, 32, args.out, N);
        tmem::teardown(tmem, COLUMNS);
    }

    probe_entry_point!(probe_tcgen05_mma => probe);
}
