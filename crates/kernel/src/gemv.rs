//! Decode on Hopper's CUDA cores: C = A·Bᵀ for at most [`MAX_M`] NVFP4 activation rows,
//! in one launch (sm90v2's kernel for such calls, see [`takes`]).
//!
//! **Why not the tensor cores.** At M = 1 a call streams N·K/2 weight bytes and makes N·K
//! products per activation row: 58.7 MB and 117 M products on 1x7168x16384. sm90v2's
//! decode tiles feed them to wgmma through a prologue launch (the activation images), a
//! ring of stages split over up to 16 CTAs per tile, and a third launch that sums the
//! splits: 46.5 us on an H100, where reading the weights at the measured copy bandwidth
//! takes 22. The SMs' CUDA cores make 117 M products in a few microseconds if each costs
//! a few instructions, so one launch can stream the weights with nothing before it and
//! nothing after it: 41.8-42.1 us there, 16.6-16.7 against 23.1-23.3 on 1x4096x7168,
//! 12.4-12.6 against 16.2-16.3 on 1x7168x2048 (docs/perf-notes.md, session 25).
//!
//! **Exact integer products.** Twice an e2m1 value is an integer in -12..=12, a signed
//! byte, so a scale block's dot product S = Σ (2a)(2b) over its 16 values is an exact
//! integer (|S| ≤ 2304), which four `dp4a` (four byte products each) compute. The block
//! then adds S · (sfa/4 · sfb) to an f32 accumulator with one `fma.rn.f32`: the scale
//! product is exact (two e4m3 significands of 4 bits), S times it too (12 x 8 bits), so
//! the only rounding is the f32 sum's, as in every kernel of this crate. A code becomes its
//! signed byte by two byte-table lookups (`prmt`): see `doubled`.
//!
//! **Work.** The grid is [CTAs per batch, L], one CTA of [`THREADS`] threads per SM; CTA
//! x of a batch owns weight rows [x·N/X, (x+1)·N/X) (X CTAs per batch), in passes of at
//! most [`PASS_ROWS`] rows (equal within a row). Steps:
//! 1. The CTA converts its batch's M activation rows into shared memory: each 16-value
//!    block as 16 signed bytes and its scale as the f32 sfa/4 (`prepare`).
//! 2. Each pass cuts every row into `parts` equal ranges of *warp loads* (a warp load is
//!    64 consecutive scale blocks of one row, 16 bytes per lane: 512 contiguous bytes, one
//!    `ld.global.nc.v4` per lane, and the lane's two scale bytes) and deals the (row,
//!    part) units to the 16 warps round robin ([`parts`] picks the count). A warp walks
//!    its units' loads in batches of `DEPTH`: it issues the next batch's loads, then
//!    multiplies the current one, so two batches are in flight (6 KiB per warp, 96 KiB per
//!    SM). At each unit's end the warp sums its lanes (a fixed butterfly of shuffles) and
//!    lane 0 stores the unit's partial per activation row in shared memory.
//! 3. After a CTA barrier, one thread per (row, activation row) adds the row's parts in
//!    part order, applies the epilogue and stores C; a second barrier frees the partials
//!    for the next pass.
//!
//! Every sum has a fixed order (lanes, then butterfly, then parts), so the result does
//! not depend on timing. No workspace, no other launch, no split across CTAs. The body is
//! compiled once per M (`rows`), so every loop over the activation rows is unrolled.
//!
//! **Where the time goes** (session 25): on 1x7168x16384 the launch reads DRAM at 52 % of
//! its peak and issues in 44 % of the cycles (`ncu`), 16.7 M warp instructions: about 146
//! per warp load, some 60 of them the codes' conversion (the `prmt` lookups, copies of
//! their table word, the byte negation); its warps wait most often for instructions to be
//! fetched (`stalled_no_instruction` 2.6 warps per issue; 3.0, with memory next at 1.9,
//! before the batch's code was halved). Each further
//! activation row adds its `dp4a`s and shared-memory reads: 4x7168x16384 took 54.3 us on
//! an earlier build, against 46.6 on decode tiles, hence [`MAX_PRODUCTS`].
//!
//! **Limits.** NVFP4 activations only: 16-bit activations (W4A16) are not integers, and
//! stay on sm90v2's decode tiles. M ≤ [`MAX_M`], M·N·K·L ≤ [`MAX_PRODUCTS`], K a multiple
//! of [`K_MULTIPLE`] and M·K small enough for the activations to fit the CTA's shared
//! memory ([`takes`]); other calls run on the decode tiles.

use nvfp4::e2m1;
use nvfp4::layout;
use nvfp4::shape::SF_VECTOR;

use crate::epilogue::{Epilogue, OUT_BYTES};
use crate::ptx::{SmemAddr, barrier, cvt, integer, memory, special, warp};
use crate::{GemmArgs, Launch, MAX_GRID_YZ};

/// The most activation rows a call may have.
pub const MAX_M: u32 = 4;
/// Threads per CTA (16 warps); one CTA per SM.
pub const THREADS: u32 = 512;
const CTAS_PER_SM: u32 = 1;
const WARP: u32 = 32;
const WARPS: u32 = THREADS / WARP;
/// Registers per thread: the SM's 64 K over one CTA (the build script writes the launch
/// bounds into the PTX): room for two batches of loads in flight.
const REGISTERS_PER_SM: u32 = 65536;
pub const LAUNCH_BOUNDS: (&str, u32, u32, u32) =
    (ENTRY, THREADS, CTAS_PER_SM, REGISTERS_PER_SM / (CTAS_PER_SM * THREADS));
/// The entry point.
pub const ENTRY: &str = "nvfp4_gemv_sm90";
/// Packed bytes of one scale block (16 e2m1 values).
const BLOCK_BYTES: u32 = SF_VECTOR / 2;
/// Scale blocks per lane and load (16 bytes, one `ld.global.nc.v4`), and per warp load
/// (512 contiguous bytes of a row).
const LANE_BLOCKS: u32 = 2;
const LOAD_BLOCKS: u32 = LANE_BLOCKS * WARP;
/// Warp loads of one batch: a warp issues the next batch's loads before it multiplies the
/// current one, so two batches (6 KiB per warp, 96 KiB per SM) are in flight.
const DEPTH: u32 = 6;
/// At most this many parts per row, and rows per pass: the partials' shared memory. (Each
/// pass ends with the warps' pipelines drained and two barriers: on 1x28672x4096, 4 passes
/// of 64 rows per CTA took 50.9 us, one of 217 rows 42.6-42.8 with the parts also counting
/// each unit's end, docs/perf-notes.md, session 25.)
const MAX_PARTS: u32 = 8;
pub const PASS_ROWS: u32 = 256;
const _: () = assert!(WARPS.is_multiple_of(MAX_PARTS), "a warp's units all have the same part (see `Walk`)");
/// Shared memory a CTA may use (one CTA per SM).
pub const SMEM_LIMIT: u32 = 200 * 1024;
/// K must be a multiple of this: a lane's 16-byte loads stay aligned and inside the row.
pub const K_MULTIPLE: u32 = LANE_BLOCKS * SF_VECTOR;
/// Bytes of one block's activations as signed bytes, and of one warp load's blocks.
const BLOCK_ACT_BYTES: u32 = SF_VECTOR;
const LOAD_ACT_BYTES: u32 = LOAD_BLOCKS * BLOCK_ACT_BYTES;
const F32_BYTES: u32 = 4;
/// Named barrier for the whole CTA.
const BARRIER_CTA: u32 = 0;

const _: () = assert!(LANE_BLOCKS * BLOCK_BYTES == 16, "a lane's load is one v4: four words of 8 codes");
const _: () = assert!(DEPTH == 6, "`gemv` unrolls a batch with `seq!(D in 0..6)`");
const _: () = assert!(CTAS_PER_SM * (SMEM_LIMIT + 1024) <= 228 * 1024, "the CTAs fit an SM's shared memory");

// ---------------------------------------------------------------------------------------
// Shared memory map: activations [M][K rounded up to a warp load] signed bytes, their
// scales [M][K/16] f32 (sfa/4), then the partials [PASS_ROWS][MAX_PARTS][MAX_M] f32.
// ---------------------------------------------------------------------------------------

const fn act_row_bytes(k: u64) -> u64 {
    (k / SF_VECTOR as u64 * BLOCK_ACT_BYTES as u64).next_multiple_of(LOAD_ACT_BYTES as u64)
}
const fn scales_offset(m: u64, k: u64) -> u64 {
    m * act_row_bytes(k)
}
const fn partials_offset(m: u64, k: u64) -> u64 {
    (scales_offset(m, k) + m * (k / SF_VECTOR as u64) * F32_BYTES as u64).next_multiple_of(16)
}
const PARTIALS_BYTES: u64 = (PASS_ROWS * MAX_PARTS * MAX_M * F32_BYTES) as u64;
const fn smem_bytes_u64(m: u32, k: u32) -> u64 {
    partials_offset(m as u64, k as u64) + PARTIALS_BYTES
}

/// Dynamic shared memory of a call with `m` activation rows of `k` values (only
/// meaningful for calls the kernel [`takes`]).
pub const fn smem_bytes(m: u32, k: u32) -> u32 {
    let bytes = smem_bytes_u64(m, k);
    if bytes > SMEM_LIMIT as u64 { SMEM_LIMIT } else { bytes as u32 }
}

/// The most products (M·N·K·L) of a call this kernel takes. Its time grows with M (the
/// conversion is paid once per weight, the products once per activation row), the
/// decode tiles' hardly: on an H100 (docs/perf-notes.md, session 25) 2x7168x16384 (2^27.8)
/// took 43.0-43.1 us against 46.7-46.8 on decode tiles, 4x4096x7168 (2^26.8) 21.0 against
/// 22.6-22.7, and 4x7168x16384 (2^28.8) 54.2-54.4 (an earlier build) against 46.4-46.6.
pub const MAX_PRODUCTS: u64 = 1 << 28;

/// Whether this kernel takes a call of shape M x N x K x L with NVFP4 activations: M from
/// 1 to [`MAX_M`], at most [`MAX_PRODUCTS`] products, K a multiple of [`K_MULTIPLE`] with
/// the activations within [`SMEM_LIMIT`], L within the grid.
pub const fn takes(m: u32, n: u32, k: u32, l: u32) -> bool {
    let rows = m >= 1 && m <= MAX_M;
    let products = m as u64 * n as u64 * k as u64 * l as u64;
    let fits = k.is_multiple_of(K_MULTIPLE) && smem_bytes_u64(m, k) <= SMEM_LIMIT as u64;
    rows && products > 0 && products <= MAX_PRODUCTS && fits && l <= MAX_GRID_YZ
}

/// The launch on a GPU with `sms` SMs: one CTA per SM shared out over the batches, never
/// more per batch than it has rows.
pub const fn launch(m: u32, n: u32, k: u32, l: u32, sms: u32) -> Launch {
    let ctas = CTAS_PER_SM * if sms == 0 { 1 } else { sms };
    let per_batch = ctas.div_ceil(if l == 0 { 1 } else { l });
    let per_batch = if per_batch > n { n } else { per_batch };
    Launch {
        grid: [if per_batch == 0 { 1 } else { per_batch }, l, 1],
        block: [THREADS, 1, 1],
        dynamic_smem: smem_bytes(m, k),
    }
}

/// What a unit's end (the warp's sums, see `flush`) costs, in load slots.
const FLUSH_SLOTS: u32 = 1;

/// Parts per row for a pass of `rows` rows of `loads` warp loads each: the power of two,
/// up to `MAX_PARTS` and the loads, that gives the busiest warp the least work (its
/// units times a part's loads and its end; a row's last part may have empty slots), the
/// smallest on ties. 1x7168x16384 on 132 SMs (54-55 rows per CTA, 16 loads per row): 2
/// parts, 7 units of 8 slots per warp (the even share is 55 slots); 1x7168x2048 (2 loads
/// per row): 1 part, 4 units of 2 slots.
pub const fn parts(rows: u32, loads: u32) -> u32 {
    let (mut best, mut best_slots, mut p) = (1, u32::MAX, 1);
    while p <= MAX_PARTS && p <= loads {
        let slots = (rows * p).div_ceil(WARPS) * (loads.div_ceil(p) + FLUSH_SLOTS);
        if slots < best_slots {
            (best, best_slots) = (p, slots);
        }
        p *= 2;
    }
    best
}

/// The CTA's shared memory for `m` activation rows of `k` values.
#[derive(Clone, Copy)]
struct Smem {
    base: SmemAddr,
    act_row: u32,
    blocks: u32,
    scales: u32,
    partials: u32,
}

impl Smem {
    fn new(m: u32, k: u32) -> Smem {
        let (m64, k64) = (m as u64, k as u64);
        Smem {
            base: special::dynamic_smem(),
            act_row: act_row_bytes(k64) as u32,
            blocks: k / SF_VECTOR,
            scales: scales_offset(m64, k64) as u32,
            partials: partials_offset(m64, k64) as u32,
        }
    }
    /// Block `kb` of activation row `m`: 16 signed bytes, twice the values. Each warp
    /// load's 64 blocks take 1 KiB, the even blocks first, then the odd ones, so that the
    /// lanes' reads of their first (second) block are 512 contiguous bytes.
    fn act(self, m: u32, kb: u32) -> SmemAddr {
        let (load, pair, odd) = (kb / LOAD_BLOCKS, kb % LOAD_BLOCKS / LANE_BLOCKS, kb % LANE_BLOCKS);
        let in_load = odd * (LOAD_ACT_BYTES / LANE_BLOCKS) + pair * BLOCK_ACT_BYTES;
        self.base.offset(m * self.act_row + load * LOAD_ACT_BYTES + in_load)
    }
    /// Its scale, as the f32 sfa/4 (blocks kb and kb + 1 side by side).
    fn scale(self, m: u32, kb: u32) -> SmemAddr {
        self.base.offset(self.scales + (m * self.blocks + kb) * F32_BYTES)
    }
    /// The partial of part `p` of the pass's row `r` for activation row `m`.
    fn partial(self, r: u32, p: u32, m: u32) -> SmemAddr {
        self.base.offset(self.partials + ((r * MAX_PARTS + p) * MAX_M + m) * F32_BYTES)
    }
}

// ---------------------------------------------------------------------------------------
// Codes to signed bytes
// ---------------------------------------------------------------------------------------

/// The sign bit of each of a `prmt` selector's four nibbles.
const SELECTOR_SIGNS: u32 = 0x8888;
/// The top bit of each byte of a word.
const BYTE_TOPS: u32 = 0x8080_8080;

/// Twice the values of the four e2m1 codes in bits 0..16 of `codes` (code i in bits
/// 4i..4i+4), as four signed bytes (byte i from code i).
///
/// A code is a `prmt` selector nibble: its three magnitude bits index the table of doubled
/// magnitudes ([`e2m1::DOUBLED_BYTES`]), and its sign bit asks for the selected byte's top
/// bit instead, which is 0 in every entry. So one lookup gives the positive codes' bytes
/// (negative ones read 0), and one with the sign bits flipped the negative codes'
/// magnitudes (positive ones read 0). Negating those bytewise, 0x80 - v flipped at the top
/// bit (no borrow crosses a byte: v ≤ 12), and merging gives the two's complements.
#[inline(always)]
fn doubled(codes: u32) -> u32 {
    let [low, high] = e2m1::DOUBLED_BYTES;
    let positive = integer::prmt(low, high, codes);
    let negative = integer::prmt(low, high, codes ^ SELECTOR_SIGNS);
    positive | ((BYTE_TOPS - negative) ^ BYTE_TOPS)
}

/// Four words of codes (32 values in k order, the even k in each byte's low nibble) as
/// 32 signed bytes in k order, four per word: blocks 2i and 2i + 1 of a lane's load are
/// words 0-3 and 4-7.
#[inline(always)]
fn doubled_words(words: [u32; 4]) -> [u32; 8] {
    let mut bytes = [0; 8];
    for w in 0..4 {
        bytes[2 * w] = doubled(words[w]);
        bytes[2 * w + 1] = doubled(words[w] >> 16);
    }
    bytes
}

/// Two e4m3 scale bytes (the first in the low byte) as f32 values (exact).
#[inline(always)]
fn e4m3x2_to_f32(pair: u16) -> [f32; 2] {
    let halves = cvt::f16x2_from_e4m3x2(pair);
    [cvt::f32_from_f16(halves as u16), cvt::f32_from_f16((halves >> 16) as u16)]
}

// ---------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------

/// Step 1: batch `l`'s activations into shared memory, two blocks per thread and turn.
#[inline(always)]
fn prepare(args: &GemmArgs, smem: Smem, l: u32, tid: u32) {
    let (m_rows, blocks) = (args.m, smem.blocks);
    let row_bytes = (args.k / 2) as u64;
    let sfa = args.sfa + l as u64 * layout::batch_bytes(m_rows, blocks);
    let pairs = blocks / LANE_BLOCKS;
    let mut i = tid;
    while i < m_rows * pairs {
        let (m, kb) = (i / pairs, i % pairs * LANE_BLOCKS);
        let row = args.a + (l as u64 * m_rows as u64 + m as u64) * row_bytes;
        let bytes = doubled_words(memory::ld_global_nc_v4_b32(row + (kb * BLOCK_BYTES) as u64));
        memory::st_shared_v4_b32(smem.act(m, kb), [bytes[0], bytes[1], bytes[2], bytes[3]]);
        memory::st_shared_v4_b32(smem.act(m, kb + 1), [bytes[4], bytes[5], bytes[6], bytes[7]]);
        let scales = e4m3x2_to_f32(memory::ld_global_nc_u16(sfa + layout::offset(m, kb, blocks)));
        // sfa/4 is exact: a power of two, far from f32's subnormals.
        let quarter = [cvt::mul_f32(scales[0], 0.25), cvt::mul_f32(scales[1], 0.25)];
        memory::st_shared_b32(smem.scale(m, kb), quarter[0].to_bits());
        memory::st_shared_b32(smem.scale(m, kb + 1), quarter[1].to_bits());
        i += THREADS;
    }
}

/// A warp's sum of `value` over its 32 lanes, the same in every lane (a butterfly: at
/// each step a lane adds the value of the lane `offset` away, 16 down to 1).
#[inline(always)]
fn warp_sum(value: f32, lane: u32) -> f32 {
    let mut sum = value;
    let mut offset = WARP / 2;
    while offset > 0 {
        sum += f32::from_bits(warp::shfl_sync_idx(sum.to_bits(), lane ^ offset));
        offset /= 2;
    }
    sum
}

/// Bytes of a warp load in a row of codes (512), and the distance between consecutive warp
/// loads' scales in the blocked layout (a warp load's 64 blocks are 16 tiles of 4 scale
/// columns, 8 KiB, whatever the row).
const LOAD_BYTES: u32 = LOAD_BLOCKS * BLOCK_BYTES;
const LOAD_SCALE_BYTES: u64 = layout::tile_offset(0, LOAD_BLOCKS / layout::TILE_COLS, LOAD_BLOCKS);
const _: () = assert!(LOAD_BLOCKS.is_multiple_of(layout::TILE_COLS) && LANE_BLOCKS <= layout::TILE_COLS);

/// Where a warp is in its walk over its units' load slots: row `row` of the pass, load
/// `load` of the warp's part ([`Pass::part`]). Units go round robin over the warps,
/// part-fastest, and the parts divide the warps: a warp's units are all the same part of
/// rows `WARPS / parts` apart.
#[derive(Clone, Copy)]
struct Walk {
    row: u32,
    load: u32,
}

impl Walk {
    fn advance(&mut self, pass: &Pass) {
        self.load += 1;
        if self.load == pass.part_loads {
            self.row += WARPS / pass.parts;
            self.load = 0;
        }
    }
}

/// One batch of a lane's loads: DEPTH slots of 16 code bytes (two blocks) and their two
/// scale bytes.
#[derive(Clone, Copy)]
struct Batch {
    codes: [[u32; 4]; DEPTH as usize],
    scales: [u16; DEPTH as usize],
}

/// What a warp walks in one pass, and this lane's share of every warp load.
#[derive(Clone, Copy)]
struct Pass {
    /// The pass's first weight row (in batch `l` of the call), and each row's parts and
    /// loads per part.
    first_row: u32,
    parts: u32,
    part_loads: u32,
    /// This warp's part of each of its rows, and the part's first load in the row.
    part: u32,
    part_first_load: u32,
    /// This warp's load slots (its units times `part_loads`).
    slots: u32,
    /// The row loads in which this lane has blocks (the last one of a row may end before
    /// the lane's).
    lane_loads: u32,
    /// This lane's codes and scales in weight row 0 of batch `l`, its activations and
    /// their scales in warp load 0 of activation row 0.
    codes: u64,
    scales: u64,
    act: SmemAddr,
    act_scales: SmemAddr,
    row_bytes: u64,
    /// Shared-memory bytes between activation rows and between their scales.
    act_row: u32,
    act_scales_row: u32,
    blocks: u32,
}

impl Pass {
    /// Issues the loads of slots `batch..batch + DEPTH` as `walk` goes on (none past the
    /// warp's slots or past K).
    #[inline(always)]
    #[allow(clippy::identity_op)] // `seq!` literals
    fn issue(&self, batch: u32, walk: &mut Walk) -> Batch {
        let mut loads = Batch { codes: [[0; 4]; DEPTH as usize], scales: [0; DEPTH as usize] };
        seq_macro::seq!(D in 0..6 {
            let g = self.part_first_load + walk.load; // the load of the row
            if batch + D < self.slots && g < self.lane_loads {
                let row = self.first_row + walk.row;
                let codes = self.codes + row as u64 * self.row_bytes + (g * LOAD_BYTES) as u64;
                loads.codes[D] = memory::ld_global_nc_v4_b32(codes);
                // The blocked layout is linear in the groups of four scale columns.
                let scales = self.scales + layout::offset(row, 0, self.blocks) + g as u64 * LOAD_SCALE_BYTES;
                loads.scales[D] = memory::ld_global_nc_u16(scales);
            }
            walk.advance(self);
        });
        loads
    }

    /// Multiplies the batch's slots into `acc` as `walk` goes on, storing each unit's
    /// partials at its end.
    #[inline(always)]
    #[allow(clippy::identity_op)] // `seq!` literals
    fn multiply<const M: usize>(&self, smem: Smem, batch: u32, walk: &mut Walk, loads: &Batch, acc: &mut [f32; M]) {
        seq_macro::seq!(D in 0..6 {
            if batch + D < self.slots {
                let g = self.part_first_load + walk.load;
                if g < self.lane_loads {
                    self.multiply_slot(g, loads.codes[D], loads.scales[D], acc);
                }
                if walk.load == self.part_loads - 1 {
                    // The unit's last slot: its partials, then a fresh sum.
                    flush(smem, walk.row, self.part, acc);
                }
            }
            walk.advance(self);
        });
    }

    /// Adds this lane's two blocks of row load `g` (`codes`, scales `scales`) times each
    /// activation row's to `acc`.
    #[inline(always)]
    fn multiply_slot<const M: usize>(&self, g: u32, codes: [u32; 4], scales: u16, acc: &mut [f32; M]) {
        let b = doubled_words(codes);
        let sb = e4m3x2_to_f32(scales);
        let act = self.act.offset(g * LOAD_ACT_BYTES);
        let act_scales = self.act_scales.offset(g * LOAD_BLOCKS * F32_BYTES);
        for (m, acc) in acc.iter_mut().enumerate() {
            let sa = memory::ld_shared_v2_b32(act_scales.offset(m as u32 * self.act_scales_row));
            for half in 0..LANE_BLOCKS as usize {
                let block = act.offset(m as u32 * self.act_row + half as u32 * LOAD_ACT_BYTES / LANE_BLOCKS);
                let a = memory::ld_shared_v4_b32(block);
                let mut dot = 0;
                for w in 0..4 {
                    dot = integer::dp4a(a[w], b[4 * half + w], dot);
                }
                // Both exact: S·sfa/4·sfb has at most 20 significant bits.
                let scale = cvt::mul_f32(f32::from_bits(sa[half]), sb[half]);
                *acc = cvt::fma_f32(dot as f32, scale, *acc);
            }
        }
    }
}

/// A unit's end: lane 0 stores the warp's sum for each activation row as the partial of
/// part `p` of the pass's row `r`; `acc` starts again from zero.
#[inline(always)]
fn flush<const M: usize>(smem: Smem, r: u32, p: u32, acc: &mut [f32; M]) {
    let lane = special::tid_x() % WARP;
    for (m, acc) in acc.iter_mut().enumerate() {
        let sum = warp_sum(*acc, lane);
        if lane == 0 {
            memory::st_shared_b32(smem.partial(r, p, m as u32), sum.to_bits());
        }
        *acc = 0.0;
    }
}

/// The kernel body, run by every thread of every CTA: `rows` for the call's M.
#[inline(always)]
pub fn gemv(args: &GemmArgs) {
    match args.m {
        1 => rows::<1>(args),
        2 => rows::<2>(args),
        3 => rows::<3>(args),
        _ => rows::<4>(args),
    }
}

/// The kernel for M activation rows (each loop over them unrolled).
#[inline(always)]
fn rows<const M: usize>(args: &GemmArgs) {
    const { assert!(M >= 1 && M <= MAX_M as usize) };
    let (n, k) = (args.n, args.k);
    let smem = Smem::new(M as u32, k);
    let blocks = smem.blocks;
    let loads = blocks.div_ceil(LOAD_BLOCKS); // warp loads per row
    let (cta, ctas, l) = (special::ctaid_x(), special::nctaid_x(), special::ctaid_y());
    let tid = special::tid_x();
    let (warp_in_cta, lane) = (tid / WARP, tid % WARP);

    prepare(args, smem, l, tid);
    barrier::sync_unaligned(BARRIER_CTA, THREADS);

    let row_bytes = (k / 2) as u64;
    let lane_block = LANE_BLOCKS * lane; // this lane's first block in each warp load
    let first = (cta as u64 * n as u64 / ctas as u64) as u32;
    let end = ((cta as u64 + 1) * n as u64 / ctas as u64) as u32;
    // Passes of equal size (within a row), each at most PASS_ROWS.
    let pass_rows = (end - first).div_ceil((end - first).div_ceil(PASS_ROWS));
    let mut first_row = first;
    while first_row < end {
        let rows = if end - first_row < pass_rows { end - first_row } else { pass_rows };
        let parts = parts(rows, loads);
        let part_loads = loads.div_ceil(parts);
        // Units u = warp, warp + WARPS, ... of the pass's rows · parts, part-fastest.
        let units = rows * parts;
        let my_units = if warp_in_cta < units { (units - warp_in_cta).div_ceil(WARPS) } else { 0 };
        let part = warp_in_cta % parts;
        let pass = Pass {
            first_row,
            parts,
            part_loads,
            part,
            part_first_load: part * part_loads,
            slots: my_units * part_loads,
            lane_loads: if blocks > lane_block { (blocks - lane_block).div_ceil(LOAD_BLOCKS) } else { 0 },
            codes: args.b + l as u64 * n as u64 * row_bytes + (lane_block * BLOCK_BYTES) as u64,
            scales: args.sfb + l as u64 * layout::batch_bytes(n, blocks) + layout::offset(0, lane_block, blocks),
            act: smem.act(0, lane_block),
            act_scales: smem.scale(0, lane_block),
            row_bytes,
            act_row: smem.act_row,
            act_scales_row: blocks * F32_BYTES,
            blocks,
        };

        // Step 2: this warp's units, a batch of DEPTH load slots multiplied while the next
        // batch's loads are in flight. (One copy of the batch's code with the buffers
        // copied, not two taking turns: the hot loop then fits the instruction cache,
        // 1x7168x16384 42.9-43.0 -> 41.8-42.1 us, docs/perf-notes.md, session 25.)
        let mut acc = [0f32; M];
        let mut walk = Walk { row: warp_in_cta / parts, load: 0 };
        let mut ahead = walk;
        let mut batch = 0;
        let mut current = pass.issue(batch, &mut ahead);
        while batch < pass.slots {
            let next = pass.issue(batch + DEPTH, &mut ahead);
            pass.multiply(smem, batch, &mut walk, &current, &mut acc);
            current = next;
            batch += DEPTH;
        }

        // Step 3: the parts in order, the epilogue, C. (The epilogue's arguments are
        // read here, once per pass: held through step 2 they would take registers its
        // loads in flight need.)
        barrier::sync_unaligned(BARRIER_CTA, THREADS);
        let epilogue = Epilogue::load(args);
        let c = args.c + l as u64 * M as u64 * n as u64 * OUT_BYTES as u64;
        let mut t = tid;
        while t < rows * M as u32 {
            let (r, m) = (t % rows, t / rows);
            let mut sum = f32::from_bits(memory::ld_shared_b32(smem.partial(r, 0, m)));
            for p in 1..parts {
                sum += f32::from_bits(memory::ld_shared_b32(smem.partial(r, p, m)));
            }
            let row = first_row + r;
            let at = c + (m as u64 * n as u64 + row as u64) * OUT_BYTES as u64;
            memory::st_global_b16(at, epilogue.one(sum, row));
            t += THREADS;
        }
        barrier::sync_unaligned(BARRIER_CTA, THREADS);
        first_row += rows;
    }
}

gemm_entry_point!(nvfp4_gemv_sm90 => gemv);
