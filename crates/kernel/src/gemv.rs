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
//! nothing after it: 37.5-37.8 us there, 14.3 on 1x4096x7168, 10.4-10.6 on 1x7168x2048
//! (docs/perf-notes.md, session 26).
//!
//! **Exact integer products.** Twice an e2m1 value is an integer in -12..=12, a signed
//! byte, so a scale block's dot product S = Σ (2a)(2b) over its 16 values is an exact
//! integer (|S| ≤ 2304), which `dp4a` (four byte products each) computes: the weights'
//! codes become their doubled magnitudes by byte-table lookups (`prmt`), the positive
//! and the negative codes apart (see `block_dot`). The block then adds S · (sfa/4 · sfb)
//! to an f32 accumulator with one `fma.rn.f32`: the scale product is exact (two e4m3
//! significands of 4 bits), S times it too (12 x 8 bits), so the only rounding is the f32
//! sum's, as in every kernel of this crate.
//!
//! **Work.** The grid is [CTAs per batch, L], one CTA of [`THREADS`] threads per SM. The
//! weight rows go to the CTAs in *sets* of four, the rows whose scales share a 16-byte
//! chunk of each scale tile (rows c, c + 32, c + 64, c + 96 of a 128-row tile row): CTA x
//! of a batch owns sets [x·S/X, (x+1)·S/X) (S sets, X CTAs per batch), in passes of as
//! many sets as the scales' stage holds (equal within a set). Steps:
//! 1. The CTA converts its batch's M activation rows into shared memory: each 16-value
//!    block as 16 signed bytes and its scale as the f32 sfa/4 (`Activations`; each
//!    thread's first item is loaded before the first pass's copies are issued and
//!    converted while they fly).
//! 2. Each pass copies its sets' weight scales into shared memory, one chunk per set and
//!    tile (`stage_scales`: whole 32-byte sectors between neighbouring sets, where
//!    reading each lane's two scale bytes from global memory fetched 16 sectors for 64
//!    useful bytes per warp load). It cuts every row into `parts` equal ranges of *warp
//!    loads* (64 consecutive scale blocks of one row, 16 bytes per lane: 512 contiguous
//!    bytes) and deals the (pair of rows, part) units to the 16 warps round robin
//!    ([`parts`] picks the count; a pair is two rows of a set, which share the
//!    activations' reads and the loop's bookkeeping). Each lane keeps a ring of `RING`
//!    slots in shared memory, filled by `cp.async`: a warp has `RING - 1` slots (a warp
//!    load of each row of its pair) in flight while it multiplies the oldest one that has
//!    landed, in a loop one slot long (no unrolled batches: its code fits the instruction
//!    cache). At each unit's end the warp sums its lanes (a fixed butterfly of shuffles)
//!    and lane 0 stores the unit's partials per row and activation row.
//! 3. After a CTA barrier, one thread per (row, activation row) adds the row's parts in
//!    part order, applies the epilogue and stores C; a second barrier frees the partials
//!    and the stage for the next pass.
//!
//! Every sum has a fixed order (lanes, then butterfly, then parts), so the result does
//! not depend on timing. No workspace, no other launch, no split across CTAs. The body is
//! compiled once per M (`rows`), so every loop over the activation rows is unrolled.
//!
//! **Where the time goes** (session 26, `ncu` of 1x7168x16384): the launch takes 32.8 us
//! (37.5-37.8 us of events, the launch and the cache flush around it included), reads
//! DRAM at 62 % of its peak and issues in 45 % of the cycles, 13.9 M warp instructions
//! (16.6 M with one row per unit); its warps wait most often for instructions to be
//! fetched (`stalled_no_instruction` 2.3 warps per issue) and for their copies (long
//! scoreboard 1.9). Each further activation row adds its `dp4a`s and shared-memory reads:
//! 4x7168x16384 took 54.3 us on an earlier build, against 46.6 on decode tiles, hence
//! [`MAX_PRODUCTS`].
//!
//! **Limits.** NVFP4 activations only: 16-bit activations (W4A16) are not integers, and
//! stay on sm90v2's decode tiles. M ≤ [`MAX_M`], M·N·K·L ≤ [`MAX_PRODUCTS`], K a multiple
//! of [`K_MULTIPLE`] and M·K small enough for the activations and one set's scales to fit
//! the CTA's shared memory ([`takes`]); other calls run on the decode tiles.

use nvfp4::e2m1;
use nvfp4::layout;
use nvfp4::shape::SF_VECTOR;

use crate::epilogue::{Epilogue, OUT_BYTES};
use crate::ptx::{SmemAddr, barrier, cp_async, cvt, integer, memory, special, warp};
use crate::{GemmArgs, Launch, MAX_GRID_YZ};

/// The most activation rows a call may have.
pub const MAX_M: u32 = 4;
/// The entry point, its threads per CTA (16 warps), one CTA per SM with all its registers.
pub const ENTRY: &str = "nvfp4_gemv_sm90";
pub const THREADS: u32 = 512;
const CTAS_PER_SM: u32 = 1;
pub const LAUNCH_BOUNDS: (&str, u32, u32, u32) = crate::launch_bounds(ENTRY, THREADS, CTAS_PER_SM);
const WARP: u32 = 32;
const WARPS: u32 = THREADS / WARP;
/// Packed bytes of one scale block (16 e2m1 values).
const BLOCK_BYTES: u32 = SF_VECTOR / 2;
/// Scale blocks per lane and load (16 bytes, one `cp.async`), and per warp load
/// (512 contiguous bytes of a row).
const LANE_BLOCKS: u32 = 2;
const LOAD_BLOCKS: u32 = LANE_BLOCKS * WARP;
/// Load slots in each lane's ring of copies in shared memory: a warp keeps `RING - 1`
/// slots in flight (4 KiB per warp, 64 KiB per SM) while it multiplies the oldest one
/// that has landed. (7 slots: 1.2-2 us slower at M = 1 on 1x7168x16384 and 1x28672x4096,
/// 7 us at M = 2, whose stage then holds too few sets for one pass; 12 slots of one row
/// each were 1-2 us slower than 8, docs/perf-notes.md, session 26.)
const RING: u32 = 5;
/// Weight rows a warp multiplies together (rows 32 apart of one set): they share the
/// activations' shared-memory reads and the loop's bookkeeping.
const UNIT_ROWS: u32 = 2;
const _: () = assert!(UNIT_ROWS == 2 && SET_ROWS.is_multiple_of(UNIT_ROWS), "a unit's rows: [_; 2], in one set");
const _: () = assert!(MAX_M == 4, "the loops over the activation rows are `seq!(I in 0..4)`");
/// Bytes of a lane's load in one row: 16 code bytes.
const SLOT_CODE_BYTES: u32 = 16;
/// The weights' scales in the blocked layout: a tile of 128 rows x 4 scale columns is 32
/// chunks of 16 bytes, chunk c holding rows c, c + 32, c + 64, c + 96 (a 4-byte word of
/// four scales each). A *set* is those four rows: its scales are one chunk per tile,
/// and a tile row's 32 sets are its 32 chunks side by side.
const SET_ROWS: u32 = layout::TILE_ROWS / layout::LANE_ROWS;
const SETS_PER_TILE_ROW: u32 = layout::LANE_ROWS;
const CHUNK_BYTES: u32 = layout::TILE_BYTES / layout::LANE_ROWS;
const SCALE_WORD_BYTES: u32 = CHUNK_BYTES / SET_ROWS;
const _: () = assert!(SCALE_WORD_BYTES == layout::TILE_COLS, "a scale word is a row's four scales of one tile");
/// At most this many parts per row, and rows per pass: the partials' shared memory. (Each
/// pass ends with the warps' pipelines drained and two barriers: on 1x28672x4096, 4 passes
/// of 64 rows per CTA took 50.9 us, one of 217 rows 42.6-42.8 with the parts also counting
/// each unit's end, docs/perf-notes.md, session 25.)
const MAX_PARTS: u32 = 8;
pub const PASS_ROWS: u32 = 256;
const _: () = assert!(WARPS.is_multiple_of(MAX_PARTS), "a warp's units all have the same part (see `Walk`)");
/// Shared memory a CTA may use (one CTA per SM): the most an H100 grants one CTA.
pub const SMEM_LIMIT: u32 = 227 * 1024;
/// K must be a multiple of this: a lane's 16-byte loads stay aligned and inside the row.
pub const K_MULTIPLE: u32 = LANE_BLOCKS * SF_VECTOR;
/// Bytes of one block's activations as signed bytes, and of one warp load's blocks.
const BLOCK_ACT_BYTES: u32 = SF_VECTOR;
const LOAD_ACT_BYTES: u32 = LOAD_BLOCKS * BLOCK_ACT_BYTES;
const F32_BYTES: u32 = 4;
/// Named barrier for the whole CTA.
const BARRIER_CTA: u32 = 0;

const _: () = assert!(LANE_BLOCKS * BLOCK_BYTES == SLOT_CODE_BYTES, "a lane's load is 16 bytes: four words of 8 codes");
const _: () = assert!(CTAS_PER_SM * (SMEM_LIMIT + 1024) <= 228 * 1024, "the CTAs fit an SM's shared memory");

// ---------------------------------------------------------------------------------------
// Shared memory map: activations [M][K rounded up to a warp load] signed bytes, their
// scales [M][K/16] f32 (sfa/4), the partials [PASS_ROWS][MAX_PARTS][MAX_M] f32, the
// lanes' rings of codes [WARPS][RING][UNIT_ROWS][WARP] x 16 bytes (a warp's load of a row
// is 512 contiguous bytes: its lanes' copies and reads are free of bank conflicts), then
// the pass's weight scales [tiles of K][odd stride >= the pass's sets] x 16-byte chunks
// (an odd stride spreads the 16 tiles a warp reads over 8 banks: two-way conflicts at
// most).
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
const fn ring_offset(m: u64, k: u64) -> u64 {
    partials_offset(m, k) + PARTIALS_BYTES
}
const RING_BYTES: u64 = (WARPS * RING * UNIT_ROWS * WARP * SLOT_CODE_BYTES) as u64;
const fn stage_offset(m: u64, k: u64) -> u64 {
    ring_offset(m, k) + RING_BYTES
}
/// Scale tiles along K (4 scale columns each).
const fn tiles(k: u32) -> u32 {
    layout::col_blocks(k / SF_VECTOR)
}
/// The stage's stride in chunks for a pass of `sets` sets.
const fn stage_stride(sets: u32) -> u32 {
    sets | 1
}

/// The most sets a pass may have for `m` activation rows of `k` values: what the rows'
/// partials and the shared memory left for the scales allow (0: not even one).
const fn max_pass_sets(m: u32, k: u32) -> u32 {
    let used = stage_offset(m as u64, k as u64);
    if used >= SMEM_LIMIT as u64 {
        return 0;
    }
    let chunks = (SMEM_LIMIT as u64 - used) / (tiles(k) as u64 * CHUNK_BYTES as u64);
    let by_partials = (PASS_ROWS / SET_ROWS) as u64;
    let sets = if chunks < by_partials { chunks } else { by_partials };
    (if stage_stride(sets as u32) as u64 > chunks { sets - 1 } else { sets }) as u32
}

/// Dynamic shared memory of a call with `m` activation rows of `k` values (only
/// meaningful for calls the kernel [`takes`]).
pub const fn smem_bytes(m: u32, k: u32) -> u32 {
    let stage = tiles(k) as u64 * stage_stride(max_pass_sets(m, k)) as u64 * CHUNK_BYTES as u64;
    let bytes = stage_offset(m as u64, k as u64) + stage;
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
/// the activations and one set's scales within [`SMEM_LIMIT`], L within the grid.
pub const fn takes(m: u32, n: u32, k: u32, l: u32) -> bool {
    let products = m as u64 * n as u64 * k as u64 * l as u64;
    // The shared memory last: it is only summed for the M and K the other checks allow.
    m >= 1
        && m <= MAX_M
        && products > 0
        && products <= MAX_PRODUCTS
        && l <= MAX_GRID_YZ
        && k.is_multiple_of(K_MULTIPLE)
        && max_pass_sets(m, k) > 0
}

// ---------------------------------------------------------------------------------------
// Sets of four rows, shared out over the CTAs (also `crate::skinny`'s)
// ---------------------------------------------------------------------------------------

/// The sets of a batch of `n` weight rows (whole tile rows: the last one's rows past `n`
/// are skipped).
pub(crate) const fn sets(n: u32) -> u32 {
    layout::row_blocks(n) * SETS_PER_TILE_ROW
}

/// The batch's weight row of set `set`'s row `in_set` (set σ is chunk σ % 32 of tile row
/// σ / 32: its rows are 32 apart).
pub(crate) const fn set_row(set: u32, in_set: u32) -> u32 {
    set / SETS_PER_TILE_ROW * layout::TILE_ROWS + in_set * layout::LANE_ROWS + set % SETS_PER_TILE_ROW
}

/// CTAs per batch when `ctas` CTAs share `l` batches of `n` rows: never more than a batch's
/// sets, at least one.
pub(crate) const fn ctas_per_batch(ctas: u32, n: u32, l: u32) -> u32 {
    let per_batch = ctas.div_ceil(if l == 0 { 1 } else { l });
    let per_batch = if per_batch > sets(n) { sets(n) } else { per_batch };
    if per_batch == 0 { 1 } else { per_batch }
}

/// The sets [first, end) CTA `cta` of a batch's `ctas` owns, out of `sets`.
pub(crate) fn cta_sets(cta: u32, ctas: u32, sets: u32) -> (u32, u32) {
    let share = |x: u32| (x as u64 * sets as u64 / ctas as u64) as u32;
    (share(cta), share(cta + 1))
}

/// The launch on a GPU with `sms` SMs: one CTA per SM shared out over the batches, never
/// more per batch than it has sets.
pub const fn launch(m: u32, n: u32, k: u32, l: u32, sms: u32) -> Launch {
    let ctas = CTAS_PER_SM * if sms == 0 { 1 } else { sms };
    Launch { grid: [ctas_per_batch(ctas, n, l), l, 1], block: [THREADS, 1, 1], dynamic_smem: smem_bytes(m, k) }
}

/// What a load slot (both rows of a pair) and a unit's end (the warp's sums, see `flush`)
/// cost, relative to each other.
const SLOT_COST: u32 = 2;
const FLUSH_COST: u32 = 1;

/// Parts per row for a pass of `pairs` pairs of rows of `loads` warp loads each: the power
/// of two, up to `MAX_PARTS` and the loads, that gives the busiest warp the least work
/// (its units times a part's loads and its end; a row's last part may have empty slots),
/// the smallest on ties. 1x7168x16384 on 132 SMs (13-14 sets, 26-28 pairs per CTA, 16
/// loads per row): 4 parts, 7 units of 4 slots per warp (whole pairs: 2 units of 16 for
/// 12 warps, 1 for the other 4); 1x7168x2048 (2 loads per row): 1 part.
pub const fn parts(pairs: u32, loads: u32) -> u32 {
    let (mut best, mut best_cost, mut p) = (1, u32::MAX, 1);
    while p <= MAX_PARTS && p <= loads {
        let cost = (pairs * p).div_ceil(WARPS) * (loads.div_ceil(p) * SLOT_COST + FLUSH_COST);
        if cost < best_cost {
            (best, best_cost) = (p, cost);
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
    ring: u32,
    stage: u32,
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
            ring: ring_offset(m64, k64) as u32,
            stage: stage_offset(m64, k64) as u32,
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
    /// Slot 0 of the ring of lane `lane` of warp `warp`.
    fn ring(self, warp: u32, lane: u32) -> Ring {
        Ring(self.base.offset(self.ring + (warp * RING * UNIT_ROWS * WARP + lane) * SLOT_CODE_BYTES))
    }
    /// The staged chunk of the pass's set `set` in scale tile `tile` (`stride` chunks per tile).
    fn chunk(self, tile: u32, set: u32, stride: u32) -> SmemAddr {
        self.base.offset(self.stage + (tile * stride + set) * CHUNK_BYTES)
    }
}

/// One lane's ring of code copies: its 16 bytes of slot 0's first row (a row's lanes side
/// by side, then the slot's second row).
#[derive(Clone, Copy)]
struct Ring(SmemAddr);

impl Ring {
    fn slot(self, slot: u32, row: u32) -> SmemAddr {
        self.0.offset((slot * UNIT_ROWS + row) * WARP * SLOT_CODE_BYTES)
    }
}

// ---------------------------------------------------------------------------------------
// Codes to signed bytes
// ---------------------------------------------------------------------------------------

/// The sign bit of each of a `prmt` selector's eight nibbles.
const SELECTOR_SIGNS: u32 = 0x8888_8888;
/// Bits of a word's high half of codes.
const HALF_WORD: u32 = 16;

/// A scale block's exact dot product S = Σ (2a)(2b) over its 16 values: `act` its
/// activations as 16 signed bytes (twice the values, in k order), `codes` its weights'
/// 16 e2m1 codes (two words, code i in bits 4i..4i+4 of its word, in k order).
///
/// A code is a `prmt` selector nibble: its three magnitude bits index the table of
/// doubled magnitudes ([`e2m1::DOUBLED_BYTES`]), and its sign bit asks for the selected
/// byte's top bit instead, which is 0 in every entry. So a lookup of four codes gives the
/// positive codes' doubled magnitudes (negative ones read 0), and a lookup with the sign
/// bits flipped the negative codes' (positive ones read 0): S is the activations' `dp4a`
/// with the first minus their `dp4a` with the second. (Magnitudes are at most 12, the
/// same as signed or unsigned bytes; `dp4a` sums at most 16 products of 12 · 12.)
#[inline(always)]
fn block_dot(act: [u32; 4], codes: [u32; 2]) -> i32 {
    let [low, high] = e2m1::DOUBLED_BYTES;
    let (mut positive, mut negative) = (0, 0);
    for w in 0..2 {
        let (word, flipped) = (codes[w], codes[w] ^ SELECTOR_SIGNS);
        // prmt reads the selector's low 16 bits: four codes a lookup.
        for h in 0..2 {
            let shift = h as u32 * HALF_WORD;
            let a = act[2 * w + h];
            positive = integer::dp4a(a, integer::prmt(low, high, word >> shift), positive);
            negative = integer::dp4a(a, integer::prmt(low, high, flipped >> shift), negative);
        }
    }
    positive - negative
}

/// Twice the values of the four e2m1 codes in bits 0..16 of `codes` as four signed bytes
/// (byte i from code i): the activations' conversion in `Activations::store` (see
/// [`block_dot`] for the lookups; the negative codes' magnitudes are negated bytewise, 0x80
/// - v flipped at the top bit: no borrow crosses a byte, v ≤ 12).
#[inline(always)]
fn doubled(codes: u32) -> u32 {
    const BYTE_TOPS: u32 = 0x8080_8080;
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
        bytes[2 * w + 1] = doubled(words[w] >> HALF_WORD);
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

/// Step 1: batch `l`'s activations into shared memory, two blocks per item: item i is
/// blocks 2j, 2j + 1 of activation row i / (K/32), j = i % (K/32); threads take items
/// tid, tid + THREADS, ... A thread's first item is loaded before the weights' first
/// copies are issued and stored after (see `rows`), so that its loads do not queue behind
/// the copies and its conversion overlaps them. (Its other items, loaded after, do: on
/// 4x4096x7168, 896 items, this order is 0.9 us slower than converting every item before
/// the copies, where every other shape measured is 0.4-2.0 us faster; holding a second
/// item's loads across the copies' issue made ptxas spill, docs/perf-notes.md, session 26.)
#[derive(Clone, Copy)]
struct Activations {
    smem: Smem,
    codes: u64,
    scales: u64,
    row_bytes: u64,
    pairs: u32,
    items: u32,
}

/// One item's loads: 32 codes and their two scale bytes.
#[derive(Clone, Copy)]
struct ActivationLoads {
    codes: [u32; 4],
    scales: u16,
}

impl Activations {
    fn new(args: &GemmArgs, smem: Smem, l: u32) -> Activations {
        let (m_rows, blocks) = (args.m, smem.blocks);
        let row_bytes = (args.k / 2) as u64;
        let pairs = blocks / LANE_BLOCKS;
        Activations {
            smem,
            codes: args.a + l as u64 * m_rows as u64 * row_bytes,
            scales: args.sfa + l as u64 * layout::batch_bytes(m_rows, blocks),
            row_bytes,
            pairs,
            items: m_rows * pairs,
        }
    }

    #[inline(always)]
    fn load(&self, i: u32) -> ActivationLoads {
        let (m, kb) = (i / self.pairs, i % self.pairs * LANE_BLOCKS);
        let codes = memory::ld_global_nc_v4_b32(self.codes + m as u64 * self.row_bytes + (kb * BLOCK_BYTES) as u64);
        let scales = memory::ld_global_nc_u16(self.scales + layout::offset(m, kb, self.smem.blocks));
        ActivationLoads { codes, scales }
    }

    #[inline(always)]
    fn store(&self, i: u32, loads: ActivationLoads) {
        let (m, kb) = (i / self.pairs, i % self.pairs * LANE_BLOCKS);
        let bytes = doubled_words(loads.codes);
        memory::st_shared_v4_b32(self.smem.act(m, kb), [bytes[0], bytes[1], bytes[2], bytes[3]]);
        memory::st_shared_v4_b32(self.smem.act(m, kb + 1), [bytes[4], bytes[5], bytes[6], bytes[7]]);
        let scales = e4m3x2_to_f32(loads.scales);
        // sfa/4 is exact: a power of two, far from f32's subnormals.
        let quarter = [cvt::mul_f32(scales[0], 0.25), cvt::mul_f32(scales[1], 0.25)];
        memory::st_shared_b32(self.smem.scale(m, kb), quarter[0].to_bits());
        memory::st_shared_b32(self.smem.scale(m, kb + 1), quarter[1].to_bits());
    }

    /// Stores this thread's first item (loaded as `first`), then loads and stores its others.
    #[inline(always)]
    fn finish(&self, tid: u32, first: ActivationLoads) {
        self.store(tid, first);
        let mut i = tid + THREADS;
        while i < self.items {
            self.store(i, self.load(i));
            i += THREADS;
        }
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

/// Bytes of a warp load in a row of codes (512); its 64 blocks' scales are 16 tiles.
const LOAD_BYTES: u32 = LOAD_BLOCKS * BLOCK_BYTES;
const LOAD_TILES: u32 = LOAD_BLOCKS / layout::TILE_COLS;
const _: () = assert!(LOAD_BLOCKS.is_multiple_of(layout::TILE_COLS) && LANE_BLOCKS <= layout::TILE_COLS);

/// Where a warp is in its walk over its units' load slots: pair `pair` of the pass's rows
/// (rows 2·pair and 2·pair + 1, see [`Pass::weight_row`]), load `load` of the warp's part
/// ([`Pass::part`]). Units go round robin over the warps, part-fastest, and the parts
/// divide the warps: a warp's units are all the same part of pairs `WARPS / parts` apart.
#[derive(Clone, Copy)]
struct Walk {
    pair: u32,
    load: u32,
}

impl Walk {
    /// Steps to the next slot; true when that starts a new unit.
    fn advance(&mut self, pass: &Pass) -> bool {
        self.load += 1;
        let unit_ends = self.load == pass.part_loads;
        if unit_ends {
            self.pair += WARPS / pass.parts;
            self.load = 0;
        }
        unit_ends
    }
}

/// The copying side of a warp's walk, `RING - 1` slots ahead of the multiplying side: its
/// place, this lane's code address there in the pair's first row (each warp load is 512
/// bytes further along the row; `None` past the weight rows), and whether the second row
/// is a weight row.
#[derive(Clone, Copy)]
struct Fetch {
    walk: Walk,
    codes: Option<u64>,
    second: bool,
}

impl Fetch {
    fn new(pass: &Pass, walk: Walk) -> Fetch {
        let (codes, second) = pass.unit_codes(walk.pair);
        Fetch { walk, codes, second }
    }
    fn advance(&mut self, pass: &Pass) {
        if self.walk.advance(pass) {
            (self.codes, self.second) = pass.unit_codes(self.walk.pair);
        } else if let Some(codes) = &mut self.codes {
            *codes += LOAD_BYTES as u64;
        }
    }
}

/// What a warp walks in one pass, and this lane's share of every warp load.
#[derive(Clone, Copy)]
struct Pass {
    /// The pass's first set (in batch `l` of the call), its sets, each row's parts and
    /// loads per part, and the batch's weight rows.
    first_set: u32,
    sets: u32,
    parts: u32,
    part_loads: u32,
    n: u32,
    /// This warp's part of each of its rows, and the part's first load in the row.
    part: u32,
    part_first_load: u32,
    /// This warp's load slots (its units times `part_loads`).
    slots: u32,
    /// The row loads in which this lane has blocks (the last one of a row may end before
    /// the lane's).
    lane_loads: u32,
    /// This lane's codes in weight row 0 of batch `l`; its scales' chunk in the stage for
    /// warp load 0 of set 0 (the chunks' stride per tile), and where its two scale bytes
    /// sit in a row's word; its activations and their scales in warp load 0 of activation
    /// row 0.
    codes: u64,
    scales: SmemAddr,
    stride: u32,
    scale_shift: u32,
    act: SmemAddr,
    act_scales: SmemAddr,
    row_bytes: u64,
    /// Shared-memory bytes between activation rows and between their scales.
    act_row: u32,
    act_scales_row: u32,
}

impl Pass {
    /// The batch's weight row of the pass's row `row`: row `row % SET_ROWS` of set
    /// `row / SET_ROWS` (set σ is chunk σ % 32 of tile row σ / 32, its rows 32 apart).
    #[inline(always)]
    fn weight_row(&self, row: u32) -> u32 {
        set_row(self.first_set + row / SET_ROWS, row % SET_ROWS)
    }

    /// This lane's code address at the start of its part of pair `pair`'s first row, if
    /// that is a weight row, and whether its second row (32 rows on) is one.
    #[inline(always)]
    fn unit_codes(&self, pair: u32) -> (Option<u64>, bool) {
        let row = self.weight_row(UNIT_ROWS * pair);
        let codes = self.codes + row as u64 * self.row_bytes + (self.part_first_load * LOAD_BYTES) as u64;
        ((row < self.n).then_some(codes), row + layout::LANE_ROWS < self.n)
    }

    /// Copies this lane's share of the slot `fetch` is at into ring slot `slot`, if the
    /// warp has that slot, it is in weight rows and the lane has blocks in its load (a
    /// second row past the weight rows reads as zeros); then closes the lane's copy group
    /// (an empty one otherwise: every slot is one group).
    #[inline(always)]
    fn copy(&self, ring: Ring, slot: u32, fetch: &Fetch, in_pass: bool) {
        if let Some(codes) = fetch.codes
            && in_pass
            && self.part_first_load + fetch.walk.load < self.lane_loads
        {
            cp_async::cg_16(ring.slot(slot, 0), codes, SLOT_CODE_BYTES);
            let second = codes + layout::LANE_ROWS as u64 * self.row_bytes;
            cp_async::cg_16(ring.slot(slot, 1), second, if fetch.second { SLOT_CODE_BYTES } else { 0 });
        }
        cp_async::commit_group();
    }

    /// This lane's two scales of row load `g` of pair `pair`'s two rows, each as the low
    /// 16 bits (the rows' words are side by side in their set's chunk).
    #[inline(always)]
    fn scales(&self, pair: u32, g: u32) -> [u32; 2] {
        let chunk = g * LOAD_TILES * self.stride + pair / (SET_ROWS / UNIT_ROWS);
        let first_row = pair % (SET_ROWS / UNIT_ROWS) * UNIT_ROWS;
        let at = self.scales.offset(chunk * CHUNK_BYTES + first_row * SCALE_WORD_BYTES);
        memory::ld_shared_v2_b32(at).map(|word| word >> self.scale_shift)
    }

    /// Adds this lane's two blocks of row load `g` of both rows of a pair (`codes`, their
    /// scales in the low 16 bits of `scales`) times each activation row's to `acc`.
    #[inline(always)]
    fn multiply_slot<const M: usize>(&self, g: u32, codes: [[u32; 4]; 2], scales: [u32; 2], acc: &mut [[f32; 2]; M]) {
        let sb = [e4m3x2_to_f32(scales[0] as u16), e4m3x2_to_f32(scales[1] as u16)];
        let act = self.act.offset(g * LOAD_ACT_BYTES);
        let act_scales = self.act_scales.offset(g * LOAD_BLOCKS * F32_BYTES);
        // Each activation row in turn (unrolled by `seq!`: LLVM keeps a rolled loop's
        // accumulators in local memory).
        seq_macro::seq!(I in 0..4 {
            if I < M {
                self.multiply_row(I, act, act_scales, codes, sb, &mut acc[I % M]);
            }
        });
    }

    /// [`Pass::multiply_slot`] for activation row `m`.
    #[inline(always)]
    fn multiply_row(
        &self,
        m: usize,
        act: SmemAddr,
        act_scales: SmemAddr,
        codes: [[u32; 4]; 2],
        sb: [[f32; 2]; 2],
        acc: &mut [f32; 2],
    ) {
        let sa = memory::ld_shared_v2_b32(act_scales.offset(m as u32 * self.act_scales_row));
        for half in 0..LANE_BLOCKS as usize {
            let block = act.offset(m as u32 * self.act_row + half as u32 * LOAD_ACT_BYTES / LANE_BLOCKS);
            let a = memory::ld_shared_v4_b32(block);
            for row in 0..UNIT_ROWS as usize {
                let dot = block_dot(a, [codes[row][2 * half], codes[row][2 * half + 1]]);
                // Both exact: S·sfa/4·sfb has at most 20 significant bits.
                let scale = cvt::mul_f32(f32::from_bits(sa[half]), sb[row][half]);
                acc[row] = cvt::fma_f32(dot as f32, scale, acc[row]);
            }
        }
    }
}

/// Step 2a: the pass's weight scales into the stage, one 16-byte chunk per set and tile
/// (consecutive threads take consecutive sets of a tile: chunks side by side in memory),
/// as this thread's first copy group.
#[inline(always)]
fn stage_scales(smem: Smem, sfb: u64, pass: &Pass, tiles: u32, blocks: u32, tid: u32) {
    let mut i = tid;
    while i < pass.sets * tiles {
        let (set, tile) = (i % pass.sets, i / pass.sets);
        let global = pass.first_set + set;
        let (tile_row, chunk) = (global / SETS_PER_TILE_ROW, global % SETS_PER_TILE_ROW);
        let src = sfb + layout::tile_offset(tile_row, tile, blocks) + (chunk * CHUNK_BYTES) as u64;
        cp_async::cg_16(smem.chunk(tile, set, pass.stride), src, CHUNK_BYTES);
        i += THREADS;
    }
    cp_async::commit_group();
}

/// A unit's end: lane 0 stores the warp's sum for each row of pair `pair` and activation
/// row as the partial of part `p` of that row; `acc` starts again from zero.
#[inline(always)]
fn flush<const M: usize>(smem: Smem, pair: u32, p: u32, acc: &mut [[f32; 2]; M]) {
    let lane = special::tid_x() % WARP;
    seq_macro::seq!(I in 0..4 {
        if I < M {
            for (row, acc) in acc[I % M].iter_mut().enumerate() {
                let sum = warp_sum(*acc, lane);
                if lane == 0 {
                    memory::st_shared_b32(smem.partial(UNIT_ROWS * pair + row as u32, p, I), sum.to_bits());
                }
                *acc = 0.0;
            }
        }
    });
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

    let activations = Activations::new(args, smem, l);
    let mut first_activations = (tid < activations.items).then(|| activations.load(tid));

    let row_bytes = (k / 2) as u64;
    let lane_block = LANE_BLOCKS * lane; // this lane's first block in each warp load
    let tiles = tiles(k);
    let sfb = args.sfb + l as u64 * layout::batch_bytes(n, blocks);
    let (first, end) = cta_sets(cta, ctas, sets(n));
    // Passes of equal size (within a set), each at most what the stage holds.
    let pass_sets = (end - first).div_ceil((end - first).div_ceil(max_pass_sets(M as u32, k)));
    let mut first_set = first;
    while first_set < end {
        let sets = if end - first_set < pass_sets { end - first_set } else { pass_sets };
        let rows = sets * SET_ROWS;
        let parts = parts(rows / UNIT_ROWS, loads);
        let part_loads = loads.div_ceil(parts);
        // Units u = warp, warp + WARPS, ... of the pass's pairs · parts, part-fastest.
        let units = rows / UNIT_ROWS * parts;
        let my_units = if warp_in_cta < units { (units - warp_in_cta).div_ceil(WARPS) } else { 0 };
        let part = warp_in_cta % parts;
        let stride = stage_stride(sets);
        let pass = Pass {
            first_set,
            sets,
            parts,
            part_loads,
            n,
            part,
            part_first_load: part * part_loads,
            slots: my_units * part_loads,
            lane_loads: if blocks > lane_block { (blocks - lane_block).div_ceil(LOAD_BLOCKS) } else { 0 },
            codes: args.b + l as u64 * n as u64 * row_bytes + (lane_block * BLOCK_BYTES) as u64,
            scales: smem.chunk(lane_block / layout::TILE_COLS, 0, stride),
            stride,
            scale_shift: lane_block % layout::TILE_COLS * u8::BITS,
            act: smem.act(0, lane_block),
            act_scales: smem.scale(0, lane_block),
            row_bytes,
            act_row: smem.act_row,
            act_scales_row: blocks * F32_BYTES,
        };

        // Step 2: the pass's scales, then this warp's units through the lane's ring. The
        // copy of slot s + RING - 1 goes into the ring slot that slot s - 1 was read from
        // (this lane's reads of it are done: their products were taken), then slot s is
        // awaited and multiplied. The scales are the oldest copy group: the first wait
        // for the ring's groups covers them, and a barrier shows them to every thread.
        // (Loading the activations too after these copies' issue: 1x7168x16384 0.7 us
        // faster, 1x7168x2048 1.1 us slower than converting them before; a first item
        // loaded before, converted after: both faster, docs/perf-notes.md, session 26.)
        stage_scales(smem, sfb, &pass, tiles, blocks, tid);
        let ring = smem.ring(warp_in_cta, lane);
        let start = Walk { pair: warp_in_cta / parts, load: 0 };
        let mut fetch = Fetch::new(&pass, start);
        let mut slot_in = 0; // the ring slot the next copy fills
        while slot_in < RING - 1 {
            pass.copy(ring, slot_in, &fetch, slot_in < pass.slots);
            fetch.advance(&pass);
            slot_in += 1;
        }
        if let Some(first) = first_activations.take() {
            // Step 1, in the first pass, while its copies are in flight.
            activations.finish(tid, first);
        }
        cp_async::wait_group::<{ RING - 1 }>();
        barrier::sync_unaligned(BARRIER_CTA, THREADS);

        let (mut walk, mut slot_out) = (start, 0);
        let mut in_rows = pass.weight_row(UNIT_ROWS * walk.pair) < n;
        let mut acc = [[0f32; 2]; M];
        let mut s = 0;
        while s < pass.slots {
            pass.copy(ring, slot_in, &fetch, s + RING - 1 < pass.slots);
            fetch.advance(&pass);
            slot_in = if slot_in == RING - 1 { 0 } else { slot_in + 1 };
            cp_async::wait_group::<{ RING - 1 }>();
            let g = pass.part_first_load + walk.load;
            if in_rows && g < pass.lane_loads {
                let codes = [
                    memory::ld_shared_v4_b32(ring.slot(slot_out, 0)),
                    memory::ld_shared_v4_b32(ring.slot(slot_out, 1)),
                ];
                pass.multiply_slot(g, codes, pass.scales(walk.pair, g), &mut acc);
            }
            let pair = walk.pair;
            if walk.advance(&pass) {
                // The unit's last slot: its partials, then a fresh sum.
                flush(smem, pair, pass.part, &mut acc);
                in_rows = pass.weight_row(UNIT_ROWS * walk.pair) < n;
            }
            slot_out = if slot_out == RING - 1 { 0 } else { slot_out + 1 };
            s += 1;
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
            let row = pass.weight_row(r);
            if row < n {
                let mut sum = f32::from_bits(memory::ld_shared_b32(smem.partial(r, 0, m)));
                for p in 1..parts {
                    sum += f32::from_bits(memory::ld_shared_b32(smem.partial(r, p, m)));
                }
                let at = c + (m as u64 * n as u64 + row as u64) * OUT_BYTES as u64;
                memory::st_global_b16(at, epilogue.one(sum, row));
            }
            t += THREADS;
        }
        barrier::sync_unaligned(BARRIER_CTA, THREADS);
        first_set += sets;
    }
}

gemm_entry_point!(nvfp4_gemv_sm90 => gemv);
