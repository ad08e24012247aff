//! Skinny calls on Hopper's tensor cores in one launch: C = A·Bᵀ for up to [`MAX_M`]
//! activation rows, NVFP4 or W4A16's fp16 or bf16 (sm90v2's kernel for M = 5..16 with NVFP4
//! activations, 1..16 with 16-bit ones, see [`takes`]).
//!
//! **Why.** At M = 16 a call still reads little more than the weights, but the CUDA-core
//! [`crate::gemv`] pays its integer products once per activation row, and sm90v2's decode
//! tiles feed wgmma through three launches (the activation images, the split GEMM, the
//! sum of the splits): 17.1 us on 16x7168x2048 on an H100, where a plain read of its bytes
//! right after the benchmark's L2 flush takes 8.5 (docs/perf-notes.md, session 27). Here
//! each weight is converted to fp16 once, in registers, and meets all 16 activation rows in
//! one warp-level `mma.sync.m16n8k16` (two for M > 8): the conversion costs the same
//! whatever M is, and the whole call is one launch with nothing before or after it.
//!
//! **Exact.** A weight's e2m1 code times its e4m3 scale times 2^-6 is exact in fp16 (the
//! e4m3 trick of [`crate::sm90v2`] leaves that factor, in [2^-16, 42]; bf16 calls build it
//! as bf16 times 2^-7, [`crate::sm90v2::Element`]), and so is an NVFP4 activation's, which
//! is converted the same way; 16-bit activations are taken as they are. Every product is
//! exact in f32, the tensor core sums them into f32 accumulators across all of K, and the
//! final sum times the operands' powers of two undoes them exactly. The only roundings are
//! the f32 sums', as in every kernel of this crate.
//!
//! **Work.** The grid is [CTAs per batch, L], one CTA of [`THREADS`] threads per SM. The
//! weight rows go to the CTAs in *sets* of four (rows c, c + 32, c + 64, c + 96 of a
//! 128-row tile row: the rows whose scales share a 16-byte chunk of each scale tile, as in
//! the GEMV), CTA x of a batch owning sets [x·S/X, (x+1)·S/X); four consecutive sets are a
//! *group* of 16 rows, one mma row block (mma row i is row i / 4 of set i % 4). K goes by in
//! *phases* of [`PHASE_K`] values; in each, the four warps of a group take a quarter each
//! (a *slot*: its 16 rows times 256 values), and a CTA with more than four groups gives each
//! warp one slot per group in *rounds*. Steps:
//! 1. Every thread prepares its share of the next phase's activations (all M rows, 1024
//!    values) in the other half of a double buffer in shared memory, in the order the mma
//!    fragments take them (`Source`: NVFP4 converted to fp16 as the weights are, 16-bit values
//!    only reordered), from raw bytes it loaded one phase earlier (so their latency hides
//!    behind a phase of work); the first two phases' bytes are loaded before the weights'
//!    first copies are issued, so they do not queue behind them (1.1-1.3 us off
//!    16x7168x2048 and 16x4096x7168, docs/perf-notes.md, session 27).
//! 2. Each warp streams its slots through a ring of `cp.async` groups in shared memory,
//!    [`RING`] - 1 slots ahead: each row's 128 code bytes of the slot as one whole line
//!    (eight lanes per row) and the 16-byte scale chunks of its sets; once a lane's
//!    `cp.async.wait_group` proves its own copies landed, `bar.warp.sync` makes the warp's
//!    visible to every lane.
//! 3. Per slot, each lane converts its codes into A fragments (block by block: the four
//!    scales of a tile are one word), reads the matching B fragments of the phase's
//!    activations and issues the mma steps into its accumulators; after each phase, a CTA
//!    barrier frees the activation buffer for the phase after next.
//! 4. At the end the warps store their accumulators in shared memory; each output sums its
//!    group's four quarters in order, times the operands' powers of two, through the
//!    epilogue into C.
//!
//! Every sum has a fixed order, so the result does not depend on timing. No workspace, no
//! other launch, no split across CTAs.
//!
//! **Limits** ([`takes`]): M ≤ [`MAX_M`], K a multiple of [`PHASE_K`], at most
//! [`MAX_ROUNDS`] groups per warp (on 132 SMs and one batch: N up to 16896). Other calls
//! run on sm90v2's decode tiles (NVFP4 calls with M ≤ 4 on the [`crate::gemv`] where it
//! takes them).

use nvfp4::layout;
use nvfp4::operand::AFormat;
use nvfp4::shape::SF_VECTOR;

use crate::epilogue::{Epilogue, OUT_BYTES};
use crate::gemv::{self, cta_sets, set_row, sets};
use crate::ptx::{SmemAddr, barrier, cp_async, cvt, memory, special, warp};
use crate::sm90v2::{Bf16, Element, F16, scale_byte_twice};
use crate::{GemmArgs, Launch, MAX_GRID_YZ};

/// The most activation rows a call may have: two n8 halves of the mma.
pub const MAX_M: u32 = 2 * MMA_N;
/// The entry point; 16 warps per CTA, one CTA per SM with all its registers.
pub const ENTRY: &str = "nvfp4_skinny_sm90";
pub const THREADS: u32 = 512;
const CTAS_PER_SM: u32 = 1;
pub const LAUNCH_BOUNDS: (&str, u32, u32, u32) = crate::launch_bounds(ENTRY, THREADS, CTAS_PER_SM);
const WARP: u32 = 32;
const WARPS: u32 = THREADS / WARP;

/// `mma.sync.m16n8k16`: rows of A (weight rows), columns of B (activation rows), K.
const MMA_M: u32 = 16;
const MMA_N: u32 = 8;
const MMA_K: u32 = 16;
/// A group: four sets of four rows, one mma row block.
const SET_ROWS: u32 = layout::TILE_ROWS / layout::LANE_ROWS;
const GROUP_SETS: u32 = MMA_M / SET_ROWS;
const SETS_PER_TILE_ROW: u32 = layout::LANE_ROWS;
/// Warps per group (the quarters of a phase), and groups per round.
const PARTS: u32 = 4;
const GROUPS_PER_ROUND: u32 = WARPS / PARTS;
/// The most rounds (groups per warp) a call may need.
pub const MAX_ROUNDS: u32 = 2;
/// A scale tile's K (4 blocks of 16), a slot's (one tile per lane t of a quad: 4 tiles) and
/// a phase's (a slot per part).
const TILE_K: u32 = layout::TILE_COLS * SF_VECTOR;
const QUAD: u32 = 4;
const SLOT_K: u32 = QUAD * TILE_K;
pub const PHASE_K: u32 = PARTS * SLOT_K;
const _: () = assert!(MMA_K * QUAD == TILE_K, "a lane's tile feeds four mma steps per block");
const _: () = assert!(QUAD == 4 && layout::TILE_COLS == 4, "`Walk::multiply` unrolls 4 blocks of 4 steps");
/// Bytes of codes per tile of one row, and per phase of one row.
const TILE_CODE_BYTES: u32 = TILE_K / 2;
const PHASE_CODE_BYTES: u32 = PHASE_K / 2;
/// Slots in each lane's ring of copies: `RING - 1` in flight while one is multiplied.
pub const RING: u32 = 3;
/// The warp's copies per slot: each row's 128 code bytes (a whole line) in 16-byte pieces,
/// eight lanes per row (lane L: set L / 8 of the group, piece L % 8, its four rows), and
/// the 16 scale chunks (four sets in four scale tiles) by lanes 0..16.
const PIECE_BYTES: u32 = 16;
const SLOT_ROW_CODE_BYTES: u32 = QUAD * TILE_CODE_BYTES;
const COPY_LANES_PER_ROW: u32 = SLOT_ROW_CODE_BYTES / PIECE_BYTES;
const _: () = assert!(COPY_LANES_PER_ROW * GROUP_SETS == WARP, "a lane per piece of one row of each set");
const _: () = assert!(RING <= 9, "`run` issues the ring's first copies in `seq!(FETCH in 0..8)`");
const SCALE_WORD_BYTES: u32 = 4;
const CHUNK_BYTES: u32 = layout::TILE_BYTES / layout::LANE_ROWS;
const SCALE_COPY_LANES: u32 = QUAD * GROUP_SETS;
/// A warp's slot in shared memory: [mma row][128 code bytes + 16 of padding] (a lane's two
/// 16-byte reads of rows g and g + 8 at tile t: the eight lanes of a read, rows g, g + 1
/// and tiles 0..3, hit all 32 banks), then [scale tile][set] x 16-byte chunks.
const CODE_ROW_BYTES: u32 = SLOT_ROW_CODE_BYTES + PIECE_BYTES;
const SLOT_CODE_BYTES: u32 = MMA_M * CODE_ROW_BYTES;
const SLOT_BYTES: u32 = SLOT_CODE_BYTES + SCALE_COPY_LANES * CHUNK_BYTES;
const RING_BYTES: u32 = WARPS * RING * SLOT_BYTES;
/// A phase's activations: [row][tile][block] x 16 fp16 (H[0..8] as `F16::weight` makes them, 32 bytes),
/// each tile padded to 144 bytes and each row to 64 bytes past a multiple of 128, so that
/// the eight lanes of a 16-byte shared load (rows g, g + 1, tiles t = 0..3) hit all 32 banks.
const ACT_BLOCK_BYTES: u32 = SF_VECTOR * 2;
const ACT_TILE_BYTES: u32 = layout::TILE_COLS * ACT_BLOCK_BYTES + 16;
const PHASE_TILES: u32 = PHASE_K / TILE_K;
const ACT_ROW_BYTES: u32 = (PHASE_TILES * ACT_TILE_BYTES).next_multiple_of(128) + 64;
const ACT_BUFFER_BYTES: u32 = MAX_M * ACT_ROW_BYTES;
/// At the end, each warp's accumulators: [group][part][half][lane] x 4 f32, over the ring.
const PARTIAL_BYTES: u32 = 4 * 4;
const PARTIALS_BYTES: u32 = MAX_ROUNDS * GROUPS_PER_ROUND * PARTS * 2 * WARP * PARTIAL_BYTES;
const _: () = assert!(PARTIALS_BYTES <= RING_BYTES, "the partials fit in the idle ring");
/// Dynamic shared memory: the ring, then the two activation buffers.
pub const SMEM_BYTES: u32 = RING_BYTES + 2 * ACT_BUFFER_BYTES;
const _: () = assert!(SMEM_BYTES <= 227 * 1024, "one CTA per SM fits");
/// Bytes of one W4A16 activation (fp16 or bf16).
const WIDE_BYTES: u32 = 2;
/// Named barrier for the whole CTA.
const BARRIER_CTA: u32 = 0;
/// Activation rows and block pairs each thread converts per phase: 16 rows x 32 pairs.
const PAIRS_PER_ROW: u32 = PHASE_K / (2 * SF_VECTOR);
const _: () = assert!(MAX_M * PAIRS_PER_ROW == THREADS, "one block pair of one row per thread and phase");

/// CTAs per batch on `sms` SMs for `l` batches: one per SM, never more than the sets.
const fn ctas_per_batch(n: u32, l: u32, sms: u32) -> u32 {
    gemv::ctas_per_batch(CTAS_PER_SM * if sms == 0 { 1 } else { sms }, n, l)
}

/// Groups per warp when `sets` sets go to `ctas` CTAs (the busiest CTA's groups over 4).
const fn rounds(sets: u32, ctas: u32) -> u32 {
    sets.div_ceil(ctas).div_ceil(GROUP_SETS).div_ceil(GROUPS_PER_ROUND)
}

/// Whether this kernel takes a call of shape M x N x K x L (any activations) on `sms` SMs:
/// M from 1 to [`MAX_M`], K a positive multiple of [`PHASE_K`], at most [`MAX_ROUNDS`]
/// groups per warp, L within the grid.
pub const fn takes(m: u32, n: u32, k: u32, l: u32, sms: u32) -> bool {
    m >= 1
        && m <= MAX_M
        && n >= 1
        && k >= PHASE_K
        && k.is_multiple_of(PHASE_K)
        && l >= 1
        && l <= MAX_GRID_YZ
        && rounds(sets(n), ctas_per_batch(n, l, sms)) <= MAX_ROUNDS
}

/// The launch on a GPU with `sms` SMs.
pub const fn launch(n: u32, l: u32, sms: u32) -> Launch {
    Launch { grid: [ctas_per_batch(n, l, sms), l, 1], block: [THREADS, 1, 1], dynamic_smem: SMEM_BYTES }
}

/// The kernel body, run by every thread of every CTA: `run` for the call's activations
/// (NVFP4, fp16 or bf16), M (one or two n8 halves) and groups per warp.
#[inline(always)]
pub fn skinny(args: &GemmArgs) {
    if args.a_format == AFormat::Nvfp4.code() {
        with::<Fp4, F16>(args);
    } else if args.a_format == AFormat::Bf16.code() {
        with::<Wide, Bf16>(args);
    } else {
        with::<Wide, F16>(args);
    }
}

/// `run` for activations from `S` multiplied as `E`.
#[inline(always)]
fn with<S: Source, E: Operands>(args: &GemmArgs) {
    let groups_per_warp = rounds(sets(args.n), special::nctaid_x());
    match (args.m > MMA_N, groups_per_warp > 1) {
        (false, false) => run::<1, 1, S, E>(args),
        (false, true) => run::<1, 2, S, E>(args),
        (true, false) => run::<2, 1, S, E>(args),
        (true, true) => run::<2, 2, S, E>(args),
    }
}

/// Step 1's addresses: batch `l`'s activations; thread τ prepares its share of activation
/// row τ / 32 as lane τ % 32 of the row (rows past M as zeros).
#[derive(Clone, Copy)]
struct Activations {
    /// Row 0 of the batch's A, and the bytes of a row.
    rows: u64,
    row_bytes: u64,
    /// The batch's SFA and its blocks per row (NVFP4 activations only).
    scales: u64,
    blocks: u32,
    row: u32,
    /// The thread's lane in its row: NVFP4 block pair `lane` of each phase, or 16-bit
    /// chunks `lane + 32i`.
    lane: u32,
    live: bool,
}

impl Activations {
    fn new<S: Source>(args: &GemmArgs, l: u32, tid: u32) -> Activations {
        let (m, k) = (args.m, args.k);
        let row_bytes = S::row_bytes(k);
        let blocks = k / SF_VECTOR;
        let row = tid / PAIRS_PER_ROW;
        Activations {
            rows: args.a + l as u64 * m as u64 * row_bytes,
            row_bytes,
            scales: args.sfa + l as u64 * layout::batch_bytes(m, blocks),
            blocks,
            row,
            lane: tid % PAIRS_PER_ROW,
            live: row < m,
        }
    }

    /// This thread's NVFP4 block pair of phase `phase`: its first value's index in K.
    fn pair_start(&self, phase: u32) -> u32 {
        phase * PHASE_K + 2 * SF_VECTOR * self.lane
    }
}

/// Where step 1's activations come from, and how they become the fp16 or bf16 values the
/// mma multiplies: each thread loads its raw share of one phase (a phase before it is
/// needed, so its latency hides behind a phase of work), then stores it in the phase's
/// buffer as H[0..8] of each block, in the pair order of the weights
/// ([`Element::activations`]).
trait Source: Copy {
    /// What a thread holds between its load and its store.
    type Raw: Copy;
    /// What every stored activation carries besides its value: the final sums are multiplied
    /// by its inverse.
    const UNDO: f32;
    /// Bytes of one activation row of K values.
    fn row_bytes(k: u32) -> u64;
    /// This thread's raw share of phase `phase` (zeros past M).
    fn load(acts: &Activations, phase: u32) -> Self::Raw;
    /// Stores `raw` in the pair order of `E`'s weights.
    fn store<E: Element>(acts: &Activations, buffer: SmemAddr, raw: Self::Raw);
}

/// NVFP4 activations: 16 code bytes and two scales per block pair, converted to fp16
/// value·sfa·2^-6 exactly as the fp16 weights are converted (`F16`'s scale and pairs), so
/// they carry the same power of two.
#[derive(Clone, Copy)]
struct Fp4;

impl Source for Fp4 {
    /// The codes (four words) and the two scale bytes (in the low 16 bits).
    type Raw = ([u32; 4], u32);
    const UNDO: f32 = F16::UNDO;

    fn row_bytes(k: u32) -> u64 {
        (k / 2) as u64
    }

    #[inline(always)]
    fn load(acts: &Activations, phase: u32) -> Self::Raw {
        if !acts.live {
            return ([0; 4], 0);
        }
        let first = acts.pair_start(phase);
        let at = acts.rows + acts.row as u64 * acts.row_bytes + (first / 2) as u64;
        let codes = memory::ld_global_nc_v4_b32(at);
        let scale = acts.scales + layout::offset(acts.row, first / SF_VECTOR, acts.blocks);
        (codes, memory::ld_global_nc_u16(scale) as u32)
    }

    #[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` unrolls into literal 0 and 1 factors
    #[inline(always)]
    fn store<E: Element>(acts: &Activations, buffer: SmemAddr, (codes, scales): Self::Raw) {
        seq_macro::seq!(HALF in 0..2 {
            let words = codes[2 * HALF] as u64 | (codes[2 * HALF + 1] as u64) << 32;
            let scale = F16::scale(scale_byte_twice(scales, HALF));
            let pair = |i| F16::weight(words, i, scale);
            let at = acts.block(buffer, HALF);
            memory::st_shared_v4_b32(at, [pair(0), pair(1), pair(2), pair(3)]);
            memory::st_shared_v4_b32(at.offset(ACT_BLOCK_BYTES / 2), [pair(4), pair(5), pair(6), pair(7)]);
        });
    }
}

/// W4A16's fp16 or bf16 activations, the values themselves, only put in the pair order.
/// A phase of a row is 128 chunks of 16 bytes (eight values, half a block); the row's 32
/// threads take chunks lane, lane + 32, lane + 64, lane + 96, so that each of their four
/// 16-byte loads reads 512 contiguous bytes per warp. (Each thread's own 64 contiguous
/// bytes, a block pair as NVFP4 activations go, made every load touch 32 sectors, half of
/// each: 16x7168x16384 took 49.1 us against the decode tiles' 46.4 on an H100,
/// docs/perf-notes.md, session 28.)
#[derive(Clone, Copy)]
struct Wide;

/// 16-byte chunks of one row's phase, and how many each thread takes.
const WIDE_CHUNKS_PER_ROW: u32 = PHASE_K * WIDE_BYTES / PIECE_BYTES;
const WIDE_CHUNKS_PER_THREAD: u32 = WIDE_CHUNKS_PER_ROW / PAIRS_PER_ROW;
const _: () = assert!(WIDE_CHUNKS_PER_THREAD == 4, "`Wide::load` unrolls four chunks");
/// Values in a chunk, and chunks per block.
const CHUNK_VALUES: u32 = PIECE_BYTES / WIDE_BYTES;
const CHUNKS_PER_BLOCK: u32 = SF_VECTOR / CHUNK_VALUES;

impl Source for Wide {
    /// Four chunks (8 values each, two per word, the even one low).
    type Raw = [[u32; 4]; WIDE_CHUNKS_PER_THREAD as usize];
    const UNDO: f32 = 1.0;

    fn row_bytes(k: u32) -> u64 {
        k as u64 * WIDE_BYTES as u64
    }

    #[inline(always)]
    fn load(acts: &Activations, phase: u32) -> Self::Raw {
        if !acts.live {
            return [[0; 4]; WIDE_CHUNKS_PER_THREAD as usize];
        }
        let row_phase = acts.rows + acts.row as u64 * acts.row_bytes + (phase * PHASE_K * WIDE_BYTES) as u64;
        core::array::from_fn(|i| {
            let chunk = acts.lane + i as u32 * PAIRS_PER_ROW;
            memory::ld_global_nc_v4_b32(row_phase + (chunk * PIECE_BYTES) as u64)
        })
    }

    #[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` unrolls into literal 0 and 1 factors
    #[inline(always)]
    fn store<E: Element>(acts: &Activations, buffer: SmemAddr, chunks: Self::Raw) {
        // Unrolled (`seq!`): a loop over `chunks` put it in local memory.
        seq_macro::seq!(I in 0..4 {
            // Chunk c of the phase: half c % 2 of block c / 2 (H[0..4] or H[4..8]).
            let chunk = acts.lane + I * PAIRS_PER_ROW;
            let block = chunk / CHUNKS_PER_BLOCK;
            let at = act_block(buffer, acts.row, block / layout::TILE_COLS, block % layout::TILE_COLS);
            memory::st_shared_v4_b32(at.offset(chunk % CHUNKS_PER_BLOCK * PIECE_BYTES), E::activations(chunks[I]));
        });
    }
}

impl Activations {
    /// Where block `half` of this thread's pair goes in a phase buffer.
    fn block(&self, buffer: SmemAddr, half: u32) -> SmemAddr {
        let (tile, first_block) = (2 * self.lane / layout::TILE_COLS, 2 * self.lane % layout::TILE_COLS);
        act_block(buffer, self.row, tile, first_block + half)
    }
}

/// The tensor cores' input type: fp16 (NVFP4 and fp16 activations) or bf16 (bf16
/// activations, with the weights built as bf16 as in sm90v2), and its `mma.sync`.
trait Operands: Element {
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
}

impl Operands for F16 {
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        warp::mma_m16n8k16_f32_f16(a, b, c)
    }
}

impl Operands for Bf16 {
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        warp::mma_m16n8k16_f32_bf16(a, b, c)
    }
}

/// Block `block` of tile `tile` of activation row `row` in a phase buffer.
fn act_block(buffer: SmemAddr, row: u32, tile: u32, block: u32) -> SmemAddr {
    buffer.offset(row * ACT_ROW_BYTES + tile * ACT_TILE_BYTES + block * ACT_BLOCK_BYTES)
}

/// One lane's copies of a group: the codes of the four rows of set `lane / 8` of the group
/// (16 bytes of each of their 128-byte slot pieces), and, for lanes 0..16, the 16-byte scale
/// chunk of set `lane % 4` in scale tile `lane / 4` of the slot.
#[derive(Clone, Copy)]
struct LaneCopies {
    /// Row 0 of the set at this lane's 16 bytes of phase 0's slot of its part (rows 1..4
    /// follow `LANE_ROWS` rows apart).
    codes: u64,
    /// Which of the set's four rows are weight rows of the CTA (bit i: row i).
    live: u32,
    /// The scale chunk in scale tile 0 of its tile row (add 512 bytes per tile); whether
    /// its set is one of the CTA's.
    scales: u64,
    scales_live: bool,
}

/// mma row `i` of a group starting at set `first`: (set, row in the set).
const fn group_row(first: u32, i: u32) -> (u32, u32) {
    (first + i % GROUP_SETS, i / GROUP_SETS)
}

/// What a CTA's warp needs to walk its slots.
#[derive(Clone, Copy)]
struct Walk {
    ring: SmemAddr,
    lane: u32,
    part: u32,
    t: u32,
    row_bytes: u64,
}

impl Walk {
    /// Ring slot `slot` of this warp.
    fn slot(&self, slot: u32) -> SmemAddr {
        self.ring.offset(slot * SLOT_BYTES)
    }
    /// mma row `i`'s code bytes of a slot.
    fn codes(&self, slot: u32, i: u32) -> SmemAddr {
        self.slot(slot).offset(i * CODE_ROW_BYTES)
    }
    /// The scale chunk of set `set` (of the group) in the slot's scale tile `tile`.
    fn chunk(&self, slot: u32, tile: u32, set: u32) -> SmemAddr {
        self.slot(slot).offset(SLOT_CODE_BYTES + (tile * GROUP_SETS + set) * CHUNK_BYTES)
    }

    /// Copies this lane's share of phase `phase`'s slot of `copies` into ring slot `slot`
    /// (rows that are not weight rows read as zeros), then closes the lane's copy group (an
    /// empty one when `copy` is false: every slot is one group). A warp instruction copies
    /// four whole 128-byte lines, one per row of a set.
    #[inline(always)]
    fn copy(&self, slot: u32, copies: &LaneCopies, phase: u32, copy: bool) {
        if copy {
            let (set, chunk) = (self.lane / COPY_LANES_PER_ROW, self.lane % COPY_LANES_PER_ROW);
            let codes = copies.codes + (phase * PHASE_CODE_BYTES) as u64;
            for in_set in 0..SET_ROWS {
                let size = if copies.live >> in_set & 1 != 0 { PIECE_BYTES } else { 0 };
                let i = in_set * GROUP_SETS + set; // the mma row
                let src = codes + (in_set * layout::LANE_ROWS) as u64 * self.row_bytes;
                cp_async::cg_16(self.codes(slot, i).offset(chunk * PIECE_BYTES), src, size);
            }
            if self.lane < SCALE_COPY_LANES {
                let (tile, set) = (self.lane / GROUP_SETS, self.lane % GROUP_SETS);
                let global_tile = phase * PHASE_TILES + self.part * QUAD + tile;
                let src = copies.scales + (global_tile * layout::TILE_BYTES) as u64;
                let size = if copies.scales_live { CHUNK_BYTES } else { 0 };
                cp_async::cg_16(self.chunk(slot, tile, set), src, size);
            }
        }
        cp_async::commit_group();
    }

    /// Multiplies ring slot `slot` (this lane's tile of rows g, g + 8) by the activations of
    /// `buffer` into `acc` (one accumulator per n8 half).
    #[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` unrolls into literal 0 and 1 factors
    #[inline(always)]
    fn multiply<const H: usize, E: Operands>(&self, slot: u32, buffer: SmemAddr, g: u32, acc: &mut [[f32; 4]; H]) {
        // Rows g and g + 8: their 32 code bytes of this lane's tile t (block b is words 2b
        // and 2b + 1) and their scale words (set g % 4, rows g / 4 and 2 + g / 4 of it).
        let codes = [g, g + MMA_N].map(|i| {
            let first = self.codes(slot, i).offset(self.t * TILE_CODE_BYTES);
            let [w0, w1, w2, w3] = memory::ld_shared_v4_b32(first);
            let [w4, w5, w6, w7] = memory::ld_shared_v4_b32(first.offset(PIECE_BYTES));
            [w0, w1, w2, w3, w4, w5, w6, w7]
        });
        let scales = [g, g + MMA_N].map(|i| {
            let (set, in_set) = group_row(0, i);
            memory::ld_shared_b32(self.chunk(slot, self.t, set).offset(in_set * SCALE_WORD_BYTES))
        });
        let tile = self.part * QUAD + self.t;
        // Unrolled (`seq!`): every register array index a constant, or LLVM puts the arrays
        // in local memory.
        seq_macro::seq!(BLOCK in 0..4 {
            // This block's codes (two words, 16 values) and scale of each row.
            let w0 = codes[0][2 * BLOCK] as u64 | (codes[0][2 * BLOCK + 1] as u64) << 32;
            let w1 = codes[1][2 * BLOCK] as u64 | (codes[1][2 * BLOCK + 1] as u64) << 32;
            let s0 = E::scale(scale_byte_twice(scales[0], BLOCK));
            let s1 = E::scale(scale_byte_twice(scales[1], BLOCK));
            // The activations of this block for column g of each half.
            let b: [[u32; 8]; H] = core::array::from_fn(|half| {
                let first = act_block(buffer, g + half as u32 * MMA_N, tile, BLOCK);
                let [b0, b1, b2, b3] = memory::ld_shared_v4_b32(first);
                let [b4, b5, b6, b7] = memory::ld_shared_v4_b32(first.offset(ACT_BLOCK_BYTES / 2));
                [b0, b1, b2, b3, b4, b5, b6, b7]
            });
            seq_macro::seq!(STEP in 0..4 {
                let a = [
                    E::weight(w0, 2 * STEP, s0),
                    E::weight(w1, 2 * STEP, s1),
                    E::weight(w0, 2 * STEP + 1, s0),
                    E::weight(w1, 2 * STEP + 1, s1),
                ];
                seq_macro::seq!(HALF in 0..2 {
                    if HALF < H {
                        let half = HALF % H;
                        acc[half] = E::mma(a, [b[half][2 * STEP], b[half][2 * STEP + 1]], acc[half]);
                    }
                });
            });
        });
    }
}

/// The kernel for `H` n8 halves of activation rows and `R` groups per warp.
#[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` unrolls into literal 0 and 1 factors
#[inline(always)]
fn run<const H: usize, const R: usize, S: Source, E: Operands>(args: &GemmArgs) {
    let (n, k) = (args.n, args.k);
    let base = special::dynamic_smem();
    let (cta, ctas, l) = (special::ctaid_x(), special::nctaid_x(), special::ctaid_y());
    let tid = special::tid_x();
    let (warp_in_cta, lane) = (tid / WARP, tid % WARP);
    let (g, t) = (lane / QUAD, lane % QUAD);
    let part = warp_in_cta % PARTS;

    // This CTA's sets, its groups, and this lane's rows in each of its warp's groups.
    let (first, end) = cta_sets(cta, ctas, sets(n));
    let groups = (end - first).div_ceil(GROUP_SETS);
    let row_bytes = (k / 2) as u64;
    let blocks = k / SF_VECTOR;
    let codes = args.b + l as u64 * n as u64 * row_bytes;
    let sfb = args.sfb + l as u64 * layout::batch_bytes(n, blocks);
    let group_of = |r: u32| warp_in_cta / PARTS + r * GROUPS_PER_ROUND;
    // This lane's copies in the group of round r: the codes of set lane / 8 and the scale
    // chunk of set lane % 4 (see `LaneCopies`).
    let lane_copies = |r: u32| {
        let group_first = first + GROUP_SETS * group_of(r);
        let set = group_first + lane / COPY_LANES_PER_ROW;
        let mut live = 0;
        for in_set in 0..SET_ROWS {
            live |= ((set < end && set_row(set, in_set) < n) as u32) << in_set;
        }
        let row = if set < end { set_row(set, 0) } else { 0 };
        let piece = part * SLOT_ROW_CODE_BYTES + lane % COPY_LANES_PER_ROW * PIECE_BYTES;
        let scale_set = group_first + lane % GROUP_SETS;
        let (tile_row, chunk) = (scale_set / SETS_PER_TILE_ROW, scale_set % SETS_PER_TILE_ROW);
        let scales_live = scale_set < end;
        let scales = layout::tile_offset(tile_row, 0, blocks) + (chunk * CHUNK_BYTES) as u64;
        LaneCopies {
            codes: codes + row as u64 * row_bytes + piece as u64,
            live,
            scales: if scales_live { sfb + scales } else { sfb },
            scales_live,
        }
    };
    let rows: [LaneCopies; R] = core::array::from_fn(|r| lane_copies(r as u32));
    let active: [bool; R] = core::array::from_fn(|r| group_of(r as u32) < groups);

    let walk = Walk { ring: base.offset(warp_in_cta * RING * SLOT_BYTES), lane, part, t, row_bytes };
    let buffer = |phase: u32| base.offset(RING_BYTES + phase % 2 * ACT_BUFFER_BYTES);
    let activations = Activations::new::<S>(args, l, tid);
    let phases = k / PHASE_K;
    let slots = phases * R as u32;

    // The raw bytes of phases 0 and 1 first (so they do not queue behind the weights'
    // copies), step 2's first copies, then step 1 for phase 0 (waiting for its bytes once).
    let phase0 = S::load(&activations, 0);
    let mut raw = S::load(&activations, if phases > 1 { 1 } else { 0 });
    seq_macro::seq!(FETCH in 0..8 {
        if FETCH < RING - 1 {
            let fetch: u32 = FETCH;
            let r = fetch as usize % R;
            walk.copy(fetch, &rows[r], fetch / R as u32, fetch < slots && active[r]);
        }
    });
    S::store::<E>(&activations, buffer(0), phase0);
    barrier::sync_unaligned(BARRIER_CTA, THREADS);

    let mut acc = [[[0f32; 4]; H]; R];
    let mut slot = 0;
    for phase in 0..phases {
        // Step 1 for the next phase, from the bytes loaded during this one's predecessor.
        if phase + 1 < phases {
            S::store::<E>(&activations, buffer(phase + 1), raw);
            if phase + 2 < phases {
                raw = S::load(&activations, phase + 2);
            }
        }
        // Slot `slot` is round RR of this phase; round indices are constants (`seq!`).
        seq_macro::seq!(RR in 0..2 {
            if RR < R {
                let r = RR % R;
                // This lane's copies of slot `slot` have landed once at most RING - 2 younger
                // groups are pending.
                cp_async::wait_group::<{ RING - 2 }>();
                // Every lane's copies of slot `slot` landed and visible to the warp; every
                // lane done with the slot the next copy refills.
                barrier::warp_sync();
                let next = slot + RING - 1;
                let next_r = (r + RING as usize - 1) % R;
                let next_phase = phase + (r as u32 + RING - 1) / R as u32;
                walk.copy(next % RING, &rows[next_r], next_phase, next < slots && active[next_r]);
                if active[r] {
                    walk.multiply::<H, E>(slot % RING, buffer(phase), g, &mut acc[r]);
                }
                slot += 1;
            }
        });
        // The activation buffer of this phase is free, the next one complete.
        barrier::sync_unaligned(BARRIER_CTA, THREADS);
    }

    // Step 4: the accumulators over the idle ring, then each output's four quarters in
    // order. (Every copy group has landed: the last wait covered the last real slot, and
    // the later groups are empty.)
    cp_async::wait_group::<0>();
    barrier::sync_unaligned(BARRIER_CTA, THREADS);
    let partial = |group: u32, part: u32, half: u32, lane: u32| {
        base.offset((((group * PARTS + part) * 2 + half) * WARP + lane) * PARTIAL_BYTES)
    };
    seq_macro::seq!(RR in 0..2 {
        seq_macro::seq!(HALF in 0..2 {
            if RR < R && HALF < H {
                let at = partial(group_of(RR), part, HALF, lane);
                memory::st_shared_v4_b32(at, acc[RR % R][HALF % H].map(f32::to_bits));
            }
        });
    });
    barrier::sync_unaligned(BARRIER_CTA, THREADS);
    let epilogue = Epilogue::load(args);
    let m = args.m;
    let c = args.c + l as u64 * m as u64 * n as u64 * OUT_BYTES as u64;
    let mut item = tid;
    while item < groups * MMA_M * m {
        // Item (group, mma row i, activation row j): D[i][j] of the group's mma, held by lane
        // 4·(i % 8) + (j % 8) / 2 of its quarters, register 2·(i / 8) + j % 2, half j / 8.
        let (j, i, group) = (item % m, item / m % MMA_M, item / (m * MMA_M));
        let (set, in_set) = group_row(first + GROUP_SETS * group, i);
        let row = set_row(set, in_set);
        if set < end && row < n {
            let (half, holder) = (j / MMA_N, QUAD * (i % MMA_N) + j % MMA_N / 2);
            let register = 2 * (i / MMA_N) + j % 2;
            let mut sum = 0f32;
            for part in 0..PARTS {
                let at = partial(group, part, half, holder).offset(register * 4);
                let value = f32::from_bits(memory::ld_shared_b32(at));
                sum = if part == 0 { value } else { sum + value };
            }
            let at = c + (j as u64 * n as u64 + row as u64) * OUT_BYTES as u64;
            memory::st_global_b16(at, epilogue.one(cvt::mul_f32(sum, S::UNDO * E::UNDO), row));
        }
        item += THREADS;
    }
}

gemm_entry_point!(nvfp4_skinny_sm90 => skinny);
