//! `sm100` v1: NVFP4 GEMM on Blackwell's block-scaled FP4 tensor cores.
//!
//! **Math.** C[m, n] = fp16( Σ_k a[m, k]·sfa[m, k/16] · b[n, k]·sfb[n, k/16] ). Blackwell
//! multiplies NVFP4 natively: `tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X`
//! reads packed e2m1 A and B tiles from shared memory, one ue4m3 scale per 16 values
//! from tensor memory, and accumulates 128 x N x 64 in f32 into tensor memory. Nothing is
//! dequantized: the bytes the user passed go straight to the tensor core.
//!
//! **Work.** A CTA computes a 128 (M) x 64 (N) tile of C. The narrow N doubles the CTAs
//! of the M = 128 benchmark shapes (112 for N = 7168 on 148 SMs, where 128-wide tiles
//! would leave 92 SMs idle). K is walked in stages of 256 values: one 128-byte swizzle
//! row of packed e2m1 per tile row, four MMAs of K = 64. When there are fewer tiles than
//! half the SMs (128x4096x7168: 64 tiles), K is split: [`splits`] CTAs each multiply a
//! range of K stages of the same tile, write their f32 partial sums to the workspace, and
//! the last to finish (a counter per tile) adds them in split order and writes C. Work
//! units (tile, split) are numbered split-fastest, then N, M and batch, so neighbouring
//! CTAs share their A tile in L2; CTA x takes units x, x + gridDim.x, ...
//!
//! **Warp roles** (288 threads = 9 warps):
//! - warps 0-3, the *producers*: stage A, B and the scale tiles of one K stage into the
//!   shared-memory ring with 16-byte `cp.async` (14 per thread per stage), writing A and
//!   B 128B-swizzled as the MMA's descriptors expect; the blocked scale tiles go as they
//!   are (512 contiguous bytes per 128 rows x 64 K, exactly what `tcgen05.cp` copies).
//! - warp 4, the *MMA warp*: allocates tensor memory; its lane 0 copies each stage's
//!   scales into tensor memory (`tcgen05.cp .32x128b.warpx4`), issues the four MMAs, and
//!   `tcgen05.commit`s them to the stage's `empty` barrier and, after a tile's last
//!   stage, to the accumulator's `tmem_full` barrier.
//! - warps 5-8, the *epilogue*: warp w reads lanes 32·(w%4)..+31 of the accumulator (the
//!   hardware's lane-quarter rule), converts to fp16 and stores row-major to C (or, for a
//!   split tile, stores the f32 partial and takes part in the fix-up).
//!
//! **Pipeline and barriers.**
//! - `full[s]` (128 arrivals, one per producer thread): stage s holds A, B and scales.
//!   cp.async writes through the generic proxy and the tensor core reads through the async
//!   proxy, so each producer thread waits for its own copies (`cp.async.wait_group`),
//!   fences them (`fence.proxy.async`) and only then arrives. It does so `PUBLISH_LAG`
//!   stages behind its issue point, keeping that many stages of loads in flight.
//! - `empty[s]` (1 arrival: the MMA thread's `tcgen05.commit`): every MMA that read
//!   stage s has completed; the producers may overwrite it.
//! - `tmem_full[a]` (1 arrival: a commit): accumulator a holds a finished tile.
//! - `tmem_empty[a]` (128 arrivals, one per epilogue thread): accumulator a has been read.
//!   Two accumulators let the MMA of tile i+1 run while the epilogue drains tile i.
//!
//! **Tensor memory** (512 columns allocated, f32 cells, lane = row):
//! - columns [0, 128): the two accumulators, 64 columns each (row m of C in lane m);
//! - columns [128, 224): SFA, 4 columns per MMA per stage (per-stage columns, so a scale
//!   copy never overwrites scales an MMA in flight still reads);
//! - columns [224, 320): SFB likewise. A 512-byte scale tile always holds 128 rows, so a
//!   64-row B tile starting at n0 reads its scales from column (n0 % 128) / 32 of it.
//!
//! **Split-K fix-up.** Each epilogue thread stores its row of the partial, executes
//! `fence.acq_rel.gpu` (its stores before the count), the 128 epilogue threads meet at a
//! named barrier, and one of them adds 1 to the tile's counter with an acq_rel atomic. The
//! CTA that brings the count to `splits` reads every partial back through L2 (`ld.global.cg`),
//! sums them in split order (so the result does not depend on which CTA finished last)
//! and resets the counter to 0 for the next launch. Nobody waits for anybody.
//!
//! **Constraints.** Any M, N and L; K a multiple of 16 (a partial last stage issues fewer
//! MMAs; the last MMA's values past K are zero-filled on load, see `rows.rs`, and its
//! padding scales are zero). Needs sm_100a (tcgen05, PTX ISA 8.7).
//!
//! **Versus sm90.** No dequantization at all (the tensor core does the block scaling), so
//! no converter warpgroup; the accumulator lives in tensor memory instead of registers,
//! and one thread drives the tensor core.

use nvfp4::layout::{self, TILE_BYTES, TILE_COLS, TILE_ROWS};
use nvfp4::shape::{K_GRANULE, SF_VECTOR};
use nvfp4::sm100::{InstrDesc, SmemDesc};
use nvfp4::swizzle::Swizzle;

use crate::epilogue::{Epilogue, OUT_BYTES};
use crate::ptx::mbarrier::{MBARRIER_BYTES, Mbarrier};
use crate::ptx::tcgen05::{self, TmemAddr};
use crate::ptx::{SmemAddr, barrier, cp_async, fence, memory, special, warp};
use crate::ring::RingPos;
use crate::rows::{self, CHUNK};
use crate::{GemmArgs, Launch};

// ---------------------------------------------------------------------------------------
// Tile and pipeline constants
// ---------------------------------------------------------------------------------------

/// Rows of A (and of C) per CTA tile: the MMA's M (cta_group::1 has only M = 128).
pub const BLOCK_M: u32 = 128;
/// Rows of B (columns of C) per CTA tile: the MMA's N.
pub const BLOCK_N: u32 = 64;
/// K values per pipeline stage: one 128-byte swizzle row of packed e2m1.
pub const BLOCK_K: u32 = 256;
/// K per MMA (fixed for dense `kind::mxf4nvf4`: 32 bytes of each row).
const MMA_K: u32 = K_GRANULE;
/// MMAs per stage.
const MMAS_PER_STAGE: u32 = BLOCK_K / MMA_K;
/// Stages in the shared-memory ring.
pub const STAGES: u32 = 6;
/// Stages a producer thread keeps in flight before it publishes the oldest one.
const PUBLISH_LAG: u32 = 4;
/// Accumulators in tensor memory (MMA of one tile overlaps the epilogue of the last).
const ACCUMULATORS: u32 = 2;

const WARP: u32 = 32;
/// Warps 0-3 produce.
const PRODUCER_WARPS: u32 = 4;
const PRODUCER_THREADS: u32 = PRODUCER_WARPS * WARP;
/// Warp 4 allocates tensor memory and drives the tensor core.
const MMA_WARP: u32 = PRODUCER_WARPS;
/// Warps 5-8 drain the accumulator.
const FIRST_EPILOGUE_WARP: u32 = MMA_WARP + 1;
const EPILOGUE_WARPS: u32 = 4;
const EPILOGUE_THREADS: u32 = EPILOGUE_WARPS * WARP;
pub const THREADS: u32 = (FIRST_EPILOGUE_WARP + EPILOGUE_WARPS) * WARP;

/// Packed e2m1 bytes of one tile row per stage (two values per byte).
const ROW_BYTES: u32 = BLOCK_K / 2;
/// Packed bytes of one tile row per MMA: the start-address step inside a swizzle row.
const MMA_K_BYTES: u32 = MMA_K / 2;
/// 16-byte chunks ([`CHUNK`], the unit of `cp.async.cg` and of the swizzle) per row.
const CHUNKS_PER_ROW: u32 = ROW_BYTES / CHUNK;
/// The swizzle atom: 8 rows x 128 B; its stride is the descriptors' SBO.
const SWIZZLE_ATOM_BYTES: u32 = 8 * ROW_BYTES;
/// The leading byte offset is ignored for swizzled K-major operands one atom wide in K;
/// CUTLASS writes 16 bytes ("assumed 1"), which the emulator accepts like 0.
const LBO_UNUSED: u32 = 16;
/// Scale tiles per operand per stage: one per MMA.
const SCALE_TILES_PER_STAGE: u32 = MMAS_PER_STAGE;
/// Tensor-memory columns one scale tile fills (128 rows: 32 lanes x 4 columns, replicated
/// into the four lane quarters by `.warpx4`).
const SCALE_TILE_COLUMNS: u32 = TILE_ROWS / WARP;
/// Named barrier for the whole CTA.
const BARRIER_CTA: u32 = 0;
/// Named barrier for the 128 epilogue threads (the split-K fix-up).
const BARRIER_EPILOGUE: u32 = 1;
/// Bytes of one f32.
const F32_BYTES: u32 = 4;

/// The instruction descriptor: E2M1 x E2M1, ue4m3 scales, K-major, 128 x 64 (checked
/// against the published values in `nvfp4::sm100`'s tests).
const IDESC: InstrDesc = InstrDesc::nvfp4(BLOCK_M, BLOCK_N);

const _: () = assert!(ROW_BYTES == Swizzle::B128.row_bytes(), "a stage row is one 128B-swizzle row");
const _: () = assert!(BLOCK_M == TILE_ROWS, "one scale tile covers the A tile's rows");
const _: () = assert!(BLOCK_N <= TILE_ROWS && TILE_ROWS.is_multiple_of(BLOCK_N), "a B tile lies in one scale tile");
const _: () = assert!(MMA_K == TILE_COLS * SF_VECTOR, "one scale tile per MMA");
const _: () = assert!(PUBLISH_LAG < STAGES, "the producer must publish a stage before it needs it again");
const _: () = assert!(BLOCK_N.is_multiple_of(WARP), "the epilogue reads 32 columns at a time");

// ---------------------------------------------------------------------------------------
// Tensor memory map (columns; lane = tile row)
// ---------------------------------------------------------------------------------------

const ACC_COLUMN: u32 = 0;
const SFA_COLUMN: u32 = ACC_COLUMN + ACCUMULATORS * BLOCK_N;
const SF_COLUMNS_PER_OPERAND: u32 = STAGES * SCALE_TILES_PER_STAGE * SCALE_TILE_COLUMNS;
const SFB_COLUMN: u32 = SFA_COLUMN + SF_COLUMNS_PER_OPERAND;
const TMEM_COLUMNS_USED: u32 = SFB_COLUMN + SF_COLUMNS_PER_OPERAND;
/// Columns allocated: a power of two in 32..=512.
const TMEM_COLUMNS: u32 = TMEM_COLUMNS_USED.next_power_of_two();

const _: () = assert!(TMEM_COLUMNS >= 32 && TMEM_COLUMNS <= 512);

// ---------------------------------------------------------------------------------------
// Shared memory map (offsets from DYN_SMEM, which is 1024-byte aligned)
// ---------------------------------------------------------------------------------------

/// A tiles: [STAGES][128 rows][128 B of packed e2m1], 128B-swizzled.
const A_OFFSET: u32 = 0;
const A_STAGE_BYTES: u32 = BLOCK_M * ROW_BYTES;
/// B tiles: [STAGES][64 rows][128 B], 128B-swizzled.
const B_OFFSET: u32 = A_OFFSET + STAGES * A_STAGE_BYTES;
const B_STAGE_BYTES: u32 = BLOCK_N * ROW_BYTES;
/// SFA: [STAGES][4 scale tiles][512 B], blocked layout as in global memory.
const SFA_OFFSET: u32 = B_OFFSET + STAGES * B_STAGE_BYTES;
const SF_STAGE_BYTES: u32 = SCALE_TILES_PER_STAGE * TILE_BYTES;
/// SFB: [STAGES][4 scale tiles of the 128-row block holding the B tile][512 B].
const SFB_OFFSET: u32 = SFA_OFFSET + STAGES * SF_STAGE_BYTES;
/// mbarriers: full[STAGES], empty[STAGES], tmem_full[2], tmem_empty[2].
const FULL_OFFSET: u32 = SFB_OFFSET + STAGES * SF_STAGE_BYTES;
const EMPTY_OFFSET: u32 = FULL_OFFSET + STAGES * MBARRIER_BYTES;
const TMEM_FULL_OFFSET: u32 = EMPTY_OFFSET + STAGES * MBARRIER_BYTES;
const TMEM_EMPTY_OFFSET: u32 = TMEM_FULL_OFFSET + ACCUMULATORS * MBARRIER_BYTES;
/// Where `tcgen05.alloc` writes the tensor-memory base address (4 bytes).
const TMEM_ADDRESS_OFFSET: u32 = TMEM_EMPTY_OFFSET + ACCUMULATORS * MBARRIER_BYTES;
/// Where the epilogue's counting thread tells the others it was last (4 bytes).
const LAST_SPLIT_OFFSET: u32 = TMEM_ADDRESS_OFFSET + 4;
/// Total dynamic shared memory.
pub const SMEM_BYTES: u32 = LAST_SPLIT_OFFSET + 4;

const _: () = assert!(
    A_STAGE_BYTES.is_multiple_of(1024) && B_STAGE_BYTES.is_multiple_of(1024) && B_OFFSET.is_multiple_of(1024),
    "swizzled tiles start on 1024-byte boundaries (descriptor base offset 0)"
);
const _: () = assert!(FULL_OFFSET.is_multiple_of(8), "mbarriers are 8-byte aligned");
const _: () = assert!(SMEM_BYTES <= 227 * 1024, "fits the 227 KiB a Blackwell CTA may use");

/// The shared-memory regions of one CTA.
#[derive(Clone, Copy)]
struct Smem(SmemAddr);

impl Smem {
    fn a(self, stage: u32) -> SmemAddr {
        self.0.offset(A_OFFSET + stage * A_STAGE_BYTES)
    }
    fn b(self, stage: u32) -> SmemAddr {
        self.0.offset(B_OFFSET + stage * B_STAGE_BYTES)
    }
    fn sfa(self, stage: u32) -> SmemAddr {
        self.0.offset(SFA_OFFSET + stage * SF_STAGE_BYTES)
    }
    fn sfb(self, stage: u32) -> SmemAddr {
        self.0.offset(SFB_OFFSET + stage * SF_STAGE_BYTES)
    }
    /// Guards "stage holds A, B and scales the MMA may read".
    fn full(self, stage: u32) -> Mbarrier {
        Mbarrier(self.0.offset(FULL_OFFSET + stage * MBARRIER_BYTES))
    }
    /// Guards "every MMA reading the stage has completed; producers may overwrite it".
    fn empty(self, stage: u32) -> Mbarrier {
        Mbarrier(self.0.offset(EMPTY_OFFSET + stage * MBARRIER_BYTES))
    }
    /// Guards "accumulator holds a finished tile the epilogue may read".
    fn tmem_full(self, acc: u32) -> Mbarrier {
        Mbarrier(self.0.offset(TMEM_FULL_OFFSET + acc * MBARRIER_BYTES))
    }
    /// Guards "accumulator has been read; the MMA may overwrite it".
    fn tmem_empty(self, acc: u32) -> Mbarrier {
        Mbarrier(self.0.offset(TMEM_EMPTY_OFFSET + acc * MBARRIER_BYTES))
    }
    fn tmem_address(self) -> SmemAddr {
        self.0.offset(TMEM_ADDRESS_OFFSET)
    }
    fn last_split(self) -> SmemAddr {
        self.0.offset(LAST_SPLIT_OFFSET)
    }
}

// ---------------------------------------------------------------------------------------
// Work decomposition
// ---------------------------------------------------------------------------------------

/// The problem as this kernel walks it.
#[derive(Clone, Copy)]
struct Problem {
    args: GemmArgs,
    n_tiles: u32,
    m_tiles: u32,
    tiles: u32,
    /// CTAs that share one tile's K stages.
    splits: u32,
    /// Stages per tile (the last may be partial).
    k_stages: u32,
    /// K = 64 steps in all: MMAs per tile.
    k_steps: u32,
    /// Bytes per row of A and B.
    row_bytes: u32,
    /// Scale factors per row.
    sf_cols: u32,
}

/// One work unit: a tile (its batch, first row of A / B, index), and the K stages
/// [kb_begin, kb_end) this CTA multiplies of it (all of them unless K is split).
#[derive(Clone, Copy)]
struct Tile {
    l: u32,
    m0: u32,
    n0: u32,
    index: u32,
    split: u32,
    kb_begin: u32,
    kb_end: u32,
}

impl Problem {
    fn new(args: &GemmArgs) -> Problem {
        let n_tiles = args.n.div_ceil(BLOCK_N);
        let m_tiles = args.m.div_ceil(BLOCK_M);
        Problem {
            args: *args,
            n_tiles,
            m_tiles,
            tiles: n_tiles * m_tiles * args.l,
            splits: splits(args.m, args.n, args.k, args.l, args.sms),
            k_stages: args.k.div_ceil(BLOCK_K),
            // The last MMA step may be partial: its values past K are zero-filled.
            k_steps: args.k.div_ceil(MMA_K),
            row_bytes: args.k / 2,
            sf_cols: args.k / SF_VECTOR,
        }
    }

    /// This CTA's `local_tile`-th work unit, if it has one.
    fn tile(&self, local_tile: u32) -> Option<Tile> {
        let u = special::ctaid_x() + local_tile * special::nctaid_x();
        if u >= self.tiles * self.splits {
            return None;
        }
        let (split, index) = (u % self.splits, u / self.splits);
        let (n_tile, rest) = (index % self.n_tiles, index / self.n_tiles);
        let (m_tile, l) = (rest % self.m_tiles, rest / self.m_tiles);
        Some(Tile {
            l,
            m0: m_tile * BLOCK_M,
            n0: n_tile * BLOCK_N,
            index,
            split,
            kb_begin: split * self.k_stages / self.splits,
            kb_end: (split + 1) * self.k_stages / self.splits,
        })
    }

    /// The tile's split-K counter in the workspace.
    fn counter(&self, tile: &Tile) -> u64 {
        self.args.workspace + (tile.index * F32_BYTES) as u64
    }

    /// Row `row` (of the tile) of split `split`'s f32 partial in the workspace.
    fn partial_row(&self, tile: &Tile, split: u32, row: u32) -> u64 {
        let partial = (tile.index * self.splits + split) as u64 * PARTIAL_BYTES as u64;
        self.args.workspace + counter_bytes(self.tiles) + partial + (row * BLOCK_N * F32_BYTES) as u64
    }

    /// MMAs in stage `kb` of a tile (4, or fewer in a partial last stage).
    fn mmas_in_stage(&self, kb: u32) -> u32 {
        (self.k_steps - kb * MMAS_PER_STAGE).min(MMAS_PER_STAGE)
    }
}

/// CTAs of the persistent grid on a GPU with `sms` SMs: one per SM (each CTA's 168 KiB of
/// shared memory and 512 tensor-memory columns allow one per SM; a B200 has 148).
const fn persistent_ctas(sms: u32) -> u32 {
    if sms == 0 { 1 } else { sms }
}
/// At most this many CTAs share a tile's K stages...
const MAX_SPLITS: u32 = 4;
/// ...and each gets at least this many stages, so the fix-up stays small next to the MMAs.
const MIN_STAGES_PER_SPLIT: u32 = 4;
/// Bytes of one split's f32 partial tile.
const PARTIAL_BYTES: u32 = BLOCK_M * BLOCK_N * F32_BYTES;

const fn tiles(m: u32, n: u32, l: u32) -> u32 {
    n.div_ceil(BLOCK_N) * m.div_ceil(BLOCK_M) * l
}

/// CTAs per tile along K on `sms` SMs. Only when the tiles fill less than half the SMs:
/// then every tile gets `sms / tiles` splits (capped), all running in one wave.
/// Splitting 112 tiles in two would give 224 units, 1.5 waves on 148 SMs: no faster, and
/// the fix-up would add 2 x 32 KiB per tile of traffic.
pub const fn splits(m: u32, n: u32, k: u32, l: u32, sms: u32) -> u32 {
    let persistent = persistent_ctas(sms);
    let tiles = tiles(m, n, l);
    let by_stages = k.div_ceil(BLOCK_K) / MIN_STAGES_PER_SPLIT;
    if 2 * tiles > persistent || by_stages < 2 {
        return 1;
    }
    let by_sms = persistent / tiles;
    let s = if by_sms < by_stages { by_sms } else { by_stages };
    if s < MAX_SPLITS { s } else { MAX_SPLITS }
}

/// Bytes of the split-K counters (one u32 per tile), rounded up to keep partials aligned.
const fn counter_bytes(tiles: u32) -> u64 {
    ((tiles * F32_BYTES) as u64).div_ceil(256) * 256
}

/// Workspace the kernel needs for this shape: 0 unless K is split; then the counters
/// (which must be zero before the first launch; every launch leaves them zero) and one
/// f32 partial tile per split.
pub const fn workspace_bytes(m: u32, n: u32, k: u32, l: u32, sms: u32) -> u64 {
    let s = splits(m, n, k, l, sms);
    if s == 1 {
        return 0;
    }
    let t = tiles(m, n, l);
    counter_bytes(t) + t as u64 * s as u64 * PARTIAL_BYTES as u64
}

/// Launch geometry: one CTA per work unit, at most one per SM; a CTA with more
/// than one unit overlaps the epilogue of one with the MMAs of the next.
pub const fn launch(m: u32, n: u32, k: u32, l: u32, sms: u32) -> Launch {
    let (units, persistent) = (tiles(m, n, l) * splits(m, n, k, l, sms), persistent_ctas(sms));
    Launch {
        grid: [if units < persistent { units } else { persistent }, 1, 1],
        block: [THREADS, 1, 1],
        dynamic_smem: SMEM_BYTES,
    }
}

// ---------------------------------------------------------------------------------------
// Deliberate faults, for the emulator's own tests
// ---------------------------------------------------------------------------------------

/// A build of the kernel. Production code uses [`Correct`]; the emulator's tests define
/// variants that each reintroduce one of the classic tcgen05 bugs and check it is caught.
pub trait Variant {
    /// Sets bits 4-5 to 1 as the `kind::f16` descriptor's "D type = f32" does; in the
    /// block-scaled descriptor those bits are the B scale-factor ID, illegal for 4X.
    const F16_KIND_IDESC_BITS: bool = false;
    /// Skip the producers' `fence.proxy.async` before they signal `full`.
    const DROP_PROXY_FENCE: bool = false;
    /// Point every 64-row B tile at the first rows of its 128-row scale tile (forgetting
    /// the `(n0 % 128) / 32` column offset).
    const SFB_ROW_OFFSET_FORGOTTEN: bool = false;
}

/// The kernel as it ships.
#[derive(Debug)]
pub struct Correct;
impl Variant for Correct {}

// ---------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------

/// The kernel body, run by all 288 threads of every CTA.
#[inline(always)]
pub fn gemm<V: Variant>(args: &GemmArgs) {
    let smem = Smem(special::dynamic_smem());
    let problem = Problem::new(args);
    let tid = special::tid_x();
    // The shuffle makes the warp index visibly warp-uniform for the role branch.
    let warp = warp::shfl_sync_idx(tid / WARP, 0);
    let lane = tid % WARP;

    // 1. One thread sets up the barrier rings; the fence publishes the inits to the async
    //    proxy (tcgen05.commit arrives through it). The MMA warp allocates tensor memory;
    //    the address lands in shared memory.
    if tid == 0 {
        for s in 0..STAGES {
            smem.full(s).init(PRODUCER_THREADS);
            smem.empty(s).init(1);
        }
        for a in 0..ACCUMULATORS {
            smem.tmem_full(a).init(1);
            smem.tmem_empty(a).init(EPILOGUE_THREADS);
        }
        fence::mbarrier_init();
    }
    if warp == MMA_WARP {
        tcgen05::alloc(smem.tmem_address(), TMEM_COLUMNS);
        tcgen05::relinquish_alloc_permit();
    }
    // 2. Everyone sees the barriers and the tensor-memory address: the tcgen05 fences
    //    order the allocation around the CTA barrier.
    tcgen05::fence_before_thread_sync();
    barrier::sync(BARRIER_CTA, THREADS);
    tcgen05::fence_after_thread_sync();
    let tmem = TmemAddr(memory::ld_shared_b32(smem.tmem_address()));

    // 3. Roles.
    if warp < PRODUCER_WARPS {
        producer::<V>(smem, &problem, tid);
    } else if warp == MMA_WARP {
        mma::<V>(smem, &problem, tmem, lane);
    } else {
        epilogue(smem, &problem, tmem, warp, lane);
    }

    // 4. Teardown: every tensor-memory read and write is done once all threads pass the
    //    barrier (the epilogue waited for the last commit); the allocating warp frees.
    tcgen05::fence_before_thread_sync();
    barrier::sync(BARRIER_CTA, THREADS);
    if warp == MMA_WARP {
        tcgen05::fence_after_thread_sync();
        tcgen05::dealloc(tmem, TMEM_COLUMNS);
    }
}

/// Global addresses of one operand of one tile.
#[derive(Clone, Copy)]
struct Operand {
    /// First byte of the tile's first row.
    rows: u64,
    /// Rows of the matrix left from the tile's first row (rows past the edge read zeros).
    rows_left: u32,
    /// The first scale tile of the 128-row block holding the tile.
    scales: u64,
}

impl Operand {
    fn new(p: &Problem, base: u64, sf_base: u64, rows: u32, l: u32, row0: u32) -> Operand {
        let sf_batch = sf_base + l as u64 * layout::batch_bytes(rows, p.sf_cols);
        Operand {
            rows: base + (l as u64 * rows as u64 + row0 as u64) * p.row_bytes as u64,
            rows_left: rows - row0,
            scales: sf_batch + layout::tile_offset(row0 / TILE_ROWS, 0, p.sf_cols),
        }
    }

    /// Issues this thread's share of the copies of stage `kb`: rows `first_row`,
    /// `first_row + step`, ... below `tile_rows`, chunk `chunk` of each, 128B-swizzled into
    /// `dst`; past the matrix edge or past K the chunk is zero-filled.
    #[allow(clippy::too_many_arguments)]
    fn stage_rows(self, p: &Problem, kb: u32, dst: SmemAddr, tile_rows: u32, first_row: u32, step: u32, chunk: u32) {
        let byte_in_row = kb * ROW_BYTES + chunk * CHUNK;
        let mut r = first_row;
        while r < tile_rows {
            let row_bytes = if r < self.rows_left { p.row_bytes } else { 0 };
            // Logical chunk `chunk` of row r, XOR-swizzled on the absolute address (the
            // XOR moves whole 16-byte chunks, so a chunk's halves stay together).
            let addr = Swizzle::B128.apply(dst.offset(r * ROW_BYTES + chunk * CHUNK).0);
            rows::copy_chunk(
                SmemAddr(addr),
                self.rows + r as u64 * p.row_bytes as u64,
                byte_in_row,
                row_bytes,
                rows::L2Prefetch::Sector,
            );
            r += step;
        }
    }

    /// Issues this thread's 16 bytes of the stage's scale tiles (thread t copies bytes
    /// 16t..16t+16 of the 2 KiB the four tiles take, contiguous in global memory).
    fn stage_scales(self, p: &Problem, kb: u32, dst: SmemAddr, thread: u32) {
        let tile = thread * CHUNK / TILE_BYTES;
        if kb * SCALE_TILES_PER_STAGE + tile < p.k_steps {
            let tiles_before = (kb * SCALE_TILES_PER_STAGE) as u64 * TILE_BYTES as u64;
            cp_async::cg_16(dst.offset(thread * CHUNK), self.scales + tiles_before + (thread * CHUNK) as u64, CHUNK);
        }
    }
}

/// Warps 0-3: stage every (tile, K stage) of this CTA into the ring with cp.async, and
/// publish each stage `PUBLISH_LAG` stages later, once its copies have landed.
#[inline(always)]
fn producer<V: Variant>(smem: Smem, p: &Problem, thread: u32) {
    // Thread t copies chunk t % 8 of rows t / 8, t / 8 + 16, ...: 8 neighbouring threads
    // read one 128-byte row segment.
    let (chunk, first_row, row_step) =
        (thread % CHUNKS_PER_ROW, thread / CHUNKS_PER_ROW, PRODUCER_THREADS / CHUNKS_PER_ROW);
    let mut issue = RingPos::start(STAGES);
    let mut publish = RingPos::start(STAGES);
    let mut unpublished = 0;
    let mut local_tile = 0;
    while let Some(tile) = p.tile(local_tile) {
        let a = Operand::new(p, p.args.a, p.args.sfa, p.args.m, tile.l, tile.m0);
        let b = Operand::new(p, p.args.b, p.args.sfb, p.args.n, tile.l, tile.n0);
        for kb in tile.kb_begin..tile.kb_end {
            // The MMAs that read this slot on the previous lap must be complete (first
            // lap: the "previous phase" of a fresh barrier counts as complete).
            let s = issue.slot;
            smem.empty(s).wait(issue.phase ^ 1);
            a.stage_rows(p, kb, smem.a(s), BLOCK_M, first_row, row_step, chunk);
            b.stage_rows(p, kb, smem.b(s), BLOCK_N, first_row, row_step, chunk);
            a.stage_scales(p, kb, smem.sfa(s), thread);
            b.stage_scales(p, kb, smem.sfb(s), thread);
            cp_async::commit_group();
            issue.advance();
            unpublished += 1;
            if unpublished > PUBLISH_LAG {
                cp_async::wait_group::<PUBLISH_LAG>();
                publish_stage::<V>(smem, &mut publish);
                unpublished -= 1;
            }
        }
        local_tile += 1;
    }
    cp_async::wait_group::<0>();
    while unpublished > 0 {
        publish_stage::<V>(smem, &mut publish);
        unpublished -= 1;
    }
}

/// Hands the oldest stage whose copies have landed to the MMA warp.
#[inline(always)]
fn publish_stage<V: Variant>(smem: Smem, publish: &mut RingPos) {
    // cp.async wrote through the generic proxy; the tensor core reads through the async
    // proxy: fence in the writer, before the arrival that hands the stage over.
    if !V::DROP_PROXY_FENCE {
        fence::proxy_async_shared_cta();
    }
    smem.full(publish.slot).arrive();
    publish.advance();
}

/// Warp 4: lane 0 drives the tensor core; the whole warp follows the barriers so it
/// reaches the teardown converged.
#[inline(always)]
fn mma<V: Variant>(smem: Smem, p: &Problem, tmem: TmemAddr, lane: u32) {
    let idesc = if V::F16_KIND_IDESC_BITS { InstrDesc(IDESC.0 | 1 << 4) } else { IDESC };
    let issuer = lane == 0;
    let mut stage = RingPos::start(STAGES);
    let mut acc = RingPos::start(ACCUMULATORS);
    let mut local_tile = 0;
    while let Some(tile) = p.tile(local_tile) {
        // The epilogue must have drained this accumulator (first lap: passes at once).
        smem.tmem_empty(acc.slot).wait(acc.phase ^ 1);
        tcgen05::fence_after_thread_sync();
        let d = tmem.column(ACC_COLUMN + acc.slot * BLOCK_N);
        // A 64-row B tile uses rows (n0 % 128).. of its 128-row scale tile.
        let sfb_quarter = if V::SFB_ROW_OFFSET_FORGOTTEN { 0 } else { (tile.n0 % TILE_ROWS) / WARP };
        for kb in tile.kb_begin..tile.kb_end {
            let s = stage.slot;
            smem.full(s).wait(stage.phase);
            tcgen05::fence_after_thread_sync();
            if issuer {
                // K-major, 128B swizzle, 8-row groups 1024 bytes apart.
                let a_desc = SmemDesc::new(smem.a(s).0, LBO_UNUSED, SWIZZLE_ATOM_BYTES, Swizzle::B128);
                let b_desc = SmemDesc::new(smem.b(s).0, LBO_UNUSED, SWIZZLE_ATOM_BYTES, Swizzle::B128);
                for j in 0..p.mmas_in_stage(kb) {
                    // This MMA's scale columns: per stage and per MMA, never shared with
                    // an MMA that may still be in flight.
                    let sf_column = (s * SCALE_TILES_PER_STAGE + j) * SCALE_TILE_COLUMNS;
                    let sfa = tmem.column(SFA_COLUMN + sf_column);
                    let sfb = tmem.column(SFB_COLUMN + sf_column);
                    tcgen05::cp_32x128b_warpx4(sfa, SmemDesc::scale_tile(smem.sfa(s).offset(j * TILE_BYTES).0));
                    tcgen05::cp_32x128b_warpx4(sfb, SmemDesc::scale_tile(smem.sfb(s).offset(j * TILE_BYTES).0));
                    // MMA j reads bytes 32j..32j+32 of every 128-byte swizzle row.
                    tcgen05::mma_mxf4nvf4_block_scale_4x(
                        d,
                        a_desc.advance(j * MMA_K_BYTES),
                        b_desc.advance(j * MMA_K_BYTES),
                        idesc,
                        sfa,
                        sfb.column(sfb_quarter),
                        kb > tile.kb_begin || j > 0,
                    );
                }
                // The stage may be refilled once these MMAs have read it.
                tcgen05::commit(smem.empty(s));
            }
            stage.advance();
        }
        if issuer {
            // The tile's last MMA done means the accumulator is final.
            tcgen05::commit(smem.tmem_full(acc.slot));
        }
        acc.advance();
        local_tile += 1;
    }
}

/// Warps 5-8: tensor memory → registers → alpha, bias, fp16 or bf16 → C.
#[inline(always)]
fn epilogue(smem: Smem, p: &Problem, tmem: TmemAddr, warp: u32, lane: u32) {
    // Warp w may only read lanes 32·(w%4)..: its quarter of the tile's rows.
    let quarter = warp % 4;
    let (m_count, n_count) = (p.args.m, p.args.n);
    let out = Epilogue::load(&p.args);
    let mut acc = RingPos::start(ACCUMULATORS);
    let mut local_tile = 0;
    while let Some(tile) = p.tile(local_tile) {
        smem.tmem_full(acc.slot).wait(acc.phase);
        tcgen05::fence_after_thread_sync();
        let tile_row = quarter * WARP + lane;
        let row = tile.m0 + tile_row;
        let c_row = p.args.c + ((tile.l as u64 * m_count as u64 + row as u64) * n_count as u64) * OUT_BYTES as u64;
        for part in 0..BLOCK_N / WARP {
            let mut v = [0u32; 32];
            let columns = tmem.lane(quarter * WARP).column(ACC_COLUMN + acc.slot * BLOCK_N + part * WARP);
            tcgen05::ld_32x32b_x32(columns, &mut v);
            tcgen05::wait_ld(&mut v);
            if p.splits > 1 {
                let partial = p.partial_row(&tile, tile.split, tile_row) + (part * WARP * F32_BYTES) as u64;
                store_partial(partial, &v);
            } else if row < m_count {
                store_row_part(&out, c_row, tile.n0 + part * WARP, n_count, &v);
            }
        }
        // Every load of this accumulator has completed: hand it back to the MMA warp.
        tcgen05::fence_before_thread_sync();
        smem.tmem_empty(acc.slot).arrive();
        if p.splits > 1 {
            fix_up(smem, p, &out, &tile, tile_row, c_row, lane + WARP * (warp - FIRST_EPILOGUE_WARP));
        }
        acc.advance();
        local_tile += 1;
    }
}

/// Stores 32 f32 values (bits) of one partial row, 16 bytes at a time.
#[inline(always)]
#[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` literals: see `store_row_part`
fn store_partial(addr: u64, v: &[u32; 32]) {
    seq_macro::seq!(Q in 0..8 {
        memory::st_global_v4_b32(addr + (Q * 16) as u64, [v[4 * Q], v[4 * Q + 1], v[4 * Q + 2], v[4 * Q + 3]]);
    });
}

/// The split-K fix-up of one tile, by the 128 epilogue threads (`thread` 0..128): count this
/// CTA's partial in; if it was the last, sum all partials in split order and write C.
#[inline(always)]
fn fix_up(smem: Smem, p: &Problem, out: &Epilogue, tile: &Tile, tile_row: u32, c_row: u64, thread: u32) {
    // This thread's partial stores happen before the count, for every thread of the GPU.
    fence::acq_rel_gpu();
    barrier::sync(BARRIER_EPILOGUE, EPILOGUE_THREADS);
    if thread == 0 {
        let arrived = memory::atom_add_acq_rel_gpu_u32(p.counter(tile), 1);
        memory::st_shared_b32(smem.last_split(), (arrived == p.splits - 1) as u32);
    }
    barrier::sync(BARRIER_EPILOGUE, EPILOGUE_THREADS);
    if memory::ld_shared_b32(smem.last_split()) == 0 {
        return;
    }
    // Last: every other split's partial is complete and visible from here on.
    fence::acq_rel_gpu();
    let row = tile.m0 + tile_row;
    for part in 0..BLOCK_N / WARP {
        let mut sum = [0f32; 32];
        for split in 0..p.splits {
            let partial = p.partial_row(tile, split, tile_row) + (part * WARP * F32_BYTES) as u64;
            add_partial(&mut sum, partial);
        }
        if row < p.args.m {
            store_row_part(out, c_row, tile.n0 + part * WARP, p.args.n, &sum.map(f32::to_bits));
        }
    }
    if thread == 0 {
        // The next launch counts from zero again.
        memory::st_global_b32(p.counter(tile), 0);
    }
}

/// `sum += ` 32 f32 values of one partial row, read 16 bytes at a time through L2.
#[inline(always)]
#[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` literals: see `store_row_part`
fn add_partial(sum: &mut [f32; 32], addr: u64) {
    seq_macro::seq!(Q in 0..8 {
        let w = memory::ld_global_cg_v4_b32(addr + (Q * 16) as u64);
        for (i, bits) in w.iter().enumerate() {
            sum[4 * Q + i] += f32::from_bits(*bits);
        }
    });
}

/// Stores 32 f32 values (bits) of one row through the epilogue at columns `col0..col0 +
/// 32` of the row starting at `c_row`, masking columns past `n_count`. Unrolled at compile
/// time so every register index is a constant and `v` stays in registers.
#[inline(always)]
// `seq!` expands Q to the literals 0..4, so `8 * Q` reads `8 * 0`, ...: clippy's
// identity/erasing-op lints fire on the expansion, not on anything to simplify.
#[allow(clippy::identity_op, clippy::erasing_op)]
fn store_row_part(out: &Epilogue, c_row: u64, col0: u32, n_count: u32, v: &[u32; 32]) {
    let f = |i: usize| f32::from_bits(v[i]);
    // 16-byte stores need every row to start 16-byte aligned: N a multiple of 8.
    let vector = n_count.is_multiple_of(8);
    seq_macro::seq!(Q in 0..4 {{
        const E: usize = 8 * Q;
        let col = col0 + E as u32;
        let addr = c_row + col as u64 * OUT_BYTES as u64;
        if vector && col + 8 <= n_count {
            // Each word holds columns col + 2i (low half) and col + 2i + 1 (high half).
            memory::st_global_v4_b32(
                addr,
                [
                    out.pair(f(E), f(E + 1), col),
                    out.pair(f(E + 2), f(E + 3), col + 2),
                    out.pair(f(E + 4), f(E + 5), col + 4),
                    out.pair(f(E + 6), f(E + 7), col + 6),
                ],
            );
        } else {
            seq_macro::seq!(I in 0..8 {
                if col + I < n_count {
                    memory::st_global_b16(addr + (I * OUT_BYTES) as u64, out.one(f(E + I), col + I));
                }
            });
        }
    }});
}

// The GPU entry point: `.entry nvfp4_gemm_sm100`.
gemm_entry_point!(nvfp4_gemm_sm100 => gemm::<Correct>);
