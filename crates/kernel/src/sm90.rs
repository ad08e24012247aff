//! `sm90` v1: NVFP4 GEMM on Hopper tensor cores, correctness first.
//!
//! **Math.** C[m, n] = fp16( Σ_k a[m, k]·sfa[m, k/16] · b[n, k]·sfb[n, k/16] ). Hopper
//! has no FP4 tensor-core instruction, so each operand is dequantized exactly to fp16
//! with its scale folded in (a·sf has at most 6 significant bits and lies in
//! [2^-10, 2688]: exact in fp16), then `wgmma` multiplies fp16 tiles with fp32
//! accumulation. Products are exact, so with the benchmark's inputs every partial sum is
//! exact too and the result is bit-identical to the exact reference.
//!
//! **Tile.** A CTA computes a 128 (M) x 128 (N) tile of C, walking K in 64-value steps
//! (one 128-byte swizzle row of fp16, one 512-byte blocked scale tile per 128 rows).
//! Tiles are numbered N-fastest over (n, m, batch); CTA x takes tiles x, x + gridDim.x, ...
//!
//! **Warp roles** (384 threads = 3 warpgroups):
//! - warpgroup 0, the *dequantizer*: thread r owns row r of the A tile and row r of the
//!   B tile. It stages its raw bytes (32 B of e2m1 values + 4 scale bytes per operand)
//!   into shared memory with `cp.async`, `RAW_AHEAD` k-steps ahead; then converts them
//!   to fp16 (e2m1 → e4m3 bit trick → `cvt.rn.f16x2.e4m3x2` → × scale·64 in fp16) and
//!   stores them 128B-swizzled into the fp16 stage ring.
//! - warpgroups 1 and 2, the *MMA consumers*: warpgroup 1 + w multiplies rows
//!   64w..64w+63 of the A tile by the whole B tile: four `wgmma m64n128k16` per stage,
//!   64 fp32 accumulators per thread, then the fp16 epilogue straight to global memory.
//!
//! **Pipeline.** Two rings:
//! - the raw ring (`RAW_STAGES` slots) is private to each dequantizer thread: it issues
//!   one `cp.async` group per k-step and `cp.async.wait_group` orders its own reads, so no
//!   barrier is needed;
//! - the fp16 ring (`STAGES` slots) is guarded by two mbarrier rings: `full[s]` (128
//!   arrivals: every dequantizer thread, after `fence.proxy.async` made its generic
//!   stores visible to the tensor cores' async proxy) and `empty[s]` (256 arrivals: every
//!   consumer thread, after `wgmma.wait_group` proved its wgmmas stopped reading).
//!
//! **Constraints.** Any M and N (tails zero-filled on load and masked on store), K a
//! multiple of 16 (the last k-step's values past K zero-filled, see `rows.rs`), any L.
//! Needs sm_90a (wgmma).
//!
//! **Versus naive.** Tensor cores instead of CUDA cores; shared-memory staging; the
//! dequantization is done once per tile row instead of once per output.

use nvfp4::layout::{self, TILE_BYTES};
use nvfp4::shape::{K_GRANULE, SF_VECTOR};
use nvfp4::sm90::SmemDesc;
use nvfp4::swizzle::Swizzle;

use crate::epilogue::{Epilogue, OUT_BYTES};
use crate::ptx::mbarrier::{MBARRIER_BYTES, Mbarrier};
use crate::ptx::{SmemAddr, barrier, cp_async, cvt, fence, memory, special, warp, wgmma};
use crate::ring::RingPos;
use crate::rows::{self, CHUNK};
use crate::{GemmArgs, Launch};

// ---------------------------------------------------------------------------------------
// Tile and pipeline constants
// ---------------------------------------------------------------------------------------

/// Rows of A (and of C) per CTA tile: two consumer warpgroups of `WGMMA_M` rows.
pub const BLOCK_M: u32 = 128;
/// Rows of B (columns of C) per CTA tile: the wgmma N.
pub const BLOCK_N: u32 = 128;
/// K values per pipeline stage.
pub const BLOCK_K: u32 = K_GRANULE;
/// fp16 stages in flight between the dequantizer and the consumers.
pub const STAGES: u32 = 4;
/// k-steps the dequantizer's `cp.async` runs ahead of its conversion.
pub const RAW_AHEAD: u32 = 2;
/// Raw slots: one more than the look-ahead, so the slot being refilled is never the slot
/// being read.
pub const RAW_STAGES: u32 = RAW_AHEAD + 1;

/// Threads per warpgroup.
const WARPGROUP: u32 = 128;
/// Warpgroup 0 dequantizes, 1 and 2 multiply.
const CONSUMERS: u32 = 2;
pub const THREADS: u32 = WARPGROUP * (1 + CONSUMERS);
/// Rows per wgmma.
const WGMMA_M: u32 = 64;
/// K per wgmma for 16-bit inputs.
const WGMMA_K: u32 = 16;
/// fp16 bytes.
const F16_BYTES: u32 = 2;
/// Bytes of one fp16 tile row per stage: exactly one 128-byte swizzle atom row.
const ROW_F16_BYTES: u32 = BLOCK_K * F16_BYTES;
/// Bytes of one raw (packed e2m1) tile row per stage.
const ROW_RAW_BYTES: u32 = BLOCK_K / 2;
/// Scale factors per row per stage (one per 16 values).
const ROW_SCALES: u32 = BLOCK_K / SF_VECTOR;
/// The swizzle atom: 8 rows x 128 B; its stride is the descriptors' SBO.
const SWIZZLE_ATOM_BYTES: u32 = 8 * ROW_F16_BYTES;
/// The leading byte offset: unused by a swizzled K-major operand one atom wide in K
/// (CUTLASS documents it as "assumed 1", i.e. 16 bytes).
const LBO_UNUSED: u32 = 16;
/// Named barrier for the whole CTA.
const BARRIER_CTA: u32 = 0;

const _: () = assert!(BLOCK_M == WGMMA_M * CONSUMERS);
const _: () = assert!(BLOCK_M == WARPGROUP && BLOCK_N == WARPGROUP, "dequantizer thread r owns row r of both tiles");
const _: () = assert!(ROW_F16_BYTES == 128, "one stage row is one 128B-swizzle row");
const _: () =
    assert!(BLOCK_K.is_multiple_of(layout::TILE_COLS * SF_VECTOR), "a stage covers whole blocked scale tiles");
const _: () = assert!(ROW_SCALES == layout::TILE_COLS, "a stage reads exactly one blocked scale tile per 128 rows");
const _: () = assert!(BLOCK_M == layout::TILE_ROWS);
const _: () = assert!(ACCUMULATORS == 64, "the epilogue below is unrolled for 32 register pairs");

// ---------------------------------------------------------------------------------------
// Shared memory map (offsets from DYN_SMEM, which is 1024-byte aligned)
// ---------------------------------------------------------------------------------------

/// fp16 A tiles: [STAGES][BLOCK_M rows][64 fp16], 128B-swizzled.
const A16_OFFSET: u32 = 0;
const A16_STAGE_BYTES: u32 = BLOCK_M * ROW_F16_BYTES;
/// fp16 B tiles: [STAGES][BLOCK_N rows][64 fp16], 128B-swizzled.
const B16_OFFSET: u32 = A16_OFFSET + STAGES * A16_STAGE_BYTES;
const B16_STAGE_BYTES: u32 = BLOCK_N * ROW_F16_BYTES;
/// Raw A: [RAW_STAGES][BLOCK_M rows][32 B of packed e2m1].
const RAW_A_OFFSET: u32 = B16_OFFSET + STAGES * B16_STAGE_BYTES;
const RAW_A_SLOT_BYTES: u32 = BLOCK_M * ROW_RAW_BYTES;
/// Raw B: [RAW_STAGES][BLOCK_N rows][32 B].
const RAW_B_OFFSET: u32 = RAW_A_OFFSET + RAW_STAGES * RAW_A_SLOT_BYTES;
const RAW_B_SLOT_BYTES: u32 = BLOCK_N * ROW_RAW_BYTES;
/// Raw SFA / SFB: [RAW_STAGES][512 B], each one blocked scale tile (128 rows x 4 scales,
/// row r's 4 bytes at (r%32)*16 + (r/32)*4).
const RAW_SFA_OFFSET: u32 = RAW_B_OFFSET + RAW_STAGES * RAW_B_SLOT_BYTES;
const RAW_SFB_OFFSET: u32 = RAW_SFA_OFFSET + RAW_STAGES * TILE_BYTES;
/// mbarriers: full[STAGES], then empty[STAGES].
const FULL_OFFSET: u32 = RAW_SFB_OFFSET + RAW_STAGES * TILE_BYTES;
const EMPTY_OFFSET: u32 = FULL_OFFSET + STAGES * MBARRIER_BYTES;
/// Total dynamic shared memory.
pub const SMEM_BYTES: u32 = EMPTY_OFFSET + STAGES * MBARRIER_BYTES;

const _: () = assert!(
    A16_STAGE_BYTES.is_multiple_of(1024) && B16_OFFSET.is_multiple_of(1024),
    "swizzled tiles start on 1024-byte boundaries"
);
const _: () = assert!(FULL_OFFSET.is_multiple_of(8), "mbarriers are 8-byte aligned");
const _: () = assert!(SMEM_BYTES <= 227 * 1024, "fits the 227 KiB a Hopper CTA may use");

/// Arrivals that fill an fp16 stage: every dequantizer thread.
const FULL_ARRIVALS: u32 = WARPGROUP;
/// Arrivals that empty it: every consumer thread.
const EMPTY_ARRIVALS: u32 = WARPGROUP * CONSUMERS;

/// The shared-memory regions of one CTA.
#[derive(Clone, Copy)]
struct Smem(SmemAddr);

impl Smem {
    fn a16(self, stage: u32) -> SmemAddr {
        self.0.offset(A16_OFFSET + stage * A16_STAGE_BYTES)
    }
    fn b16(self, stage: u32) -> SmemAddr {
        self.0.offset(B16_OFFSET + stage * B16_STAGE_BYTES)
    }
    fn raw_a(self, slot: u32) -> SmemAddr {
        self.0.offset(RAW_A_OFFSET + slot * RAW_A_SLOT_BYTES)
    }
    fn raw_b(self, slot: u32) -> SmemAddr {
        self.0.offset(RAW_B_OFFSET + slot * RAW_B_SLOT_BYTES)
    }
    fn raw_sfa(self, slot: u32) -> SmemAddr {
        self.0.offset(RAW_SFA_OFFSET + slot * TILE_BYTES)
    }
    fn raw_sfb(self, slot: u32) -> SmemAddr {
        self.0.offset(RAW_SFB_OFFSET + slot * TILE_BYTES)
    }
    /// Guards "fp16 stage holds data the consumers may read".
    fn full(self, stage: u32) -> Mbarrier {
        Mbarrier(self.0.offset(FULL_OFFSET + stage * MBARRIER_BYTES))
    }
    /// Guards "fp16 stage has been read; the dequantizer may overwrite it".
    fn empty(self, stage: u32) -> Mbarrier {
        Mbarrier(self.0.offset(EMPTY_OFFSET + stage * MBARRIER_BYTES))
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
    k_steps: u32,
    /// Bytes per row of A and B.
    row_bytes: u64,
    /// Scale factors per row.
    sf_cols: u32,
}

/// One CTA tile: its batch and first row of A / B.
#[derive(Clone, Copy)]
struct Tile {
    l: u32,
    m0: u32,
    n0: u32,
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
            // The last step may be partial: its values past K are zero-filled.
            k_steps: args.k.div_ceil(BLOCK_K),
            row_bytes: (args.k / 2) as u64,
            sf_cols: args.k / SF_VECTOR,
        }
    }

    /// The tile of this CTA's `i`-th work unit, if it has one.
    fn tile(&self, local_tile: u32) -> Option<Tile> {
        let t = special::ctaid_x() + local_tile * special::nctaid_x();
        if t >= self.tiles {
            return None;
        }
        let (n_tile, rest) = (t % self.n_tiles, t / self.n_tiles);
        let (m_tile, l) = (rest % self.m_tiles, rest / self.m_tiles);
        Some(Tile { l, m0: m_tile * BLOCK_M, n0: n_tile * BLOCK_N })
    }
}

/// Launch geometry: one CTA per tile (the loops also handle fewer CTAs than tiles).
pub const fn launch(m: u32, n: u32, l: u32) -> Launch {
    Launch {
        grid: [n.div_ceil(BLOCK_N) * m.div_ceil(BLOCK_M) * l, 1, 1],
        block: [THREADS, 1, 1],
        dynamic_smem: SMEM_BYTES,
    }
}

// ---------------------------------------------------------------------------------------
// Deliberate faults, for the emulator's own tests
// ---------------------------------------------------------------------------------------

/// A build of the kernel. Production code uses [`Correct`]; the emulator's tests define
/// variants that each reintroduce one classic bug and check that it is caught.
pub trait Variant {
    /// Skip the `wgmma.wait_group` before releasing a stage.
    const DROP_WGMMA_WAIT: bool = false;
    /// Skip the dequantizer's `fence.proxy.async` before it signals `full`.
    const DROP_PROXY_FENCE: bool = false;
    /// Bytes added to the start address of every A descriptor.
    const A_DESCRIPTOR_SHIFT: u32 = 0;
}

/// The kernel as it ships.
#[derive(Debug)]
pub struct Correct;
impl Variant for Correct {}

// ---------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------

/// The kernel body, run by all 384 threads of every CTA.
#[inline(always)]
pub fn gemm<V: Variant>(args: &GemmArgs) {
    let smem = Smem(special::dynamic_smem());
    let problem = Problem::new(args);
    let tid = special::tid_x();

    // 1. One thread sets up the barrier rings; the fence publishes the inits to the
    //    async proxy, the CTA barrier to every thread.
    if tid == 0 {
        for s in 0..STAGES {
            smem.full(s).init(FULL_ARRIVALS);
            smem.empty(s).init(EMPTY_ARRIVALS);
        }
        fence::mbarrier_init();
    }
    barrier::sync(BARRIER_CTA, THREADS);

    // 2. Role dispatch by warpgroup. The shuffle makes the index visibly warp-uniform, so
    //    ptxas knows no warp diverges around the wgmmas (otherwise it serializes them).
    let warpgroup = warp::shfl_sync_idx(tid / WARPGROUP, 0);
    let thread = tid % WARPGROUP;
    if warpgroup == 0 {
        dequantizer::<V>(smem, &problem, thread);
    } else {
        consumer::<V>(smem, &problem, warpgroup - 1, thread);
    }
}

/// Global addresses of one dequantizer thread's row, for one operand.
#[derive(Clone, Copy)]
struct RowSource {
    /// First byte of the row's packed values.
    values: u64,
    /// Bytes of the row: K/2, or 0 past the matrix edge (the copies then write zeros).
    bytes: u32,
    /// This row's 4 scale bytes inside the first blocked tile of its 128-row block.
    scales: u64,
}

impl RowSource {
    fn new(p: &Problem, base: u64, sf_base: u64, rows: u32, l: u32, row: u32) -> RowSource {
        let sf_batch = sf_base + l as u64 * layout::batch_bytes(rows, p.sf_cols);
        RowSource {
            values: base + (l as u64 * rows as u64 + row as u64) * p.row_bytes,
            bytes: if row < rows { p.row_bytes as u32 } else { 0 },
            scales: sf_batch + layout::offset(row, 0, p.sf_cols),
        }
    }

    /// Issues the copies of k-step `kb` of this row into raw slot rows `raw` / `raw_sf`;
    /// past the matrix edge or past K they write zeros.
    fn stage(self, kb: u32, raw: SmemAddr, raw_sf: SmemAddr, sf_cols: u32) {
        for c in 0..ROW_RAW_BYTES / CHUNK {
            let offset = c * CHUNK;
            rows::copy_chunk(
                raw.offset(offset),
                self.values,
                kb * ROW_RAW_BYTES + offset,
                self.bytes,
                rows::L2Prefetch::Sector,
            );
        }
        // The blocked layout puts k-step kb's tile of this row block `kb` tiles further on.
        let tile_step = layout::tile_offset(0, kb, sf_cols) - layout::tile_offset(0, 0, sf_cols);
        cp_async::ca_4(raw_sf, self.scales + tile_step, ROW_SCALES);
    }
}

/// Warpgroup 0: stage raw rows with cp.async, convert to fp16, fill the fp16 ring.
fn dequantizer<V: Variant>(smem: Smem, p: &Problem, row: u32) {
    // Where this thread's 4 scale bytes sit in a blocked tile, and its fp16 row offset.
    let sf_in_tile = layout::offset(row, 0, layout::TILE_COLS) as u32;
    let raw_row = row * ROW_RAW_BYTES;

    // Work units are (tile, k-step) pairs, in order; `unit` counts them for this CTA.
    let units = |u: u32| -> Option<(Tile, u32)> { p.tile(u / p.k_steps).map(|t| (t, u % p.k_steps)) };
    let issue = |u: u32| {
        if let Some((tile, kb)) = units(u) {
            let slot = u % RAW_STAGES;
            let a = RowSource::new(p, p.args.a, p.args.sfa, p.args.m, tile.l, tile.m0 + row);
            let b = RowSource::new(p, p.args.b, p.args.sfb, p.args.n, tile.l, tile.n0 + row);
            a.stage(kb, smem.raw_a(slot).offset(raw_row), smem.raw_sfa(slot).offset(sf_in_tile), p.sf_cols);
            b.stage(kb, smem.raw_b(slot).offset(raw_row), smem.raw_sfb(slot).offset(sf_in_tile), p.sf_cols);
        }
        // One group per unit, empty or not, so `wait_group::<RAW_AHEAD>` always means
        // "unit u has landed".
        cp_async::commit_group();
    };

    for u in 0..RAW_AHEAD {
        issue(u);
    }
    let mut ring = RingPos::start(STAGES);
    let mut u = 0;
    while units(u).is_some() {
        issue(u + RAW_AHEAD);
        cp_async::wait_group::<RAW_AHEAD>();
        let slot = u % RAW_STAGES;

        // The consumers must be done with this fp16 stage (first lap: passes at once,
        // the "previous phase" of a fresh barrier counts as complete).
        smem.empty(ring.slot).wait(ring.phase ^ 1);

        let a_scales = memory::ld_shared_b32(smem.raw_sfa(slot).offset(sf_in_tile));
        let b_scales = memory::ld_shared_b32(smem.raw_sfb(slot).offset(sf_in_tile));
        convert_row(smem.raw_a(slot).offset(raw_row), a_scales, smem.a16(ring.slot), row);
        convert_row(smem.raw_b(slot).offset(raw_row), b_scales, smem.b16(ring.slot), row);

        // Generic-proxy stores → the wgmma's async-proxy reads: fence in the writer,
        // before the arrival that hands the stage over.
        if !V::DROP_PROXY_FENCE {
            fence::proxy_async_shared_cta();
        }
        smem.full(ring.slot).arrive();
        ring.advance();
        u += 1;
    }
}

/// fp16 1.0 in both halves of a pair, times 64: the scale correction of the e4m3 trick.
const F16X2_SIXTY_FOUR: u32 = 0x5400_5400;

/// Converts one raw row (32 bytes: 64 e2m1 values, 4 scale bytes) into one 128-byte
/// fp16 row of a 128B-swizzled tile.
///
/// Per 32-bit word (8 values k0..k7, value i in bits 4i..4i+3): moving each e2m1 code's
/// sign to bit 7 and its magnitude bits (e1 e0 m) to bits 4..2 of a byte makes a valid
/// e4m3 byte worth value·2^-6 (the exponent biases differ by 6; the e2m1 subnormal 0.5
/// lands on the e4m3 subnormal with the same factor). `cvt.rn.f16x2.e4m3x2` turns two
/// such bytes into two fp16; multiplying by fp16(scale·64) (≤ 28672, exact) gives the
/// exact a·scale. The word yields pairs (k0,k2), (k4,k6), (k1,k3), (k5,k7): a K order
/// permuted inside each 16-byte chunk, identical for A and B, so every dot product is
/// unchanged.
#[inline(always)]
fn convert_row(raw: SmemAddr, scales: u32, tile: SmemAddr, row: u32) {
    let row_addr = tile.offset(row * ROW_F16_BYTES);
    for half in 0..ROW_RAW_BYTES / CHUNK {
        let words = memory::ld_shared_v4_b32(raw.offset(half * CHUNK));
        for (i, &q) in words.iter().enumerate() {
            let chunk = half * 4 + i as u32; // 8 values: k = 8*chunk .. 8*chunk + 7
            let scale_byte = (scales >> (8 * (chunk * 8 / SF_VECTOR))) & 0xFF;
            let scale = cvt::mul_f16x2(cvt::f16x2_from_e4m3x2((scale_byte | scale_byte << 8) as u16), F16X2_SIXTY_FOUR);
            let odd = (q & 0x8080_8080) | ((q >> 2) & 0x1C1C_1C1C);
            let even = ((q << 4) & 0x8080_8080) | ((q << 2) & 0x1C1C_1C1C);
            let fp16 = [
                cvt::mul_f16x2(cvt::f16x2_from_e4m3x2(even as u16), scale),
                cvt::mul_f16x2(cvt::f16x2_from_e4m3x2((even >> 16) as u16), scale),
                cvt::mul_f16x2(cvt::f16x2_from_e4m3x2(odd as u16), scale),
                cvt::mul_f16x2(cvt::f16x2_from_e4m3x2((odd >> 16) as u16), scale),
            ];
            // Logical chunk `chunk` of the row, XOR-swizzled on the absolute address.
            let addr = Swizzle::B128.apply(row_addr.offset(chunk * CHUNK).0);
            memory::st_shared_v4_b32(SmemAddr(addr), fp16);
        }
    }
}

/// fp32 accumulators per consumer thread: m64n128 / 128 threads.
const ACCUMULATORS: usize = (WGMMA_M * BLOCK_N / WARPGROUP) as usize;

/// Warpgroups 1 and 2: wgmma over the fp16 ring, then the epilogue.
#[inline(always)]
fn consumer<V: Variant>(smem: Smem, p: &Problem, half: u32, thread: u32) {
    let mut ring = RingPos::start(STAGES);
    let mut local_tile = 0;
    while let Some(tile) = p.tile(local_tile) {
        let mut acc = [0.0f32; ACCUMULATORS];
        for kb in 0..p.k_steps {
            smem.full(ring.slot).wait(ring.phase);
            // This warpgroup's 64 rows of A, all 128 rows of B, K-major, 128B swizzle.
            let a = SmemDesc::new(
                smem.a16(ring.slot).offset(half * WGMMA_M * ROW_F16_BYTES).0,
                LBO_UNUSED,
                SWIZZLE_ATOM_BYTES,
                Swizzle::B128,
            )
            .advance(V::A_DESCRIPTOR_SHIFT);
            let b = SmemDesc::new(smem.b16(ring.slot).0, LBO_UNUSED, SWIZZLE_ATOM_BYTES, Swizzle::B128);
            wgmma::fence_operand(&mut acc);
            wgmma::fence();
            for j in 0..BLOCK_K / WGMMA_K {
                // k16 step j starts 32 bytes further into each 128-byte swizzle row.
                let step = j * WGMMA_K * F16_BYTES;
                // SAFETY: `acc` and the stage stay untouched until the wait below.
                unsafe { wgmma::mma_async_ss_m64n128(&mut acc, a.advance(step), b.advance(step), kb > 0 || j > 0) };
            }
            wgmma::commit_group();
            if !V::DROP_WGMMA_WAIT {
                wgmma::wait_group::<0>();
            }
            wgmma::fence_operand(&mut acc);
            // Every consumer thread's wgmmas on this stage are complete: release it.
            smem.empty(ring.slot).arrive();
            ring.advance();
        }
        store_tile(p, tile, half, thread, &acc);
        local_tile += 1;
    }
}

/// Writes one warpgroup's 64 x 128 accumulator block to C through the epilogue (alpha,
/// bias, fp16 or bf16).
///
/// wgmma's accumulator layout (PTX ISA 9.7.15.5.1): thread t of the warpgroup holds, for
/// v in 0..64, the element at row 16·(t/32) + (t%32)/4 + 8·((v/2)%2) and column
/// 8·(v/4) + 2·(t%4) + v%2; so registers v and v+1 (v even) are adjacent columns. The
/// loop is unrolled at compile time so every register index is a constant and the
/// accumulators stay in registers.
#[inline(always)]
// `seq!` expands PAIR to the literals 0..32, so `2 * PAIR` reads `2 * 0`, `2 * 1`, ...:
// clippy's identity/erasing-op lints fire on the expansion, not on anything to simplify.
#[allow(clippy::identity_op, clippy::erasing_op)]
fn store_tile(p: &Problem, tile: Tile, half: u32, thread: u32, acc: &[f32; ACCUMULATORS]) {
    let (m_count, n_count) = (p.args.m, p.args.n);
    let epilogue = Epilogue::load(&p.args);
    let pair_stores = n_count % 2 == 0; // 4-byte aligned pairs need an even row length
    let batch = p.args.c + tile.l as u64 * m_count as u64 * n_count as u64 * OUT_BYTES as u64;
    let (warp, lane) = (thread / 32, thread % 32);
    let row0 = tile.m0 + half * WGMMA_M + 16 * warp + lane / 4;
    let col0 = tile.n0 + 2 * (lane % 4);
    seq_macro::seq!(PAIR in 0..32 {{
        const V: u32 = 2 * PAIR;
        let (row, col) = (row0 + 8 * ((V / 2) % 2), col0 + 8 * (V / 4));
        if row < m_count && col < n_count {
            let addr = batch + (row as u64 * n_count as u64 + col as u64) * OUT_BYTES as u64;
            let (lo, hi) = (acc[V as usize], acc[V as usize + 1]);
            if pair_stores && col + 1 < n_count {
                memory::st_global_b32(addr, epilogue.pair(lo, hi, col));
            } else {
                memory::st_global_b16(addr, epilogue.one(lo, col));
                if col + 1 < n_count {
                    memory::st_global_b16(addr + OUT_BYTES as u64, epilogue.one(hi, col + 1));
                }
            }
        }
    }});
}

// The GPU entry point: `.entry nvfp4_gemm_sm90`.
gemm_entry_point!(nvfp4_gemm_sm90 => gemm::<Correct>);
