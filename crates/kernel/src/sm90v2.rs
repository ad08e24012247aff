//! `sm90` v2: NVFP4 GEMM on Hopper, weights dequantized straight into wgmma registers.
//!
//! **Math.** C[m, n] = fp16( Σ_k a[m, k]·sfa[m, k/16] · b[n, k]·sfb[n, k/16] ), exactly as
//! v1: every operand value becomes an exact fp16 (e2m1 → e4m3 bit trick →
//! `cvt.rn.f16x2.e4m3x2`, value·2^-6 → × fp16(sf·64) for the activations, a·sf, and × fp16(sf)
//! for the weights, b·sf·2^-6, whose 64 the epilogue multiplies back once per output), the
//! tensor cores multiply fp16 with fp32 accumulation. What changes is who converts what,
//! where, and how often.
//!
//! **Swap-AB.** wgmma's register operand (RS form) is its A: 64 rows per instruction. The
//! weights B[N, K] are the large matrix, streamed once, so they become the wgmma A
//! operand, dequantized by the consumer threads straight into A fragments (no fp16 weight
//! ever touches shared memory); the activations A[M, K] become the wgmma B operand, read
//! from shared memory with a descriptor. The accumulator therefore holds a block of Cᵀ:
//! accumulator row = weight row n, accumulator column = activation row m.
//!
//! **Launches** (two, three with split K).
//! 1. [`prepare`] (`nvfp4_sm90v2_prepare`): dequantizes A once per call into the
//!    workspace, as fp16 images that are byte for byte the shared-memory tiles the main
//!    kernel needs: per (batch, 128-row block of M, 64-value K stage) one 16 KiB image of
//!    128 rows x 128 bytes (other tile heights: their rows, see [`Rows`]), already
//!    128B-swizzled and with K permuted as the weight fragments imply (see "K order"
//!    below). Rows past M are zeros.
//! 2. [`gemm`] (`nvfp4_gemm_sm90v2`): one CTA per work unit (a 128 (N) x 128 (M) tile and
//!    a range of its K stages, or with stream-K two such segments); each ring slot holds a
//!    stage's activation image (one 1-D `cp.async.bulk` by producer thread 0) and its raw
//!    weights and scales as they lie in
//!    B and SFB (16-byte `cp.async`s by the producer warpgroup); each consumer thread reads
//!    its own rows' bytes back (the next stage's while the last step's MMA runs), converts
//!    them per k16 step into A fragments and issues RS wgmmas with `wait_group IN_FLIGHT`
//!    (3), so the conversion of step j+1 overlaps the MMAs of steps j-2..j (and of the
//!    other warpgroup); stages go in pairs (fours on medium and decode tiles), drained
//!    (`wait_group 0`) once per group.
//!
//! **K order.** A dot product only needs both operands in the same K order, so each
//! thread converts its raw word in whatever order is cheapest and the activation image is
//! laid out to match. Consumer thread (warp w of its warpgroup, g = lane/4, t = lane%4)
//! owns, in each 64-value stage, values [16t, 16t+16) of its rows (8 raw bytes = two
//! words, one scale). Converting word q (values k0..k7) gives four fp16 pairs, "kinds"
//! 0..3 = (k0,k2), (k4,k6), (k1,k3), (k5,k7); word x kind gives `H[i]`, i = 4·word + kind,
//! i in 0..8. For k16 step j (0..4) the RS fragment of rows r, r+8 is
//! `{H_r[2j], H_(r+8)[2j], H_r[2j+1], H_(r+8)[2j+1]}`: wgmma reads `H[2j]` of thread t as
//! step-local k 2t, 2t+1 and `H[2j+1]` as k 8+2t, 9+2t. So in the activation image, the
//! 16-byte chunk i of a row (step-local columns 8·(i%2)..) holds `H[i]` of t = 0..3 at
//! bytes 4t: [`prepare`] converts quarter t (8 bytes) of a raw activation row exactly as
//! consumer thread t converts a weight row, and stores `H[i]` at bytes 4t of chunk i.
//!
//! **Warp roles** (384 threads = 3 warpgroups): warpgroups 0 and 1 are *consumers*:
//! warpgroup c owns weight rows 64c..64c+63 of the tile as one m64 block against all 128
//! activation rows: one `wgmma m64n128k16` (RS) per k16 step, 64 fp32 accumulators per
//! thread (on medium and decode tiles, 128 weight rows as two m64 blocks, see [`Rows`]).
//! Warpgroup 2 is the *producer*: its 128 threads copy every stage's weights and scales
//! with 16-byte `cp.async`s, its thread 0 the image with one bulk copy. The register
//! file (64 K per SM, 16 K per scheduler, each holding one warp of every warpgroup) cannot
//! give 384 threads the ~220 registers a consumer needs (on wide tiles), so the launch
//! bounds give each thread 168 ([`launch_regs`], `.maxntid` and `.maxnreg` in
//! the PTX) and `setmaxnreg` moves them: the producer drops to [`PRODUCER_REGS`] (40),
//! the consumers rise to [`consumer_regs`] (232; 48 and 224 on medium tiles,
//! [`MEDIUM_PRODUCER_REGS`]). Until session 19 thread 0 of consumer
//! warp 0 issued the bulk copies and every consumer thread copied its share of the
//! weights, waited for its own copies (`cp.async.wait_group`) and announced them on
//! `full`, which tied each consumer warp's pace to its copies' landing and to the other
//! warpgroup's releases: 68.1 against 63.9 us on 128x7168x16384 on an H100, 223.2
//! against 215.4 us on 2304x4608x7168 (docs/perf-notes.md, session 19).
//!
//! **Pipeline and barriers** (ring of [`ring_slots`] slots: image, weights, scales):
//! - `full[s]` (129 arrivals: the producer thread 0's `arrive.expect_tx` of the image's
//!   bytes, plus the bulk copy's `complete_tx`; and every producer thread's plain
//!   arrival once `cp.async.wait_group` proved its weight copies into the slot landed,
//!   [`producer_lag`] stages after issuing them; one commit group per stage): slot s
//!   holds the stage. The image is written through the async proxy and wgmma reads it
//!   through it: no proxy fence anywhere; the weights are written and read by plain
//!   loads.
//! - `empty[s]` (256 arrivals, every consumer thread; 128 on thin tiles, whose warpgroups
//!   take alternate stages): no wgmma reads slot s any more.
//!   Stages go in pairs (in fours on medium and decode tiles, [`stages_per_drain`]): a
//!   group's last stage ends with `wait_group 0` (see `consumer` for why), after which
//!   each thread arrives; every other stage's slot is released during the next stage, by
//!   the `wait_group IN_FLIGHT` that proves its last step complete. In the wide and
//!   prefill tiles' bf16 entry points warpgroup 1's pairs start a stage later than
//!   warpgroup 0's, so that they never both drain at once
//!   ([`Element::PAIRS_A_STAGE_APART`]).
//! - The producer fills all slots before the loop (the weights before the prologue
//!   completes, the images after), then refills each slot as soon as `empty` says the
//!   consumers released it.
//! - Why the weights share the slot: the first versions had each thread copy exactly the
//!   bytes it reads (4 rows x 8 bytes and 4 scale groups per stage, 8-byte and 4-byte
//!   `cp.async`s into a private ring, ordered by `cp.async.wait_group` alone). Those 8
//!   small copies per thread per stage kept the L1/shared pipe 75% busy: an H100 run
//!   with them removed (wrong results, timing only) took 12.5 us off the largest M = 128
//!   shape. Copying the tile's rows in whole 16-byte chunks halved the wavefronts
//!   (docs/perf-notes.md, "Session 11"). A 2-D tensor-map copy (TMA) of the 32-byte-wide
//!   weight box instead measured slower on the large shapes (74.3 against 68.3 us on
//!   128x7168x16384, 231.5 against 222.8 on 2304x4608x7168; session 19).
//!
//! **Epilogue.** In the accumulator layout a thread's values of C are 2-byte pieces of
//! four rows, so storing them directly writes each 32-byte sector in halves, 2 bytes per
//! lane. A whole tile's accumulators go instead through the epilogue (alpha, bias, fp16
//! or bf16) into a shared-memory copy of its C block in the idle ring (`Place::stage_bits`,
//! rows padded by one chunk against bank conflicts), which the CTA then writes out in
//! 16-byte chunks, a warp 512 contiguous bytes of whole rows (`Place::write_staged`):
//! 2304x4608x7168 took 221.5 us against 229-230.5 direct on an H100 (docs/perf-notes.md,
//! session 16). The staging is straight-line code, with no test per value (values past M
//! or N land in the copy and stay there; `Place::stage_unbiased`, `Place::stage_biased`):
//! the CTA's tensor cores idle while it runs, and a version that tested each value took
//! ~2 us per tile (session 40).
//!
//! **Split K** (launch 3, [`reduce`], `nvfp4_sm90v2_reduce`). The tiles run in waves of
//! one CTA per SM. When the last wave is at most half full (every tile of 128x4096x7168;
//! 60 of 2304x4608x7168's 324), [`splits`] CTAs share each of its tiles, each
//! a contiguous range of the K stages, and store fp32 partials in the accumulators' own
//! register order (16-byte stores, contiguous across the 256 consumer threads). A third launch,
//! one thread per 4 accumulators of every split tile, sums the splits in split order (the
//! result does not depend on timing) and writes C. Unlike sm100's in-kernel fix-up (the
//! last CTA of a tile sums), no counters, fences or atomics, and all SMs share the sum:
//! with the last CTA reading 4-8 x 128 KiB alone, the fix-up took ~17 us on an H100.
//!
//! **Stream-K** ([`Decomposition::stream_k`]). A last wave of wide or 128-row tiles that is
//! more than half full (or a single such wave) would leave the other SMs idle for a whole
//! tile's time, and splitting each of its tiles evenly gains nothing until the splits
//! fill whole waves. Instead, where a cost model predicts it faster ([`Plan::stream_k_beats`]),
//! one CTA per SM shares all of that wave's stages in equal runs, in tile order: a run that
//! passes a tile's end goes on in the next tile, so a CTA multiplies one or two
//! *segments* (a tile and a range of its stages), one after the other on the same ring,
//! and stores each segment's partial; the reduce launch sums each tile's two or three
//! partials in K order. On an H100, against even splits of each tile over several waves or
//! whole tiles: 512x4608x16384 137.3-139.3 → 115.7-118.6 us, 1024x7168x16384 333.1-335.4 →
//! 313.8-317.2, 259x3072x16384 87.3-89.3 → 72.8-74.5, but 1024x2112x16384 144.8-146.1 →
//! 148.3-148.9 (docs/perf-notes.md, session 35, with why that one may lose). Medium and
//! 128-row tiles (M = 17..128, long K) run stream-K also where their only wave is at most
//! half full, if the model predicts it faster than their even split
//! ([`Plan::stream_k_beats_even_split`]: 28 medium tiles split 4 ways, or 56 128-row tiles
//! split 2 ways, fill 112 of 132 SMs): 64x7168x16384 50.1-50.3 → 49.5-49.7 us,
//! 32x7168x16384 49.0-49.2 → 48.1-48.2, 64x7168x28672 75.7-75.8 → 71.0-71.2, and where
//! 80 tiles left 52 SMs idle, 64x20480x16384 141.0-141.4 → 106.5-106.6 (session 36);
//! 128x7168x16384 59.7-60.5 → 58.8-59.3, 128x7168x28672 96.1-96.2 → 89.8-90.0,
//! 128x6144x12288 48.1 → 43.5-43.9 (session 37).
//!
//! **Decode and medium tiles** ([`Rows`]). (Calls with NVFP4 activations and M ≤ 4 mostly
//! skip this file: the host runs them on the CUDA-core GEMV, `crate::gemv`, one launch
//! whose exact integer block sums beat these tiles at decode sizes.) For M ≤
//! [`DECODE_MAX_M`] (16) a tile has 16
//! activation rows instead of 128: `wgmma m64n16k16`, 8 accumulators per block, 2 KiB
//! images and 66 KiB of shared memory, so two CTAs share an SM and split K goes twice as
//! wide. For M ≤ [`MEDIUM_MAX_M`] (64, the batch sizes of busy decode servers) it has 64:
//! `wgmma m64n64k16`, half the tensor work of a 128-row tile. Both have 256 weight rows
//! (each warpgroup two m64 blocks); the weights, their conversion and the ring are the
//! same; every launch has an entry point per tile kind ([`entries`]; the GEMM of wide
//! tiles one per operand type, [`entry_per_type`], and of prefill and thin tiles a second
//! one for bf16, each of one type on [`Alone`]), each kind named by its key
//! ([`Rows::TILE`]: the row count, with a flag for the narrow and thin tiles below), which
//! every size function of this file takes.
//!
//! **Why 128 weight rows on 128-row tiles.** Until session 21 these tiles had 256 weight
//! rows, like the medium ones: at M = 128 the few tiles then split K 4-8 ways, and the
//! f32 partials' stores and sum were 7-8 us of each call. 128 weight rows make twice the
//! tiles, which split K half as many ways into partials half the size: a quarter of the
//! partial bytes, for the same tensor work and conversion per weight and twice the image
//! bytes per MMA (L2 had the headroom: 47 % busy). On an H100, interleaved with the
//! 256-row build: 128x4096x7168 24.6 against 28.9 us, 128x7168x2048 20.2 against 22.8
//! (then on 64-row tiles), 128x7168x4096 26.1 against 29.4, 128x7168x16384 64.2 against
//! 62.8 (docs/perf-notes.md, session 21); with the deeper producer lag of session 22 (see
//! [`producer_lag`]) they win on long K too (128x7168x16384 61.9-62.2 against 63.4-63.6
//! for 256 weight rows with the same lag). They also convert each weight half as often as
//! 64-row tiles of the same decomposition, so M = 65..128 runs on them unless K is short
//! (thin tiles, below).
//!
//! **Short K: narrow and thin tiles.** Where each SM walks few stages, the partials' round
//! trip and the ring's ramp weigh more than the loop, and tiles of half the weight rows
//! pay: twice the tiles split K half as many ways, or not at all (128x7168x2048 makes 112,
//! one wave without partials or a reduce launch). [`Plan::new`] takes them when no SM walks
//! more than [`SHORT_MAX_STAGES`] (32; two waves of 32 count 64) stages:
//! - *Thin* ([`Thin`], M = 65..128; [`ThinMedium`], M = 17..64): 64 weight rows against
//!   all the tile's activation rows (128, or 64), which both warpgroups convert, each for
//!   alternate stages (warpgroup c multiplies stages c, c + 2, ... of its unit with one
//!   `wgmma m64n128k16` per k16 step, the image's two 64-row halves as its two accumulator
//!   blocks; `m64n64k16` and 32-row halves on 64-row tiles); at the end warpgroup 1 hands
//!   its sum to warpgroup 0 through the idle ring ([`Rows::exchange`]), which writes the
//!   tile. At M = 65..128 the same tiles as narrow ones (below; session 23), but each
//!   weight converted once instead of twice and half the k16 steps, each twice the MMA: on
//!   an H100 (session 24) 128x7168x2048 17.7-17.9 against 18.7 us on narrow tiles,
//!   128x4096x4096 19.1 against 21.8-21.9 and 128x2048x7168 18.2-18.3 against 20.3 on
//!   128-row ones. Each CTA reads twice the image bytes per MMA of a 128-row tile, which
//!   loses where the CTAs walk longer (128x4096x7168, 56 stages: 25.5-25.7 against
//!   24.6-24.7; 128x7168x16384, 256: 69.7-70.7 against 61.6-61.8). At M = 17..64 twice the tiles of narrow ones, so half
//!   the splits or none: 64x7168x2048 15.3-15.7 against 17.1 us, 64x7168x1024 12.0-12.1
//!   against 14.2-14.3.
//! - *Narrow* ([`Narrow`], M = 17..64, where thin tiles walk too many stages): 64
//!   activation rows against 128 weight rows, each warpgroup's 64 converted weight rows
//!   multiplied by both 32-row halves of the image with one `wgmma m64n64k16`: twice the
//!   image bytes per MMA of a medium tile (64x4096x7168, 28 stages where thin 64-row tiles
//!   walk 56: 21.6 against 22.6 us on medium tiles, docs/perf-notes.md, session 23).
//!
//! **Wide tiles** (M > [`PREFILL_MAX_M`]). At prefill sizes the conversion is a third of
//! a 128-row tile's time, and it is paid once per 128 rows of M. A wide tile has 256
//! activation rows and 128 weight rows: each warpgroup converts its 64 weight rows once
//! and multiplies them by the whole image with one `wgmma m64n256k16`, whose 128
//! accumulators are the two 128-row halves' blocks side by side, so each weight value is
//! converted half as often per row of C. (Two `wgmma m64n128k16` on the same fragments,
//! one per half, did the same work with 10 more registers and measured slower with bf16
//! activations: 255.7 against 244.2 us on 2304x4608x7168, docs/perf-notes.md, session
//! 18.) Wide tiles are chosen only when they pad M no more than 128-row tiles do (the last
//! 256-row tile more than half full, [`rows_for`]): at M = 384 two wide tiles multiply 512
//! rows where three 128-row tiles multiply 384, and measured slower (43.3 against 41.1 us
//! at 384x7168x2304). Nor where they would split K while 128-row tiles make one wave of
//! unsplit tiles that a cost model predicts no slower ([`ONE_WAVE_MAX_STAGES`]): there the
//! partials' stores and the reduce launch cost more than the second conversion of each
//! weight (256x7168x2048 22.4-22.7 us against 29.1-29.3 on wide tiles, session 32).
//!
//! **W4A16.** With 16-bit activations (fp16 or bf16, `GemmArgs::a_format`) the prologue
//! only lays them out in the same images; the weights are dequantized as above, and with
//! bf16 activations they are built as bf16 straight from their codes (value · sf · 2^-7,
//! exact: three or four integer instructions and one `mul.rn.bf16x2` per pair, no
//! conversion instruction; the epilogue's alpha takes the 2^7) for `wgmma ... .bf16.bf16`, with the
//! images' pairs in that order ([`Element`]): a second copy of the consumer loop, chosen
//! once per CTA, or on wide, prefill and thin tiles an entry point of its own
//! ([`entry_per_type`], [`Alone`]).
//!
//! **Constraints.** Any M, N and L; K a multiple of 16 (a partial last stage reads zeros
//! past K, in the images and in the weights). Needs sm_90a (wgmma, bulk copies).
//!
//! **Versus v1.** v1 had one dequantizing warpgroup per CTA writing both operands as fp16
//! into shared memory (2200 cycles per stage against 512 of MMA) and 56 CTAs for N = 7168.
//! Here 8 warps convert only the weights, straight into registers, activations are
//! converted once per call instead of once per CTA, asynchronous wgmma groups overlap
//! conversion with the MMA, and split K gives 112-128 CTAs on the M = 128 shapes (and
//! halves the last wave of 2304x4608x7168), and wide tiles convert each weight once per
//! 256 rows of M, and a producer warpgroup keeps the copies off the converting warps.
//! Measured on an H100: 62.6 / 25.4 / 17.5 / 213.5 us against v1's 275.7 / 125.4 / 42.6 /
//! 602.5 on the four benchmark shapes (`host bench`, session 24; docs/perf-notes.md, with
//! where the remaining time goes).

use nvfp4::layout;
use nvfp4::operand::AFormat;
use nvfp4::shape::{K_GRANULE, SF_VECTOR};
use nvfp4::sm90::SmemDesc;
use nvfp4::swizzle::Swizzle;

use crate::epilogue::{Epilogue, OUT_BYTES};
use crate::ptx::mbarrier::{MBARRIER_BYTES, Mbarrier};
use crate::ptx::{SmemAddr, barrier, bulk, cp_async, cvt, fence, griddep, integer, memory, special, warp, wgmma};
use crate::ring::RingPos;
use crate::rows;
use crate::{GemmArgs, Launch};

// ---------------------------------------------------------------------------------------
// Tile and pipeline constants
// ---------------------------------------------------------------------------------------

/// Rows per wgmma (weight rows per m64 block).
const WGMMA_M: u32 = 64;
/// K per wgmma for 16-bit inputs.
const WGMMA_K: u32 = 16;
/// Threads per warp / warpgroup.
const WARP: u32 = 32;
const WARPGROUP: u32 = 128;
/// Consumer warpgroups, and accumulator blocks (m64 x the wgmma N) each one holds.
const CONSUMERS: u32 = 2;
const BLOCKS: usize = 2;
/// The flag that tells the narrow 64-row tiles' key ([`Rows::TILE`]) from the medium ones'.
pub const NARROW: u32 = 1 << 16;
/// The flag of the thin tiles' keys (64 weight rows, the warpgroups on alternate stages):
/// 128 | `THIN` ([`Thin`]) and 64 | `THIN` ([`ThinMedium`]).
pub const THIN: u32 = 1 << 17;
/// The activation rows of tile key `tile`.
const fn rows_of(tile: u32) -> u32 {
    tile & (NARROW - 1)
}
/// Stages a consumer warpgroup multiplies between two drains (`wait_group 0`, at its
/// loop's back-edge, see `consumer`): four on medium and decode tiles, whose short wgmmas
/// (two m64n64 or two m64n16 per k16 step) leave the tensor core idle soonest after a
/// drain, until the warpgroup has converted its next fragment; two elsewhere. On an H200
/// (docs/perf-notes.md, session 43), four against two: 64x7168x16384 (medium) 45.28-45.46
/// → 44.53-44.85 us, bf16 W4A16 48.43-48.51 → 47.20-47.41, 32x7168x16384 43.57-43.65 →
/// 42.88-43.06, 16x28672x4096 (decode) 41.10-41.25 → 40.21-40.38; level on narrow tiles
/// (64x4096x7168 19.14-19.33 → 19.06-19.18, 33x4096x7168 19.22 → 19.34-19.39) and level
/// or slower with m64n128 and m64n256 wgmmas (128x7168x16384 55.49-55.68 → 55.65-55.92,
/// 2304x4608x7168 202.43-202.64 → 202.69-203.07, thin 128x7168x2048 15.04-15.25 →
/// 14.93-15.04 in one call and 14.58-14.99 → 15.46-15.54 in the next). Eight on medium
/// and decode tiles measured no better than four (64x7168x16384 44.53-44.74 → 44.85-44.94,
/// 64x20480x16384 98.43-98.74 → 98.99-99.47).
const fn stages_per_drain(tile: u32) -> u32 {
    match tile {
        Medium::TILE | Decode::TILE => MAX_STAGES_PER_DRAIN,
        _ => 2,
    }
}
/// The most stages between drains on any tile: `consumer` unrolls its loop over this many
/// (`seq!(S in 0..4)`), the stages past a tile's count folded away.
const MAX_STAGES_PER_DRAIN: u32 = 4;
const _: () = assert!(MAX_STAGES_PER_DRAIN == 4, "`consumer`'s `seq!(S in 0..4)` unrolls this many");
/// Stages between one stage a consumer warpgroup multiplies and its next: 1 where both
/// warpgroups multiply every stage (each its own weight rows), 2 on thin tiles, whose two
/// warpgroups share the tile's 64 weight rows and take alternate stages (warpgroup c the
/// stages c, c + 2, ... of the unit), their two sums added in shared memory at the end.
const fn stage_step(tile: u32) -> u32 {
    if tile & THIN != 0 { CONSUMERS } else { 1 }
}
/// Consumer threads whose accumulators hold distinct elements of the tile's C (after the
/// thin tiles' sum, warpgroup 0's).
const fn holders(tile: u32) -> u32 {
    CONSUMER_THREADS / stage_step(tile)
}
/// The m64 weight blocks a warpgroup multiplies on tiles of key `tile`: one per accumulator
/// block on medium and decode tiles, or on prefill, wide, narrow and thin tiles one for both (see
/// [`Rows`]: the two blocks are the two halves of the activations against the same
/// converted weights).
const fn weight_blocks(tile: u32) -> u32 {
    if tile == Wide::TILE || tile == Prefill::TILE || tile == Narrow::TILE || tile & THIN != 0 {
        1
    } else {
        BLOCKS as u32
    }
}
/// Activation rows of one accumulator block (the wgmma N).
const fn block_rows(tile: u32) -> u32 {
    rows_of(tile) * weight_blocks(tile) / BLOCKS as u32
}
/// How far accumulator block 1's rows of C lie from block 0's: a weight block further in n,
/// or on prefill, wide, narrow and thin tiles (both blocks on the same weights) an
/// activation half further in m.
const fn block_n_step(tile: u32) -> u32 {
    if weight_blocks(tile) == 1 { 0 } else { WGMMA_M }
}
const fn block_m_step(tile: u32) -> u32 {
    if weight_blocks(tile) == 1 { block_rows(tile) } else { 0 }
}
/// Weight rows (columns of C) per CTA tile with tiles of key `tile`: 64 on thin tiles (both
/// warpgroups on the same rows), 128 on prefill, wide and narrow tiles, 256 on medium and
/// decode tiles.
pub const fn block_n(tile: u32) -> u32 {
    CONSUMERS / stage_step(tile) * weight_blocks(tile) * WGMMA_M
}
/// Thin tiles and, at M = 17..64, narrow tiles run a call where no SM walks more than this
/// many stages of them (its waves of CTAs times a CTA's stages; see "Short K" in the
/// header). On an H100 (docs/perf-notes.md, sessions 23-24), against the tiles M picks:
/// thin 64x7168x2048 (32 stages per CTA) 15.3-15.7 against 17.1 us on narrow tiles; narrow
/// 64x7168x2048 (16 stages per CTA) 16.8 against 18.6 on medium ones, 64x4096x7168 (28)
/// 21.6 against 22.6, and where the CTAs walk longer 64x7168x16384 (128) 58.2 against
/// 51.3; thin 128x7168x2048 (32, no split) 17.4-17.9 against 18.7-19.5 on narrow tiles,
/// 128x4096x4096 (32) 19.1-19.3 against 21.8-22.0, 128x7168x4096 (64) 25.3-25.4 against
/// 26.2-26.3, and longer 128x4096x7168 (56) 25.5-25.7 against 24.6-24.7, 128x7168x6144
/// (96) 33.1 against 32.1-32.2, 128x14336x2048 (two waves of 32) 29.8-30.2 against 23.8.
pub const SHORT_MAX_STAGES: u32 = 32;
/// M up to this runs on decode tiles (see [`Rows`]).
pub const DECODE_MAX_M: u32 = 16;
/// M up to this (and above [`DECODE_MAX_M`]) runs on medium tiles (see [`Rows`]).
pub const MEDIUM_MAX_M: u32 = 64;
/// M up to this runs on 128-row tiles, above it on wide ones where they fit ([`rows_for`]).
pub const PREFILL_MAX_M: u32 = 128;
/// Above [`PREFILL_MAX_M`], a call whose wide tiles would split K may run on one wave of
/// unsplit 128-row tiles instead ([`Plan::new`]): each SM then walks all the K stages of a
/// tile where on wide tiles it walks a split's share, each of its stages is cheaper (the
/// same weights converted for 128 activation rows instead of 256), and no partials are
/// stored or summed by a reduce launch. The cost model, from host rows on an H100
/// (docs/perf-notes.md, session 32: lines through 256x7168xK and 256x4352xK): a wide stage
/// costs `WIDE_STAGE_QUARTERS` / 4 of a 128-row one, and the split ~`SPLIT_COST_STAGES`
/// 128-row stages (~7 us); the 128-row tiles are taken where that predicts them no slower,
/// up to this many stages. Wide then 128-row tiles, wide split in two:
/// 256x7168x2048 (32 stages) 29.1-29.3 → 22.4-22.7 us, 256x7168x4096 (64) 38.3-38.5 →
/// 33.8-33.9, 512x4096x7168 (112) 55.1-55.2 → 52.4-52.6 (bf16 W4A16 56.6-56.8 against
/// 56.7-56.9), but 256x7168x16384 (256) 95.9-96.1 → 100.8-101.0; in three: 256x4352x1024
/// (16) 20.1 → 16.1-16.3, 256x4352x2048 (32) 24.0-24.3 → 21.3-21.6, 256x5632x2048 (32)
/// 26.2-26.3 → 21.7-22.0, but 256x4352x4096 (64) 30.5-30.7 → 33.3-33.9 and 256x4352x7168
/// (112) 40.2-40.4 → 49.8-50.1.
pub const ONE_WAVE_MAX_STAGES: u32 = 112;
/// A wide tile's stage (256 activation rows) in quarters of a 128-row tile's stage (0.62
/// against 0.35 us per CTA on an H100, session 32), and the split K's partials and reduce
/// launch in 128-row stages (~7 us), for [`Plan::new`]'s choice above M = 128 (host code,
/// as `Plan::new`).
#[cfg(not(target_arch = "nvptx64"))]
const WIDE_STAGE_QUARTERS: u32 = 7;
#[cfg(not(target_arch = "nvptx64"))]
const SPLIT_COST_STAGES: u32 = 20;
/// K values per stage: one 128-byte swizzle row of fp16 per activation row.
pub const BLOCK_K: u32 = K_GRANULE;
/// k16 steps per stage.
const STEPS: u32 = BLOCK_K / WGMMA_K;
/// What L2 fetches from DRAM per weight chunk: a stage reads 32 bytes of each row and the
/// next three stages the rest of its 128-byte line, so L2 fetches the line at once. On an
/// H100 (docs/perf-notes.md, session 14): 1x7168x16384 55.0 -> 48.7 us, 128x7168x16384
/// 69.3 -> 67.4 us; fetching 256 bytes was slower than 128 (49.8 and 68.6 us: what a split
/// does not read is fetched too, 76 MB from DRAM instead of 68 at M = 1).
const WEIGHT_L2_PREFETCH: rows::L2Prefetch = rows::L2Prefetch::Line;
/// Ring slots of tiles of key `tile`: the stages (activation image, raw weights and scales)
/// in flight. Eight on 128-row, thin and narrow tiles, six on the others: wide tiles have
/// no room for more (6 x 36.5 KiB), decode tiles (two CTAs per SM) measured slower with 8
/// or 10 (docs/perf-notes.md, session 22), and medium tiles only level (their lag of 3 took
/// what there was).
pub const fn ring_slots(tile: u32) -> u32 {
    if tile == Prefill::TILE || tile == Narrow::TILE || tile & THIN != 0 { 8 } else { 6 }
}
/// A producer thread announces a stage on `full` once `cp.async.wait_group` proved its
/// copies landed, after issuing this many later stages (one commit group per stage): the
/// stages of copies it keeps in flight while it waits, less one. The wait blocks the
/// thread, so this, not the ring, bounds how much DRAM latency the copies hide. On an
/// H100 (docs/perf-notes.md, session 22), against a lag of 2 on 6 slots everywhere:
/// 128-row tiles with 8 slots and a lag of 4 took 128x7168x16384 from 64.0-64.7 to
/// 61.6-62.0 us and 128x7168x8192 from 40.7 to 38.5 (the short-K shapes within 0.3); medium
/// 64-row tiles with a lag of 3 took 0.7-1.2 us off every long-K shape (64x7168x16384 51.3 to
/// 50.5, 17x7168x16384 50.3 to 49.1) and left the short ones as they were; decode tiles
/// lost 0.1-1.4 us with 3 or 4. Narrow tiles with 8 slots and a lag of 4 (session 24),
/// where thin tiles would walk more stages: 64x4096x7168 21.8-21.9 to 20.8, 32x4096x7168
/// 21.2 to 20.0-20.1, 64x7168x4096 22.8-22.9 to 21.7-21.9. (Arriving through `cp.async.mbarrier.arrive.noinc`, which
/// fires once the copies land, needs no wait at all; it measured no faster than these lags,
/// and compute-sanitizer's racecheck reported hazards on it, docs/perf-notes.md, sessions
/// 11 and 22.)
pub const fn producer_lag(tile: u32) -> u32 {
    match tile {
        Prefill::TILE | Narrow::TILE | Thin::TILE | ThinMedium::TILE => 4,
        Medium::TILE => 3,
        _ => 2,
    }
}
/// Consumer threads (warpgroups 0 and 1), then the producer warpgroup.
const CONSUMER_THREADS: u32 = CONSUMERS * WARPGROUP;
const PRODUCER_THREADS: u32 = WARPGROUP;
pub const THREADS: u32 = CONSUMER_THREADS + PRODUCER_THREADS;
/// Registers per thread at launch (`.maxnreg`, with `.maxntid THREADS`: the host's
/// build script writes both into the PTX, see [`LAUNCH_BOUNDS`]): one CTA per SM, two
/// with decode tiles.
pub const fn launch_regs(tile: u32) -> u32 {
    REGISTERS_PER_SM / (ctas_per_sm(tile) * THREADS) / REGISTER_GRANULE * REGISTER_GRANULE
}
/// The seven tile kinds' keys (see [`Rows`]): prefill, wide, medium, narrow, thin, thin
/// medium, decode.
pub const TILES: [u32; 7] =
    [Prefill::TILE, Wide::TILE, Medium::TILE, Narrow::TILE, Thin::TILE, ThinMedium::TILE, Decode::TILE];
/// The producer's registers after `setmaxnreg.dec`: it only computes copy addresses.
pub const PRODUCER_REGS: u32 = 40;
/// ...and on medium tiles, whose producer threads copy 4 weight chunks per stage and may
/// go on to a stream-K run's second segment: with 40, ptxas spilled 48 bytes (outside the
/// refill loop) to keep the second segment through the first. Their consumers keep 224
/// registers, enough for their 64-row accumulators.
pub const MEDIUM_PRODUCER_REGS: u32 = 48;
/// The producer's registers on tiles of key `tile`.
pub const fn producer_regs(tile: u32) -> u32 {
    if tile == Medium::TILE { MEDIUM_PRODUCER_REGS } else { PRODUCER_REGS }
}
/// The consumers' registers after `setmaxnreg.inc`: what the CTA's launch allocation
/// leaves once the producer has given its share back.
pub const fn consumer_regs(tile: u32) -> u32 {
    let left = launch_regs(tile) * THREADS - producer_regs(tile) * PRODUCER_THREADS;
    left / CONSUMER_THREADS / REGISTER_GRANULE * REGISTER_GRANULE
}
/// The register file of an SM, the allocation granule per thread, and the most a thread
/// may hold (PTX ISA `setmaxnreg`: 24..=256 in multiples of 8; ptxas uses at most 255).
const REGISTERS_PER_SM: u32 = 65536;
const REGISTER_GRANULE: u32 = 8;
const MAX_REGS: u32 = 248;
/// CTAs of tiles of key `tile` an SM holds at once.
const fn ctas_per_sm(tile: u32) -> u32 {
    if tile == Decode::TILE { DECODE_CTAS_PER_SM } else { 1 }
}
/// GEMM entry points: one per tile kind, and a second (bf16) one on wide, prefill and thin
/// tiles ([`entry_per_type`], [`Alone`]).
const GEMM_ENTRIES: usize = {
    let (mut entries, mut i) = (TILES.len(), 0);
    while i < TILES.len() {
        entries += gemm_bf16_entry(TILES[i]).is_some() as usize;
        i += 1;
    }
    entries
};
/// The launch bounds the host's build script writes into the PTX of each GEMM entry
/// point: (entry, `.maxntid`, `.minnctapersm`, `.maxnreg`).
pub const LAUNCH_BOUNDS: [(&str, u32, u32, u32); GEMM_ENTRIES] = {
    let mut bounds = [("", 0, 0, 0); GEMM_ENTRIES];
    let (mut i, mut next) = (0, 0);
    while i < TILES.len() {
        let tile = TILES[i];
        let (regs, ctas) = (launch_regs(tile), ctas_per_sm(tile));
        bounds[next] = (entries_f16(tile)[1], THREADS, ctas, regs);
        next += 1;
        if let Some(bf16) = gemm_bf16_entry(tile) {
            bounds[next] = (bf16, THREADS, ctas, regs);
            next += 1;
        }
        i += 1;
    }
    bounds
};
const _: () = {
    let mut i = 0;
    while i < TILES.len() {
        let tile = TILES[i];
        let (launch, consumer) = (launch_regs(tile), consumer_regs(tile));
        let producer = producer_regs(tile);
        assert!(producer >= 24 && producer.is_multiple_of(REGISTER_GRANULE) && producer <= launch);
        assert!(consumer >= launch && consumer <= MAX_REGS && consumer.is_multiple_of(REGISTER_GRANULE));
        assert!(
            tile == Decode::TILE || tile == Medium::TILE || consumer == consumer_regs(Prefill::TILE),
            "one budget for the other 1-CTA tiles"
        );
        assert!(
            consumer * CONSUMER_THREADS + producer * PRODUCER_THREADS <= launch * THREADS,
            "setmaxnreg moves registers within the CTA's launch allocation: an .inc past it never returns"
        );
        i += 1;
    }
};

/// fp16 bytes; f32 bytes.
const F16_BYTES: u32 = 2;
const F32_BYTES: u32 = 4;
/// Bytes of one activation row per stage: one 128B swizzle row.
const ROW_F16_BYTES: u32 = BLOCK_K * F16_BYTES;
/// Packed e2m1 bytes of one row per stage, and per thread (4 threads share a row).
const ROW_RAW_BYTES: u32 = BLOCK_K / 2;
const LANES_PER_ROW: u32 = 4;
const THREAD_RAW_BYTES: u32 = ROW_RAW_BYTES / LANES_PER_ROW;
/// One activation image: `rows` x 128 bytes.
pub const fn act_stage_bytes(tile: u32) -> u32 {
    rows_of(tile) * ROW_F16_BYTES
}
/// The stage's raw weights as they lie in B: `block_n` rows x 32 bytes, row-major.
const fn weight_stage_bytes(tile: u32) -> u32 {
    block_n(tile) * ROW_RAW_BYTES
}
/// The stage's weight scales: one blocked-layout tile (128 rows x 4 scales, 512 bytes) per
/// 128 weight rows, copied as they lie in SFB.
const fn scale_stage_bytes(tile: u32) -> u32 {
    block_n(tile).div_ceil(layout::TILE_ROWS) * layout::TILE_BYTES
}
/// A ring slot's raw part: the stage's weights, then their scales.
const fn raw_stage_bytes(tile: u32) -> u32 {
    weight_stage_bytes(tile) + scale_stage_bytes(tile)
}
/// 16-byte chunks of a stage's weights and scales, and of one weight row; every producer
/// thread copies `weight_chunks / PRODUCER_THREADS` weight chunks, the first
/// `scale_chunks` one scale chunk each.
const fn weight_chunks(tile: u32) -> u32 {
    weight_stage_bytes(tile) / CHUNK
}
const ROW_CHUNKS: u32 = ROW_RAW_BYTES / CHUNK;
const fn scale_chunks(tile: u32) -> u32 {
    scale_stage_bytes(tile) / CHUNK
}
/// The swizzle atom (8 rows x 128 B): the descriptors' SBO.
const SWIZZLE_ATOM_BYTES: u32 = 8 * ROW_F16_BYTES;
/// Leading byte offset: unused by a swizzled K-major operand one atom wide in K.
const LBO_UNUSED: u32 = 16;
/// A 16-byte chunk: the swizzle unit, one `st.global.v4`.
const CHUNK: u32 = 16;
/// fp16 pairs per thread per row per stage (H[0..8] in the header).
const PAIRS: u32 = 8;
/// wgmma groups (k16 steps) a consumer leaves in flight while it converts the next
/// step, and the A fragment buffers that takes: 4 x 8 registers. (Measured on an H100
/// with stage pairs: 2 in flight 78.0 us, 3 in flight 76.5 us on the largest M = 128
/// shape, 346 and 337 us on 2304x4608x7168; docs/perf-notes.md, "round 2".)
const IN_FLIGHT: u32 = 3;
const FRAG_BUFFERS: usize = IN_FLIGHT as usize + 1;
/// Named barrier for the whole CTA.
const BARRIER_CTA: u32 = 0;

const _: () = assert!(THREAD_RAW_BYTES == 8, "one 8-byte load per thread per row per stage: two words");
const _: () = assert!(CHUNK == rows::CHUNK);
const _: () = assert!(THREAD_RAW_BYTES * 2 == SF_VECTOR, "a thread's values are exactly one scale block");
const _: () = assert!(PAIRS == 2 * STEPS, "each k16 step uses two pairs of every row");
const _: () = assert!(PAIRS * CHUNK == ROW_F16_BYTES, "chunk i of an image row holds H[i] of the 4 threads");
const _: () = assert!(LANES_PER_ROW * F32_BYTES == CHUNK);
const _: () = assert!(ROW_F16_BYTES == Swizzle::B128.row_bytes(), "one stage row is one 128B-swizzle row");
const _: () = assert!(BLOCK_K == layout::TILE_COLS * SF_VECTOR, "a stage is one blocked scale tile column");
const _: () = assert!(IN_FLIGHT < STEPS, "a stage's slot is released within the next stage");

// ---------------------------------------------------------------------------------------
// Shared memory map (offsets from DYN_SMEM, 1024-byte aligned)
// ---------------------------------------------------------------------------------------

/// The ring of S = `ring_slots(rows)` slots: slot s is [activation image: `rows` x 128 B
/// fp16, 128B-swizzled] at s x image bytes from offset 0, and [weights: `block_n` rows x
/// 32 B e2m1][scales: `block_n` / 128 tiles x 512 B] at s x raw bytes after the S images
/// (the images stay 1024-aligned whatever the raw part's size); then the mbarriers:
/// full[S], then empty[S].
const fn raw_offset(tile: u32) -> u32 {
    ring_slots(tile) * act_stage_bytes(tile)
}
const fn full_offset(tile: u32) -> u32 {
    raw_offset(tile) + ring_slots(tile) * raw_stage_bytes(tile)
}
const fn empty_offset(tile: u32) -> u32 {
    full_offset(tile) + ring_slots(tile) * MBARRIER_BYTES
}
/// Total dynamic shared memory of a CTA with tiles of key `tile`.
pub const fn smem_bytes(tile: u32) -> u32 {
    empty_offset(tile) + ring_slots(tile) * MBARRIER_BYTES
}
/// The most any sm90v2 launch uses (wide tiles).
pub const SMEM_BYTES: u32 = smem_bytes(Wide::TILE);

const _: () = {
    let mut i = 0;
    while i < TILES.len() {
        let tile = TILES[i];
        assert!(smem_bytes(tile) <= SMEM_BYTES, "wide tiles use the most");
        assert!(act_stage_bytes(tile).is_multiple_of(Swizzle::B128.repeat_bytes()), "images stay 1024-aligned");
        assert!(raw_stage_bytes(tile).is_multiple_of(CHUNK), "16-byte copies into the raw part");
        assert!(weight_chunks(tile).is_multiple_of(PRODUCER_THREADS) && scale_chunks(tile) <= PRODUCER_THREADS);
        assert!(
            block_n(tile).is_multiple_of(layout::TILE_ROWS) || layout::TILE_ROWS.is_multiple_of(block_n(tile)),
            "whole scale tiles per stage, or a whole fraction of one (thin tiles: rows n0 % 128..)"
        );
        assert!(full_offset(tile).is_multiple_of(8), "mbarriers are 8-byte aligned");
        assert!(smem_bytes(tile) <= 227 * 1024, "fits the 227 KiB a Hopper CTA may use");
        assert!(rows_of(tile).is_multiple_of(8) && rows_of(tile) <= 256, "a valid wgmma N");
        // The consumers wait for stage s during stage s - 1 and release stage s - 1's
        // slot (any but a group's last) only during stage s; the producer announces s after
        // refilling the slot of stage s + lag - slots, which must therefore be s - 2 or
        // older, or neither side moves.
        assert!(producer_lag(tile) + 2 <= ring_slots(tile), "the producer announces a stage the consumers can reach");
        assert!(
            matches!(stages_per_drain(tile), 2..=MAX_STAGES_PER_DRAIN),
            "`consumer` unrolls its loop over 4 stages"
        );
        assert!(matches!(producer_lag(tile), 2..=4), "the lags `gemm` instantiates `producer` with");
        i += 1;
    }
};

/// Arrivals that fill a stage: the producer thread 0's `arrive.expect_tx` (the image's
/// bytes do the rest), and each producer thread's arrival once its weight copies landed.
const FULL_ARRIVALS: u32 = 1 + PRODUCER_THREADS;
/// Arrivals that empty it: every consumer thread that multiplies the stage.
const fn empty_arrivals(tile: u32) -> u32 {
    CONSUMER_THREADS / stage_step(tile)
}

/// The dynamic shared memory of a CTA with tiles of key `tile`.
#[derive(Clone, Copy)]
struct Smem {
    base: SmemAddr,
    tile: u32,
}

impl Smem {
    fn act(self, slot: u32) -> SmemAddr {
        self.base.offset(slot * act_stage_bytes(self.tile))
    }
    /// The raw weights of slot `slot`: row r of the tile at 32·r.
    fn weights(self, slot: u32) -> SmemAddr {
        self.base.offset(raw_offset(self.tile) + slot * raw_stage_bytes(self.tile))
    }
    /// The weight scales of slot `slot`: scale t of tile row r at `layout::offset(r, t, 4)`.
    fn scales(self, slot: u32) -> SmemAddr {
        self.weights(slot).offset(weight_stage_bytes(self.tile))
    }
    /// Guards "slot holds this stage's activations, weights and scales".
    fn full(self, slot: u32) -> Mbarrier {
        Mbarrier(self.base.offset(full_offset(self.tile) + slot * MBARRIER_BYTES))
    }
    /// Guards "no wgmma reads the slot any more; the producer may refill it".
    fn empty(self, slot: u32) -> Mbarrier {
        Mbarrier(self.base.offset(empty_offset(self.tile) + slot * MBARRIER_BYTES))
    }
}

// ---------------------------------------------------------------------------------------
// Seven tile kinds: wide (256 activation rows), prefill and thin (128), medium, narrow and
// thin medium (64), decode (16)
// ---------------------------------------------------------------------------------------

/// The activation rows of a tile ([`Plan::new`] picks one kind per call): 256, 128, 64 or
/// 16. The wgmma N of an accumulator block is half the tile's rows on wide, prefill,
/// narrow and thin tiles (one wgmma covers both blocks), else the tile's rows. At decode
/// sizes (M = 1..16) 128-row tiles would multiply mostly zero rows: the 16-row tile keeps the
/// same weight stream and conversion and does 1/8 of the MMA work, on 1/8 of the
/// activation bytes and accumulators; the 64-row tile does half. The wide tile halves the
/// weight rows instead and multiplies each warpgroup's converted fragments twice.
pub trait Rows: Copy {
    /// Activation rows per tile.
    const ROWS: u32;
    /// The tile's key, which every size function of this file takes: its activation rows,
    /// plus [`NARROW`] for the narrow 64-row tiles (128 weight rows instead of 256) or
    /// [`THIN`] for the thin ones (64 weight rows, the warpgroups on alternate stages).
    const TILE: u32 = Self::ROWS;
    /// One m64 block's fp32 accumulators per thread: 64 x ROWS / 128.
    type Acc: Copy;
    const ZERO: Self::Acc;
    /// `wgmma.mma_async m64nROWSk16` (RS) on `E` operands into `acc`.
    ///
    /// # Safety
    /// As [`wgmma::mma_async_rs_m64n128`].
    unsafe fn mma<E: Element>(acc: &mut Self::Acc, a: &[u32; 4], b: SmemDesc, accumulate: bool);
    /// One k16 step of both accumulator blocks: block i multiplies the fragments `a[i]`
    /// by the activations `b[i]`. Two wgmmas, or on prefill and wide tiles (the same
    /// fragments, the image's two halves) one wgmma of twice the N (`m64n128k16`,
    /// `m64n256k16`), whose accumulators are the two blocks' side by side.
    ///
    /// # Safety
    /// As [`wgmma::mma_async_rs_m64n128`].
    #[inline(always)]
    unsafe fn mma_blocks<E: Element>(
        acc: &mut [Self::Acc; BLOCKS],
        a: [&[u32; 4]; BLOCKS],
        b: [SmemDesc; BLOCKS],
        accumulate: bool,
    ) {
        let [acc_0, acc_1] = acc;
        // SAFETY: forwarded from the caller.
        unsafe {
            Self::mma::<E>(acc_0, a[0], b[0], accumulate);
            Self::mma::<E>(acc_1, a[1], b[1], accumulate);
        }
    }
    /// [`wgmma::fence_operand`] on `acc`.
    fn fence_operand(acc: &mut Self::Acc);
    /// Stages block `b`'s accumulators through the epilogue into the tile's shared-memory
    /// copy of C (unrolled: a runtime index would put them in local memory; see
    /// `Place::stage_bits`).
    fn stage(place: &Place, staged: SmemAddr, b: u32, acc: &Self::Acc);
    /// Stores block `b`'s accumulators as f32 quads at `partial` (unrolled), those of the
    /// tile's first `live_rows` activation rows (the rest are padding past M, which no
    /// reduce thread reads).
    fn store_partial(partial: u64, b: u32, ctid: u32, live_rows: u32, acc: &Self::Acc);
    /// Thin tiles' sum of the two warpgroups' accumulators through `summed` (called by both
    /// once neither reads the ring any more): the warpgroup that `gives` stores its quads
    /// there; after a barrier of both, the other adds them to its own in the same fragment
    /// positions (warpgroup 0's even stages plus warpgroup 1's odd ones, in that order).
    fn exchange(summed: SmemAddr, thread: u32, gives: bool, acc: &mut [Self::Acc; BLOCKS]);
}

/// The 16-bit type the tensor cores multiply: the activations' type (fp16 for NVFP4 A,
/// whose prologue dequantizes it to fp16, and for fp16 W4A16; bf16 for bf16 W4A16), and
/// how each type makes its weight pairs. Every weight is e2m1 · e4m3: zero or a value with
/// at most 6 significant bits, exact in either type.
pub trait Element: Copy {
    /// bf16 operands (`wgmma ... .bf16.bf16`) rather than fp16.
    const BF16: bool;
    /// The power of two the weights carry besides their value: the epilogue multiplies the
    /// f32 sums by it, exactly.
    const UNDO: f32;
    /// Whether warpgroup 1 runs its stage pairs a stage after warpgroup 0's (see
    /// `consumer`), so that the two never drain their wgmmas at the same time: in entry
    /// points of this type alone ([`Alone`]); in an entry with both loops it moved the
    /// fp16 loop's time (docs/perf-notes.md, session 30).
    const PAIRS_A_STAGE_APART: bool;
    /// Compiled into an entry point of this type alone ([`Alone`]).
    const ALONE: bool = false;
    /// A block's scale pair, from its e4m3 byte in both bytes of the low half of `twice`
    /// (see [`scale_byte_twice`]).
    fn scale(twice: u32) -> u32;
    /// Pair `H[i]` (i in 0..8) of a thread's 16 weight values (two words of e2m1 codes: value
    /// v in bits 4(v % 8)..4(v % 8) + 3 of word v / 8), times its block's `scale`.
    fn weight(words: u64, i: u32, scale: u32) -> u32;
    /// Eight 16-bit activations k0..k7 of one word quad (two per word, the even one low) as
    /// the pairs H[4q..4q + 4] that [`Element::weight`] makes of the matching weights.
    fn activations(w: [u32; 4]) -> [u32; 4];
}

/// The low 16-bit value of a word (of two 16-bit activations).
const LOW: u32 = 0x0000_FFFF;

/// fp16 operands.
#[derive(Clone, Copy, Debug)]
pub struct F16;
/// bf16 operands (bf16 W4A16).
#[derive(Clone, Copy, Debug)]
pub struct Bf16;

impl Element for F16 {
    const BF16: bool = false;
    const UNDO: f32 = F16_WEIGHT_UNDO;
    /// No: no gain on an H100 (128x7168x16384 60.24-60.59 against 60.10-60.40 us,
    /// docs/perf-notes.md, session 30).
    const PAIRS_A_STAGE_APART: bool = false;
    /// fp16(sf) itself, without the 64 that would undo the e4m3 trick's 2^-6 (`pair`):
    /// the weights stay value · sf · 2^-6, exact (at least 2^-16 with at most 6 significant
    /// bits, where fp16 reaches 2^-24), and the epilogue takes the 64, once per output
    /// instead of one `mul.rn.f16x2` per row and stage (session 29).
    #[inline(always)]
    fn scale(twice: u32) -> u32 {
        cvt::f16x2_from_e4m3x2(twice as u16)
    }
    /// The e4m3 trick (`pair`): H = (k0, k2), (k4, k6), (k1, k3), (k5, k7) of each word.
    #[inline(always)]
    fn weight(words: u64, i: u32, scale: u32) -> u32 {
        h(words, i, scale)
    }
    /// (k0, k2), (k4, k6), (k1, k3), (k5, k7), as `pair` makes them of converted codes.
    #[inline(always)]
    fn activations(w: [u32; 4]) -> [u32; 4] {
        [
            (w[0] & LOW) | (w[1] << 16),
            (w[2] & LOW) | (w[3] << 16),
            (w[0] >> 16) | (w[1] & !LOW),
            (w[2] >> 16) | (w[3] & !LOW),
        ]
    }
}

/// What the fp16 weights carry: the e4m3 trick's 2^-6 (see `impl Element for F16`).
const F16_WEIGHT_UNDO: f32 = 64.0;
/// The bf16 weights' scale, 2^119 (see `impl Element for Bf16`), and what it leaves on
/// every product.
const TWO_POW_119: f32 = f32::from_bits((F32_EXPONENT_BIAS + 119) << F32_MANTISSA_BITS);
const F32_EXPONENT_BIAS: u32 = 127;
const F32_MANTISSA_BITS: u32 = 23;
const BF16_WEIGHT_UNDO: f32 = 128.0;
/// Where an e2m1 code's magnitude bits (0..2) and sign (bit 3) go in a bf16 (bits 8..6 and
/// 15), and the masks of those bits in a pair.
const BF16_MAGNITUDE_SHIFT: u32 = 6;
const BF16_SIGN_SHIFT: u32 = 12;
const BF16_CODE_MAGNITUDES: u32 = 0x01C0_01C0;
const BF16_SIGNS: u32 = 0x8000_8000;
/// The codes of a pair (nibbles 0 and 4 of a word), and the multiplier that puts two
/// copies of each, shifted by [`BF16_MAGNITUDE_SHIFT`] and [`BF16_SIGN_SHIFT`], in one
/// product: the copies' bits (6..9 and 12..15 of each half) do not overlap, so the
/// product is their OR, with no carry.
const BF16_PAIR_CODES: u32 = 0x000F_000F;
const BF16_PLACE: u32 = (1 << BF16_MAGNITUDE_SHIFT) | (1 << BF16_SIGN_SHIFT);
/// The pairs whose codes [`BF16_PLACE`] (shifted right by 4 per pair) moves left.
const BF16_MULTIPLIED_PAIRS: u32 = 2;
const _: () = assert!(TWO_POW_119 == (1u128 << 119) as f32);

impl Element for Bf16 {
    const BF16: bool = true;
    const UNDO: f32 = BF16_WEIGHT_UNDO;
    /// Yes: its longer conversion leaves a drained warpgroup longer without wgmmas in flight.
    /// On an H100 (docs/perf-notes.md, session 30), in the entries with both loops:
    /// 128x7168x16384 62.05-62.19 against 63.76-64.37 us, 2304x4608x7168 226.1-226.7
    /// against 228.0-229.0; but there it cost the fp16 loop 0.3-0.7 us, so only the wide
    /// tiles' bf16 entry does it.
    const PAIRS_A_STAGE_APART: bool = true;
    /// sf · 2^119, exact in bf16 (4 significant bits; 448 · 2^119 < 2^128).
    #[inline(always)]
    fn scale(twice: u32) -> u32 {
        let sf = cvt::mul_f32(cvt::f32_from_f16(cvt::f16x2_from_e4m3x2(twice as u16) as u16), TWO_POW_119);
        cvt::bf16x2_from_f32(sf, sf)
    }
    /// Straight from the codes, no conversion instruction: an e2m1 code's sign to bit 15 and
    /// its magnitude bits (e1 e0 m) to bits 8..6 make the bf16 of value · 2^-126 (e1 e0
    /// lands in the exponent field, m in the top mantissa bit; the code 0.5 is the bf16
    /// subnormal 2^-127, which `mul.rn.bf16x2` keeps on an H100, scripts/probes/bf16mul.cu),
    /// and one bf16 multiply by sf · 2^119 gives value · sf · 2^-7, exactly. `H[i]` of a word
    /// is (k_j, k_j+4) for j = i % 4, nibbles j and j + 4. For j = 0, 1 both codes move
    /// left: a mask keeps them, one integer multiply by 2^(6 - 4j) + 2^(12 - 4j) makes a copy
    /// of each for its magnitude bits and one for its sign, a mask keeps those bits. For j =
    /// 2, 3 the magnitudes move right: a shift each way and two masks (j = 3's sign is already
    /// at bit 15, so one shift). Thirteen integer instructions a word (besides its four bf16
    /// multiplies), two fewer than with shifts for every pair (a shared `word >> 8` for j =
    /// 2, 3, as many, made the skinny kernel spill).
    /// On an H100 (docs/perf-notes.md, session 29), against shifts for every pair:
    /// 128x7168x16384 bf16 W4A16 66.7-67.2 → 64.3-65.1 us, 2304x4608x7168 229.9-230.3 →
    /// 224.8-225.7 (measured with the shared shift; the committed form then measured level
    /// with it, 63.7-63.8 against 63.5 and 224.7-224.9 against 224.6).
    #[inline(always)]
    fn weight(words: u64, i: u32, scale: u32) -> u32 {
        let (word, j) = ((words >> (32 * (i / 4))) as u32, i % 4);
        let bits = if j < BF16_MULTIPLIED_PAIRS {
            let codes = word & (BF16_PAIR_CODES << (4 * j));
            codes.wrapping_mul(BF16_PLACE >> (4 * j)) & (BF16_CODE_MAGNITUDES | BF16_SIGNS)
        } else {
            let codes = word >> (4 * j);
            ((codes << BF16_MAGNITUDE_SHIFT) & BF16_CODE_MAGNITUDES) | ((codes << BF16_SIGN_SHIFT) & BF16_SIGNS)
        };
        cvt::mul_bf16x2(bits, scale)
    }
    /// (k0, k4), (k1, k5), (k2, k6), (k3, k7).
    #[inline(always)]
    fn activations(w: [u32; 4]) -> [u32; 4] {
        [
            (w[0] & LOW) | (w[2] << 16),
            (w[0] >> 16) | (w[2] & !LOW),
            (w[1] & LOW) | (w[3] << 16),
            (w[1] >> 16) | (w[3] & !LOW),
        ]
    }
}

/// Element type `E` in a GEMM entry point of its own, without the other type's loop: both
/// entries of wide tiles (`nvfp4_gemm_sm90v2_wide`, `nvfp4_gemm_sm90v2_wide_bf16`, see
/// [`entry_per_type`]), and the bf16 entries of prefill tiles (`nvfp4_gemm_sm90v2_bf16`)
/// and of thin tiles (`nvfp4_gemm_sm90v2_thin_bf16`, `nvfp4_gemm_sm90v2_thin_medium_bf16`),
/// whose main entries keep both loops. Its loop is `E`'s; only `consumer` tells the two
/// apart (pairs a stage apart where `E` asks for it and both warpgroups take every stage).
///
/// Why prefill and thin tiles keep an entry with both loops: on an H100 the
/// prefill tiles' fp16 loop ran slower alone than beside the bf16 loop (docs/perf-notes.md,
/// session 30: 128x7168x16384 60.9-61.8 against 60.1-61.0 us), while their bf16 loop ran
/// faster alone, a stage apart (session 31: bf16 W4A16 128x7168x16384 62.7-63.5 against
/// 63.7-64.4 us, 96x7168x16384 61.4-61.5 against 62.6-62.7). So NVFP4 and fp16 W4A16 calls
/// keep the entry with both loops, whose SASS stayed byte for byte as measured
/// (`scripts/sass-diff.sh`), and bf16 calls take this one. On thin tiles, with no stage
/// skew, the bf16 loop alone ran faster too (session 31: 128x7168x2048 17.7-17.9 against
/// 18.5-18.8 us, 64x7168x2048 15.3-15.4 against 15.7-16.7); their fp16 loop alone
/// measured within the spread (session 32, the same entry for both rows: NVFP4
/// 128x7168x2048 17.2-17.3 against 17.3-18.3 us, but fp16 W4A16 17.3-17.7 against
/// 17.2), so it stays beside the bf16 one. (Medium tiles keep one
/// entry: their bf16 loop alone, a stage apart, ran slower on 64x7168x16384 in session 30,
/// and in phase gained at most 0.4 us in session 31. Decode tiles' bf16 loop has not been
/// measured alone.)
#[derive(Clone, Copy, Debug)]
pub struct Alone<E>(E);
impl<E: Element> Element for Alone<E> {
    const BF16: bool = E::BF16;
    const UNDO: f32 = E::UNDO;
    const PAIRS_A_STAGE_APART: bool = E::PAIRS_A_STAGE_APART;
    const ALONE: bool = true;
    #[inline(always)]
    fn scale(twice: u32) -> u32 {
        E::scale(twice)
    }
    #[inline(always)]
    fn weight(words: u64, i: u32, scale: u32) -> u32 {
        E::weight(words, i, scale)
    }
    #[inline(always)]
    fn activations(w: [u32; 4]) -> [u32; 4] {
        E::activations(w)
    }
}
impl<E: Element> Loops for Alone<E> {
    const BOTH: bool = false;
    type One = Alone<E>;
}

/// What the f32 sums of a call with activations of format code `a_format` carry besides
/// their value (see [`Element::UNDO`]).
pub fn undo(a_format: u32) -> f32 {
    if a_format == AFormat::Bf16.code() { Bf16::UNDO } else { F16::UNDO }
}

/// Defines a tile height: its marker type and [`Rows`] impl (`$acc` accumulators per
/// block, `$quads` 16-byte partial quads of them, the fp16 and bf16 RS wgmmas of that N;
/// with `both blocks:`, the fp16 and bf16 wgmmas of twice that N that [`Rows::mma_blocks`]
/// issues once for both blocks, which then share their fragments).
macro_rules! tile_rows {
    ($(#[$doc:meta])* $name:ident, $rows:literal $(| $flag:ident)?, $acc:literal, $quads:literal, $f16:ident, $bf16:ident
        $(, both blocks: $f16_2:ident, $bf16_2:ident)?) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name;

        const _: () = assert!(
            WGMMA_M * block_rows(<$name as Rows>::TILE) / WARPGROUP == $acc && quads(<$name as Rows>::TILE) == $quads
        );

        impl Rows for $name {
            const ROWS: u32 = $rows;
            $(const TILE: u32 = $rows | $flag;)?
            type Acc = [f32; $acc];
            const ZERO: [f32; $acc] = [0.0; $acc];
            #[inline(always)]
            unsafe fn mma<E: Element>(acc: &mut [f32; $acc], a: &[u32; 4], b: SmemDesc, accumulate: bool) {
                // SAFETY: forwarded from the caller.
                unsafe {
                    match E::BF16 {
                        true => wgmma::$bf16(acc, a, b, accumulate),
                        false => wgmma::$f16(acc, a, b, accumulate),
                    }
                }
            }
            $(
            /// The blocks are the halves of one accumulator of twice the N: the same
            /// fragments (`a[1]` is `a[0]`) against the image's two halves, which lie one
            /// after the other (`b[1]` is `b[0]` half the rows on), so one wgmma covers
            /// both.
            #[inline(always)]
            unsafe fn mma_blocks<E: Element>(
                acc: &mut [[f32; $acc]; BLOCKS],
                a: [&[u32; 4]; BLOCKS],
                b: [SmemDesc; BLOCKS],
                accumulate: bool,
            ) {
                debug_assert!(core::ptr::eq(a[0], a[1]), "both blocks multiply the same fragments");
                // SAFETY: `[[f32; N]; 2]` and `[f32; 2N]` have the same layout.
                let both = unsafe { &mut *(acc as *mut [[f32; $acc]; BLOCKS]).cast::<[f32; 2 * $acc]>() };
                // SAFETY: forwarded from the caller.
                unsafe {
                    match E::BF16 {
                        true => wgmma::$bf16_2(both, a[0], b[0], accumulate),
                        false => wgmma::$f16_2(both, a[0], b[0], accumulate),
                    }
                }
            }
            )?
            #[inline(always)]
            fn fence_operand(acc: &mut [f32; $acc]) {
                wgmma::fence_operand(acc);
            }
            #[inline(always)]
            #[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` literals
            fn stage(place: &Place, staged: SmemAddr, b: u32, acc: &[f32; $acc]) {
                if place.epilogue.adds_bias() {
                    let bias = place.block_bias(b);
                    seq_macro::seq!(V in 0..$acc {
                        place.stage_biased(staged, b, V, acc[V], bias[(V / 2) % 2]);
                    });
                } else {
                    seq_macro::seq!(V in 0..$acc {
                        place.stage_unbiased(staged, b, V, acc[V]);
                    });
                }
            }
            #[inline(always)]
            #[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` literals
            fn exchange(summed: SmemAddr, thread: u32, gives: bool, acc: &mut [[f32; $acc]; BLOCKS]) {
                let at = |bq: u32| summed.offset((bq * WARPGROUP + thread) * CHUNK);
                seq_macro::seq!(B in 0..2 {
                    seq_macro::seq!(Q in 0..$quads {
                        let bq = B * $quads + Q;
                        if gives {
                            memory::st_shared_v4_b32(at(bq), [
                                acc[B][4 * Q].to_bits(), acc[B][4 * Q + 1].to_bits(),
                                acc[B][4 * Q + 2].to_bits(), acc[B][4 * Q + 3].to_bits(),
                            ]);
                        }
                    });
                });
                // (`barrier.sync`: ptxas puts a copy of the barrier in each arm.)
                barrier::sync_unaligned(BARRIER_CTA, CONSUMER_THREADS);
                if !gives {
                    seq_macro::seq!(B in 0..2 {
                        seq_macro::seq!(Q in 0..$quads {
                            let bq = B * $quads + Q;
                            let other = memory::ld_shared_v4_b32(at(bq));
                            seq_macro::seq!(E in 0..4 {
                                acc[B][4 * Q + E] += f32::from_bits(other[E]);
                            });
                        });
                    });
                }
            }
            #[inline(always)]
            #[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` literals
            fn store_partial(partial: u64, b: u32, ctid: u32, live_rows: u32, acc: &[f32; $acc]) {
                seq_macro::seq!(Q in 0..$quads {
                    let bq = b * quads(Self::TILE) + Q;
                    if quad_m(Self::TILE, bq, ctid) < live_rows {
                        memory::st_global_v4_b32(
                            partial + partial_offset(Self::TILE, bq, ctid),
                            [acc[4 * Q].to_bits(), acc[4 * Q + 1].to_bits(), acc[4 * Q + 2].to_bits(), acc[4 * Q + 3].to_bits()],
                        );
                    }
                });
            }
        }
    };
}

tile_rows!(
    /// 256-row tiles, for M above 128: 128 weight rows, each warpgroup's 64 converted once
    /// for both 128-row halves of the activations (one `wgmma m64n256k16` per k16 step,
    /// see [`Rows::mma_blocks`]): half the conversion and raw weights per MMA of a 128-row
    /// tile.
    Wide, 256, 64, 16, mma_async_rs_m64n128, mma_async_rs_bf16_m64n128,
    both blocks: mma_async_rs_m64n256, mma_async_rs_bf16_m64n256
);
tile_rows!(
    /// 128-row tiles, for M from 65 to 128 (and above, where wide tiles would pad more, or
    /// would split K where one wave of these is no slower, [`ONE_WAVE_MAX_STAGES`]):
    /// 128 weight rows, each warpgroup's 64 multiplied by both 64-row halves of the
    /// activations at once (one `wgmma m64n128k16` per k16 step, see [`Rows::mma_blocks`]).
    Prefill, 128, 32, 8, mma_async_rs_m64n64, mma_async_rs_bf16_m64n64,
    both blocks: mma_async_rs_m64n128, mma_async_rs_bf16_m64n128
);
tile_rows!(
    /// 64-row tiles, for M from 17 to 64 where K is long (see [`Plan::new`]).
    Medium, 64, 32, 8, mma_async_rs_m64n64, mma_async_rs_bf16_m64n64
);
tile_rows!(
    /// Narrow 64-row tiles, for M from 17 to 64 where K is short but thin tiles would walk
    /// too many stages (see [`Plan::new`]): 128 weight rows, each warpgroup's 64 multiplied
    /// by both 32-row halves of the activations at once (one `wgmma m64n64k16` per k16
    /// step, see [`Rows::mma_blocks`]).
    Narrow, 64 | NARROW, 16, 4, mma_async_rs_m64n32, mma_async_rs_bf16_m64n32,
    both blocks: mma_async_rs_m64n64, mma_async_rs_bf16_m64n64
);
tile_rows!(
    /// Thin 128-row tiles, for M from 65 to 128 where K is short (see [`Plan::new`]): 64
    /// weight rows, which both warpgroups convert, each for alternate stages, multiplied
    /// by both 64-row halves of the activations at once (one `wgmma m64n128k16` per k16
    /// step, see [`Rows::mma_blocks`]).
    Thin, 128 | THIN, 32, 8, mma_async_rs_m64n64, mma_async_rs_bf16_m64n64,
    both blocks: mma_async_rs_m64n128, mma_async_rs_bf16_m64n128
);
tile_rows!(
    /// Thin 64-row tiles, for M from 17 to 64 where K is short (see [`Plan::new`]): 64
    /// weight rows, which both warpgroups convert, each for alternate stages, multiplied
    /// by both 32-row halves of the activations at once (one `wgmma m64n64k16` per k16
    /// step, see [`Rows::mma_blocks`]).
    ThinMedium, 64 | THIN, 16, 4, mma_async_rs_m64n32, mma_async_rs_bf16_m64n32,
    both blocks: mma_async_rs_m64n64, mma_async_rs_bf16_m64n64
);
tile_rows!(
    /// 16-row tiles, for M up to 16.
    Decode, 16, 8, 2, mma_async_rs_m64n16, mma_async_rs_bf16_m64n16
);

/// Register quads (4 accumulators, one 16-byte partial store) per accumulator block.
const fn quads(tile: u32) -> u32 {
    WGMMA_M * block_rows(tile) / WARPGROUP / 4
}

// ---------------------------------------------------------------------------------------
// Work decomposition and workspace
// ---------------------------------------------------------------------------------------

/// At most this many CTAs share a tile's K stages (decode tiles: their partials are 1/8
/// the size)...
const MAX_SPLITS: u32 = 8;
const MAX_DECODE_SPLITS: u32 = 16;
/// Decode CTAs an SM holds at once (see [`splits`]).
const DECODE_CTAS_PER_SM: u32 = 2;
const _: () = assert!(
    DECODE_CTAS_PER_SM * smem_bytes(Decode::TILE) <= 228 * 1024 && DECODE_CTAS_PER_SM * THREADS <= 2048,
    "two decode CTAs fit an SM's shared memory and threads"
);
/// ...and each gets at least this many stages, so the partials' traffic stays small.
const MIN_STAGES_PER_SPLIT: u32 = 4;
/// What stream-K's partials cost ([`Plan::stream_k_beats`]), in stages of the tile (a
/// wide stage ~0.7 us on an H100, a 128-row one ~0.4 us): the reduce launch (in wide
/// stages), and the partials' stores and sum (128 KiB each on wide tiles, 64 KiB on
/// 128-row ones, whose stages take about half as long), fitted to docs/perf-notes.md,
/// session 33 (216 partials of 72 wide tiles cost ~30 stages).
const REDUCE_STAGES: u32 = 4;
const PARTIALS_PER_STAGE: u32 = 8;
/// The same against an even split of a wave at most half full
/// ([`Plan::stream_k_beats_even_split`]), fitted per tile kind to the plans measured both
/// ways on an H100: medium tiles 8 partials per stage (docs/perf-notes.md, session 36:
/// 64x7168x16384, 64x7168x8192, 64x14336x16384); 128-row tiles 6, the most that keeps
/// 128x7168x8192 on its even split (8 put it on stream-K, 1.7 us slower, session 35), and
/// faster than 4 on each of six plans that only 6 sends to stream-K (0.4-1.6 us, session 37).
const fn even_split_partials_per_stage(tile: u32) -> u32 {
    if tile == Prefill::TILE { 6 } else { PARTIALS_PER_STAGE }
}
/// Bytes of one split's f32 partial tile.
const fn partial_bytes(tile: u32) -> u32 {
    block_n(tile) * rows_of(tile) * F32_BYTES
}
/// Alignment of the workspace regions.
const REGION_ALIGN: u64 = 256;

/// The tile for M alone (its key, [`Rows::TILE`]): decode tiles up to [`DECODE_MAX_M`],
/// medium tiles up to [`MEDIUM_MAX_M`], prefill tiles up to [`PREFILL_MAX_M`]; above, wide
/// tiles unless they would pad M to more rows than prefill tiles do (M mod 256 in 1..=128:
/// one wide tile would be at most half full). [`Plan::new`] may take narrow or thin tiles
/// instead, or above M = 128 prefill tiles where wide ones would split K
/// ([`ONE_WAVE_MAX_STAGES`]).
pub const fn rows_for(m: u32) -> u32 {
    let wide_tail = m % Wide::ROWS;
    if m <= DECODE_MAX_M {
        Decode::TILE
    } else if m <= MEDIUM_MAX_M {
        Medium::TILE
    } else if m <= PREFILL_MAX_M || (wide_tail > 0 && wide_tail <= PREFILL_MAX_M) {
        Prefill::TILE
    } else {
        Wide::TILE
    }
}

/// CTAs per *split* tile along K (1: no tile is split) on a GPU with `sms` SMs (132 on an
/// H100 SXM or H200, 114 on an H100 PCIe, 78 on an H20: [`GemmArgs::sms`]). The tiles run
/// in waves of one CTA per SM with prefill and medium tiles (164 and 102 KiB of shared
/// memory), two with decode tiles (66 KiB, 95 registers per thread, which only stream
/// weights: twice the copies in flight took 1x7168x16384 from 67.1 to 53.4 us on an H100,
/// docs/perf-notes.md). When the last wave
/// is at most half full, its tiles ([`split_tiles`]) split their K stages over as many
/// CTAs as that wave holds, capped, each with at least `MIN_STAGES_PER_SPLIT` stages: the
/// last wave then takes a fraction of a tile's time instead of a whole one.
/// With fewer tiles than SMs that is every tile (on 132 SMs, the M = 128 benchmark shapes:
/// 56 tiles x 2, 32 x 4 and 56 x 2; on 114, 56 x 2 and 32 x 3); 2304x4608x7168's 324
/// tiles run as two whole waves of 132 and 60 tiles split in two. A last wave of wide or
/// 128-row tiles more than half full (or a single wave) runs stream-K where a cost model
/// predicts it faster ([`Decomposition::stream_k`], [`Plan::stream_k_beats`]): then
/// `splits` is the wave's CTA count, which share the last wave's tiles' stages in equal
/// runs (e.g. 512x4608x16384's 72 wide tiles on 132 CTAs, 137.3-139.3 → 115.7-118.6 us on
/// an H100, where three splits of each tile over two waves ran before, docs/perf-notes.md,
/// session 35).
#[cfg(not(target_arch = "nvptx64"))]
pub const fn splits(m: u32, n: u32, k: u32, l: u32, sms: u32) -> u32 {
    Plan::new(m, n, k, l, sms).splits()
}

/// How many tiles split their K stages (see [`splits`]): the last ones in unit order.
#[cfg(not(target_arch = "nvptx64"))]
pub const fn split_tiles(m: u32, n: u32, k: u32, l: u32, sms: u32) -> u32 {
    Plan::new(m, n, k, l, sms).split_tiles()
}

/// Workspace: the prepared activations, then one f32 partial per split of every split
/// tile. Every launch writes what it reads: nothing needs to stay zero.
#[cfg(not(target_arch = "nvptx64"))]
pub const fn workspace_bytes(m: u32, n: u32, k: u32, l: u32, sms: u32) -> u64 {
    Plan::new(m, n, k, l, sms).workspace_bytes()
}

/// The main kernel's launch: one CTA per work unit (a whole tile, or one split of a split
/// tile).
#[cfg(not(target_arch = "nvptx64"))]
pub const fn launch(m: u32, n: u32, k: u32, l: u32, sms: u32) -> Launch {
    Plan::new(m, n, k, l, sms).launch()
}

/// The entry points of a call's launches with A in `a_format`: (prologue, GEMM, reduce).
/// (Host code, as [`Plan::entries`].)
#[cfg(not(target_arch = "nvptx64"))]
pub const fn entries(m: u32, n: u32, k: u32, l: u32, sms: u32, a_format: AFormat) -> [&'static str; 3] {
    Plan::new(m, n, k, l, sms).entries(a_format)
}

/// Whether tiles of key `tile` ever run stream-K ([`Decomposition::stream_k`]): wide,
/// 128-row and medium tiles. On the others a CTA's unit is one segment at compile time.
const fn may_stream_k(tile: u32) -> bool {
    tile == Wide::TILE || tile == Prefill::TILE || tile == Medium::TILE
}

/// One call's work decomposition on one tile height. The host makes one per call
/// ([`Plan::new`] picks the height from M, [`rows_for`]) and takes every launch from it;
/// a kernel thread rebuilds it from its own entry point's height ([`Plan::on`]). The free
/// functions above are one-line shorthands.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// The tile height ([`Rows::ROWS`]).
    pub tile: u32,
    m: u32,
    n: u32,
    k: u32,
    l: u32,
    sms: u32,
}

impl Plan {
    /// The call's plan: on the tile height [`rows_for`] picks, or where K is short (no SM
    /// walks more than [`SHORT_MAX_STAGES`] stages of them) on thin tiles ([`Thin`] at M =
    /// 65..128, [`ThinMedium`] at M = 17..64), else at M = 17..64 on narrow ones
    /// ([`Narrow`]) under the same bound. (At M = 65..128 narrow tiles would make the same
    /// tiles as thin ones and convert each weight twice.) Above M = 128, where wide tiles
    /// would split K, on 128-row tiles if those make one wave of unsplit tiles predicted no
    /// slower ([`ONE_WAVE_MAX_STAGES`]).
    ///
    /// (Host code, as the free functions above that call it: kernel threads rebuild their
    /// plan with [`Plan::on`]. In the PTX these would be functions no kernel calls, and
    /// once LLVM stopped inlining every method they call into them (session 33's split
    /// rule), their plans went to local memory.)
    #[cfg(not(target_arch = "nvptx64"))]
    pub const fn new(m: u32, n: u32, k: u32, l: u32, sms: u32) -> Plan {
        let by_m = Plan::on(rows_for(m), m, n, k, l, sms);
        if by_m.tile == Wide::TILE && by_m.splits() > 1 {
            let prefill = Plan::on(Prefill::TILE, m, n, k, l, sms);
            let one_wave = prefill.splits() == 1 && prefill.ctas() <= prefill.wave();
            // What the busiest SM walks, in 128-row stages (quarters): a whole tile against a
            // wide split, plus the split's partials and reduce.
            let (whole, split) = (prefill.busiest_sm_stages(), by_m.busiest_sm_stages());
            let no_slower = 4 * whole <= WIDE_STAGE_QUARTERS * split + 4 * SPLIT_COST_STAGES;
            if one_wave && no_slower && whole <= ONE_WAVE_MAX_STAGES {
                return prefill;
            }
        }
        if m <= DECODE_MAX_M || m > PREFILL_MAX_M {
            return by_m;
        }
        let thin = Plan::on(if m > MEDIUM_MAX_M { Thin::TILE } else { ThinMedium::TILE }, m, n, k, l, sms);
        // A thin unit needs a stage for each warpgroup (a split has at least 4).
        if thin.busiest_sm_stages() <= SHORT_MAX_STAGES && k_stages(k) >= stage_step(thin.tile) {
            return thin;
        }
        let narrow = Plan::on(Narrow::TILE, m, n, k, l, sms);
        if m <= MEDIUM_MAX_M && narrow.busiest_sm_stages() <= SHORT_MAX_STAGES { narrow } else { by_m }
    }

    /// Stages the busiest SM walks: its waves of CTAs times a CTA's stages (a whole
    /// tile's, or where every tile is split, a split's). (Host code, as `Plan::new`.)
    #[cfg(not(target_arch = "nvptx64"))]
    const fn busiest_sm_stages(&self) -> u32 {
        let stages = k_stages(self.k);
        let d = self.decomposition();
        if d.stream_k {
            // The whole tiles' waves, then one run of the split tiles' stages.
            let whole_waves = (self.tiles() - d.split_tiles).div_ceil(self.wave());
            return whole_waves * stages + (d.split_tiles * stages).div_ceil(d.splits);
        }
        let per_cta = if d.split_tiles < self.tiles() { stages } else { stages.div_ceil(d.splits) };
        self.ctas().div_ceil(self.wave()) * per_cta
    }

    /// The call's plan on tiles of key `tile` ([`Rows::TILE`]).
    pub const fn on(tile: u32, m: u32, n: u32, k: u32, l: u32, sms: u32) -> Plan {
        Plan { tile, m, n, k, l, sms }
    }

    /// Tiles of the call.
    const fn tiles(&self) -> u32 {
        self.n.div_ceil(block_n(self.tile)) * self.m.div_ceil(rows_of(self.tile)) * self.l
    }

    /// CTAs of one wave (see [`splits`]; no SMs count as one).
    const fn wave(&self) -> u32 {
        let sms = if self.sms == 0 { 1 } else { self.sms };
        if self.tile == Decode::TILE { DECODE_CTAS_PER_SM * sms } else { sms }
    }

    /// [`splits`].
    pub const fn splits(&self) -> u32 {
        self.decomposition().splits
    }

    /// [`split_tiles`].
    pub const fn split_tiles(&self) -> u32 {
        self.decomposition().split_tiles
    }

    /// Whether the split tiles are shared stream-K ([`Decomposition::stream_k`]).
    pub const fn stream_k(&self) -> bool {
        self.decomposition().stream_k
    }

    /// How the tiles are shared among CTAs. A kernel thread takes it once at its start:
    /// each runtime division by the SM count is a chain of ~20 dependent instructions
    /// there, so it is computed without any.
    pub const fn decomposition(&self) -> Decomposition {
        let (tiles, wave) = (self.tiles(), self.wave());
        let tail = tiles % wave;
        let stages = k_stages(self.k);
        let by_stages = stages / MIN_STAGES_PER_SPLIT;
        let cap = if self.tile == Decode::TILE { MAX_DECODE_SPLITS } else { MAX_SPLITS };
        if tail == 0 || by_stages < 2 {
            return Decomposition::WHOLE;
        }
        if 2 * tail > wave {
            // A last wave more than half full (or a single one) of wide, 128-row or medium
            // tiles runs stream-K where the cost model predicts it faster than whole tiles.
            let stream_k = may_stream_k(self.tile) && self.stream_k_beats(tail, stages);
            return if stream_k {
                Decomposition { split_tiles: tail, splits: wave, stream_k: true }
            } else {
                Decomposition::WHOLE
            };
        }
        let by_wave = wave / tail;
        let s = if by_wave < by_stages { by_wave } else { by_stages };
        let splits = if s < cap { s } else { cap };
        // Medium and 128-row tiles split evenly may leave SMs idle for the whole call (28
        // medium tiles x 4, or 56 128-row ones x 2, on 132 SMs): stream-K shares their
        // stages over the whole wave where the model predicts it faster.
        if (self.tile == Medium::TILE || self.tile == Prefill::TILE) && self.stream_k_beats_even_split(tail, splits) {
            return Decomposition { split_tiles: tail, splits: wave, stream_k: true };
        }
        Decomposition { split_tiles: tail, splits, stream_k: false }
    }

    /// Whether stream-K over a wave can take the last wave's `tail` tiles: runs of at least
    /// `MIN_STAGES_PER_SPLIT` stages, every run boundary (CTA index times the tail's
    /// stages) within 32 bits.
    const fn stream_k_fits(&self, tail: u32) -> bool {
        let run_stages = tail as u64 * k_stages(self.k) as u64;
        run_stages >= (MIN_STAGES_PER_SPLIT * self.wave()) as u64 && run_stages * self.wave() as u64 <= u32::MAX as u64
    }

    /// Whether the last wave's `tail` tiles run faster stream-K than in `best` stages (what
    /// the busiest SM walks for them otherwise): one wave of CTAs, each an equal run of
    /// their stages, ⌈tail·stages / wave⌉, plus the reduce launch (`Plan::reduce_stages`)
    /// and the partials (`PARTIALS_PER_STAGE`; a tile's contributors make at most wave +
    /// tail - 1). Compared without dividing by the SM count (see [`Plan::decomposition`]),
    /// where `Plan::stream_k_fits`.
    pub const fn stream_k_beats(&self, tail: u32, best: u32) -> bool {
        if !self.stream_k_fits(tail) {
            return false;
        }
        let (wave, run_stages) = (self.wave(), tail as u64 * k_stages(self.k) as u64);
        let overhead = self.reduce_stages() + (wave + tail) / PARTIALS_PER_STAGE;
        overhead < best && run_stages < ((best - overhead) * wave) as u64
    }

    /// Whether the last wave's `tail` tiles (at most half a wave) run faster stream-K than
    /// split evenly `splits` ways: the busiest SM's stages and partials, tail·stages / wave +
    /// (wave + tail) / P against stages / splits + tail·splits / P (P =
    /// `even_split_partials_per_stage`; both end in the reduce launch), compared as
    /// fractions multiplied by wave·splits·P (no division), where `Plan::stream_k_fits`.
    pub const fn stream_k_beats_even_split(&self, tail: u32, splits: u32) -> bool {
        if !self.stream_k_fits(tail) {
            return false;
        }
        let (wave, stages, splits, tail) = (self.wave() as u64, k_stages(self.k) as u64, splits as u64, tail as u64);
        let p = even_split_partials_per_stage(self.tile) as u64;
        splits * (tail * stages * p + wave * (wave + tail)) < wave * (stages * p + tail * splits * splits)
    }

    /// The reduce launch in stages of the tile: about as long on every tile, twice the
    /// stages of 128 or 64 rows (whose stages take about as long) as of 256.
    const fn reduce_stages(&self) -> u32 {
        if self.tile == Wide::TILE { REDUCE_STAGES } else { 2 * REDUCE_STAGES }
    }

    /// CTAs of the main launch: one per whole tile, then those of the split tiles.
    const fn ctas(&self) -> u32 {
        let d = self.decomposition();
        self.tiles() - d.split_tiles + d.split_ctas()
    }

    /// Bytes of the prepared activations: one image per (batch, M block, K stage).
    const fn act_bytes(&self) -> u64 {
        let images = self.l as u64 * self.m.div_ceil(rows_of(self.tile)) as u64 * k_stages(self.k) as u64;
        images * act_stage_bytes(self.tile) as u64
    }

    /// [`workspace_bytes`].
    pub const fn workspace_bytes(&self) -> u64 {
        let partials = self.decomposition().partial_slots() as u64 * partial_bytes(self.tile) as u64;
        align(self.act_bytes()) + partials
    }

    /// [`launch`].
    pub const fn launch(&self) -> Launch {
        Launch { grid: [self.ctas(), 1, 1], block: [THREADS, 1, 1], dynamic_smem: smem_bytes(self.tile) }
    }

    /// The prologue's launch: one CTA per activation image, four threads per image row
    /// (and on wide tiles the image's shared-memory copy).
    pub const fn prepare_launch(&self) -> Launch {
        let (tile, rows) = (self.tile, rows_of(self.tile));
        Launch {
            grid: [self.m.div_ceil(rows) * k_stages(self.k) * self.l, 1, 1],
            block: [rows * LANES_PER_ROW, 1, 1],
            dynamic_smem: if staged_prologue(tile) { act_stage_bytes(tile) } else { 0 },
        }
    }

    /// Quads each thread of the reduce launch sums: [`REDUCE_QUADS`] where the launch then
    /// still has a CTA for every SM, else one (as on decode tiles, whose threads sum up to
    /// 16 splits of one).
    pub const fn reduce_quads(&self) -> u32 {
        let ctas = self.split_tiles() * reduce_threads_per_tile(self.tile) / REDUCE_THREADS;
        if self.tile != Decode::TILE && ctas / REDUCE_QUADS >= self.sms { REDUCE_QUADS } else { 1 }
    }

    /// The reduce launch: one thread per [`Plan::reduce_quads`] partial quads of every
    /// split tile.
    pub const fn reduce_launch(&self) -> Launch {
        let threads = self.split_tiles() * reduce_threads_per_tile(self.tile) / self.reduce_quads();
        Launch { grid: [threads / REDUCE_THREADS, 1, 1], block: [REDUCE_THREADS, 1, 1], dynamic_smem: 0 }
    }

    /// The entry points of the call's launches with A in `a_format`: (prologue, GEMM,
    /// reduce). (Host code: in the PTX it would be a function no kernel calls.)
    #[cfg(not(target_arch = "nvptx64"))]
    pub const fn entries(&self, a_format: AFormat) -> [&'static str; 3] {
        entries_of(self.tile, a_format)
    }

    /// The bodies of [`Plan::entries`], as the emulator runs them. (Host code: in the PTX
    /// it would keep a copy of every kernel body as a function no kernel calls.)
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn bodies(&self, a_format: AFormat) -> [fn(&GemmArgs); 3] {
        let bf16 = a_format == AFormat::Bf16;
        macro_rules! of {
            ($R:ty) => {{
                let tile = <$R>::TILE;
                let gemm: fn(&GemmArgs) = match (entry_per_type(tile), bf16) {
                    (_, true) if gemm_bf16_entry(tile).is_some() => gemm::<$R, Alone<Bf16>>,
                    (true, false) => gemm::<$R, Alone<F16>>,
                    _ => gemm::<$R, BothTypes>,
                };
                [prepare::<$R>, gemm, reduce::<$R>]
            }};
        }
        match self.tile {
            Decode::TILE => of!(Decode),
            Medium::TILE => of!(Medium),
            Narrow::TILE => of!(Narrow),
            Thin::TILE => of!(Thin),
            ThinMedium::TILE => of!(ThinMedium),
            Wide::TILE => of!(Wide),
            _ => of!(Prefill),
        }
    }
}

/// How a call's tiles are shared among its CTAs ([`Plan::decomposition`]): the tiles in
/// unit order, each whole on a CTA of its own, and then the last `split_tiles`, split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decomposition {
    /// Tiles whose K stages several CTAs share: the last ones in unit order.
    pub split_tiles: u32,
    /// CTAs per split tile, each a contiguous share of its stages (1: none is split); with
    /// `stream_k`, the CTAs that share the split tiles' stages among them.
    pub splits: u32,
    /// Stream-K: CTA j of the `splits` takes the j-th of as many equal runs of the split
    /// tiles' stages, in unit order (stage kb of split tile t is number t·stages + kb), so
    /// a run may end in one tile and go on in the next. Its part of each tile is a
    /// segment; a segment in split tile t stores its partial in slot j + t, so a tile's
    /// contributors lie in consecutive slots, in K order. Runs are shorter than a tile, so a
    /// CTA has one or two segments; with runs of more than half a tile (a last wave more
    /// than half full) a tile has two or three contributors, with the shorter runs of
    /// medium and 128-row tiles (a last wave at most half full) up to ⌈wave / tail⌉ + 1.
    pub stream_k: bool,
}

impl Decomposition {
    /// Every tile whole.
    pub const WHOLE: Decomposition = Decomposition { split_tiles: 0, splits: 1, stream_k: false };

    /// CTAs that work on split tiles.
    pub const fn split_ctas(&self) -> u32 {
        if self.stream_k { self.splits } else { self.split_tiles * self.splits }
    }

    /// f32 partials in the workspace: one per split of each split tile; stream-K one per
    /// slot j + t, at most (splits - 1) + (split_tiles - 1) + 1 (stream-K always has split
    /// tiles).
    pub const fn partial_slots(&self) -> u32 {
        if self.stream_k { self.splits + self.split_tiles - 1 } else { self.split_tiles * self.splits }
    }

    /// Stream-K run `j` of the split tiles' stages (`stages` per tile), in their numbering
    /// t·stages + kb: (the split tile it starts in, its first stage, its end). Runs are
    /// shorter than a tile, so it ends in that tile or the next. (j·R·S / W for R split
    /// tiles of S stages and W runs: the plan keeps W·R·S within 32 bits; the tile is
    /// j·R / W, the same as the first stage over S.)
    pub const fn run(&self, j: u32, stages: u32) -> (u32, u32, u32) {
        let run_stages = self.split_tiles * stages;
        (j * self.split_tiles / self.splits, j * run_stages / self.splits, (j + 1) * run_stages / self.splits)
    }

    /// The partials of split tile `t` (0 for the first split tile, `stages` stages each) in
    /// K order: the first one's slot and their count. Split s of a split tile is slot
    /// t·splits + s. Stream-K: run j contributes to tile t if it starts before the tile
    /// ends, j·R·S / W < (t + 1)·S, i.e. j < (t + 1)·W / R, and ends past its start,
    /// (j + 1)·R·S / W ≥ t·S + 1 (see [`Decomposition::run`]); its partial there is slot
    /// j + t.
    pub const fn contributors(&self, t: u32, stages: u32) -> (u32, u32) {
        if !self.stream_k {
            return (t * self.splits, self.splits);
        }
        let run_stages = self.split_tiles * stages;
        let first = ((t * stages + 1) * self.splits).div_ceil(run_stages) - 1;
        let last = ((t + 1) * self.splits).div_ceil(self.split_tiles) - 1;
        (first + t, last - first + 1)
    }
}

const fn align(bytes: u64) -> u64 {
    bytes.div_ceil(REGION_ALIGN) * REGION_ALIGN
}

/// K stages of `BLOCK_K` values; the last one may be partial (K need only be a multiple of
/// 16): its values past K read as zeros, in the images and in the weights.
pub const fn k_stages(k: u32) -> u32 {
    k.div_ceil(BLOCK_K)
}

/// The problem as both kernels walk it.
#[derive(Clone, Copy)]
struct Problem {
    args: GemmArgs,
    /// Activation rows per tile ([`Rows::ROWS`]).
    tile: u32,
    n_tiles: u32,
    m_tiles: u32,
    /// Tiles before the first split tile (unit order), and how the split ones are shared.
    whole_tiles: u32,
    split: Decomposition,
    /// Quads each reduce thread sums ([`Plan::reduce_quads`]).
    reduce_quads: u32,
    k_stages: u32,
    /// Bytes per row of A and B.
    row_bytes: u64,
    /// Scale factors per row.
    sf_cols: u32,
}

/// A tile and a range of its K stages, multiplied in one go.
#[derive(Clone, Copy)]
struct Segment {
    l: u32,
    m_tile: u32,
    n0: u32,
    kb_begin: u32,
    kb_end: u32,
    /// The slot of its f32 partial, or [`WHOLE_TILE`]: the segment is the whole tile, and
    /// its CTA writes C.
    slot: u32,
}

/// [`Segment::slot`] of a whole tile.
const WHOLE_TILE: u32 = u32::MAX;

/// This CTA's work: one segment, or with stream-K two (the end of one split tile and
/// the start of the next); with one, `second` is `first` again.
#[derive(Clone, Copy)]
struct Unit {
    first: Segment,
    second: Segment,
    segments: u32,
}

impl Unit {
    fn one(segment: Segment) -> Unit {
        Unit { first: segment, second: segment, segments: 1 }
    }

    /// K stages of all its segments.
    fn stages(&self) -> u32 {
        let first = self.first.kb_end - self.first.kb_begin;
        if self.segments > 1 { first + self.second.kb_end - self.second.kb_begin } else { first }
    }

    /// Segment `s` (0 or 1).
    #[inline(always)]
    fn segment(&self, s: u32) -> Segment {
        if s == 0 { self.first } else { self.second }
    }
}

impl Problem {
    fn new<R: Rows>(args: &GemmArgs) -> Problem {
        let n_tiles = args.n.div_ceil(block_n(R::TILE));
        let m_tiles = args.m.div_ceil(R::ROWS);
        let plan = Plan::on(R::TILE, args.m, args.n, args.k, args.l, args.sms);
        let split = plan.decomposition();
        Problem {
            args: *args,
            tile: R::TILE,
            n_tiles,
            m_tiles,
            whole_tiles: plan.tiles() - split.split_tiles,
            split,
            reduce_quads: plan.reduce_quads(),
            k_stages: k_stages(args.k),
            row_bytes: (args.k / 2) as u64,
            sf_cols: args.k / SF_VECTOR,
        }
    }

    /// Tiles are numbered N-fastest, then M and batch, so neighbouring tiles (which share
    /// their activation images) run side by side. Units: the whole tiles, one CTA each,
    /// then the split tiles' CTAs: split-fastest (the CTAs of a tile run side by side), or
    /// stream-K one run each ([`Decomposition::stream_k`]).
    fn unit<R: Rows>(&self) -> Unit {
        let u = special::ctaid_x();
        if u < self.whole_tiles {
            let whole = self.segment(u, 0, self.k_stages, WHOLE_TILE);
            return Unit::one(whole);
        }
        let (j, d, stages) = (u - self.whole_tiles, self.split, self.k_stages);
        if !may_stream_k(R::TILE) || !d.stream_k {
            // Split j % splits of split tile j / splits: slot j.
            let (t, split) = (j / d.splits, j % d.splits);
            let (begin, end) = (split * stages / d.splits, (split + 1) * stages / d.splits);
            return Unit::one(self.segment(self.whole_tiles + t, begin, end, j));
        }
        // Run j: stages [run_begin, run_end) of the split tiles' t·stages + kb, from split
        // tile t and, where it passes that tile's end, on in tile t + 1.
        let (t, run_begin, run_end) = d.run(j, stages);
        let tile_end = (t + 1) * stages;
        let first_end = if run_end < tile_end { run_end } else { tile_end };
        let first = self.segment(self.whole_tiles + t, run_begin - t * stages, first_end - t * stages, j + t);
        let second = self.segment(self.whole_tiles + t + 1, 0, run_end.saturating_sub(tile_end), j + t + 1);
        Unit { first, second, segments: if run_end > tile_end { 2 } else { 1 } }
    }

    /// Stages [kb_begin, kb_end) of tile `index`, its partial in `slot`.
    fn segment(&self, index: u32, kb_begin: u32, kb_end: u32, slot: u32) -> Segment {
        let (n_tile, rest) = (index % self.n_tiles, index / self.n_tiles);
        let (m_tile, l) = (rest % self.m_tiles, rest / self.m_tiles);
        Segment { l, m_tile, n0: n_tile * block_n(self.tile), kb_begin, kb_end, slot }
    }

    /// Global address of the prepared image of (batch, M block, K stage).
    fn image(&self, l: u32, m_tile: u32, kb: u32) -> u64 {
        let index = (l * self.m_tiles + m_tile) as u64 * self.k_stages as u64 + kb as u64;
        self.args.workspace + index * act_stage_bytes(self.tile) as u64
    }

    /// The f32 partial in slot `slot`.
    fn partial(&self, slot: u32) -> u64 {
        let (m, n, k, l, sms) = (self.args.m, self.args.n, self.args.k, self.args.l, self.args.sms);
        let partials = self.args.workspace + align(Plan::on(self.tile, m, n, k, l, sms).act_bytes());
        partials + slot as u64 * partial_bytes(self.tile) as u64
    }
}

// ---------------------------------------------------------------------------------------
// The conversion both kernels share
// ---------------------------------------------------------------------------------------

/// fp16 64.0 in both halves: the e4m3 trick's 2^-6, undone inside the activations' scale
/// (the weights keep it, see `impl Element for F16`).
const F16X2_SIXTY_FOUR: u32 = 0x5400_5400;

/// fp16(sf·64) in both halves of a pair, from the e4m3 scale byte sf in both bytes of the
/// low half of `twice` (exact: ≤ 28672).
#[inline(always)]
fn scale_f16x2(twice: u32) -> u32 {
    cvt::mul_f16x2(cvt::f16x2_from_e4m3x2(twice as u16), F16X2_SIXTY_FOUR)
}

/// `prmt` selector nibbles: output bytes 0 and 1 both from one source byte (the nibble
/// value, times this), output bytes 2 and 3 from the second source's byte 0 (index 4).
const PRMT_BYTE_TWICE: u32 = 0x11;
const PRMT_HIGH_HALF_FROM_B: u32 = 0x4400;

/// Byte `byte` (0..4) of `word` in both bytes of the low half, the high half zero: the
/// e4m3x2 that `cvt.rn.f16x2.e4m3x2` turns into a pair of one scale. One `prmt`, where a
/// shift, a mask and a multiply by 0x101 did it before: on an H100 128x7168x16384 61.6-61.7
/// → 60.7-60.8 us, 16x7168x16384 45.4-45.8 against 46.1-46.5 (docs/perf-notes.md, session
/// 29).
#[inline(always)]
pub fn scale_byte_twice(word: u32, byte: u32) -> u32 {
    integer::prmt(word, 0, (byte * PRMT_BYTE_TWICE) | PRMT_HIGH_HALF_FROM_B)
}

/// Pair `kind` (0..4: (k0,k2), (k4,k6), (k1,k3), (k5,k7)) of the 8 e2m1 values in `q`
/// (value i in bits 4i..4i+3), as the exact fp16 products with the scale `scale`.
///
/// Moving each code's sign to bit 7 and its magnitude bits (e1 e0 m) to bits 4..2 of a
/// byte makes a valid e4m3 byte worth value·2^-6 (the biases differ by 6; the e2m1
/// subnormal 0.5 lands on the e4m3 subnormal with the same factor); `cvt.rn.f16x2.e4m3x2`
/// turns two such bytes into two fp16, and the scale (sf·64) undoes the 2^-6.
#[inline(always)]
fn pair(q: u32, kind: u32, scale: u32) -> u32 {
    let bytes = if kind < 2 {
        ((q << 4) & 0x8080_8080) | ((q << 2) & 0x1C1C_1C1C) // even values k0, k2, k4, k6
    } else {
        (q & 0x8080_8080) | ((q >> 2) & 0x1C1C_1C1C) // odd values k1, k3, k5, k7
    };
    let half = (bytes >> (16 * (kind & 1))) as u16;
    cvt::mul_f16x2(cvt::f16x2_from_e4m3x2(half), scale)
}

/// H[i] (i in 0..8, see the header) of one thread's two words and scale.
#[inline(always)]
fn h(words: u64, i: u32, scale: u32) -> u32 {
    pair((words >> (32 * (i / 4))) as u32, i % 4, scale)
}

// ---------------------------------------------------------------------------------------
// Launch 1: the activation images
// ---------------------------------------------------------------------------------------

/// One CTA per image (batch, M block, K stage); thread 4r + t converts quarter t of
/// image row r (8 raw bytes, one scale) exactly as consumer thread t converts a weight
/// row, and stores its `H[i]` at bytes 4t of the row's chunk i, 128B-swizzled. Four
/// threads per row: 4x the loads in flight of one thread per row. (One thread per row
/// took 7.5 us on the 128-row shape, four take 7.0: the DRAM latency of A, flushed from
/// L2 by the benchmark, dominates.) On wide tiles ([`staged_prologue`]) the pairs go to a
/// shared-memory copy of the image, which the CTA then writes out in whole 16-byte
/// chunks, a warp 512 contiguous bytes.
#[inline(always)]
pub fn prepare<R: Rows>(args: &GemmArgs) {
    // The GEMM launch may be scheduled now: it prefetches weights, then waits for this
    // launch to complete before it reads an image.
    griddep::launch_dependents();
    let p = Problem::new::<R>(args);
    let image = special::ctaid_x();
    let (kb, rest) = (image % p.k_stages, image / p.k_stages);
    let (m_tile, l) = (rest % p.m_tiles, rest / p.m_tiles);
    let tid = special::tid_x();
    let (r, t) = (tid / LANES_PER_ROW, tid % LANES_PER_ROW);
    let (m, dst) = (m_tile * R::ROWS + r, p.image(l, m_tile, kb));
    if !staged_prologue(R::TILE) {
        prepare_row(args, &p, dst, m, kb, l, r, t);
        return;
    }
    // staged: [ROWS][128 B] (64 fp16 per row, 128B-swizzled) = act_stage_bytes(ROWS)
    let staged = special::dynamic_smem();
    prepare_row(args, &p, staged, m, kb, l, r, t);
    barrier::sync(BARRIER_CTA, R::ROWS * LANES_PER_ROW);
    for i in 0..IMAGE_CHUNKS_PER_THREAD {
        let chunk = (tid + i * R::ROWS * LANES_PER_ROW) * CHUNK;
        memory::st_global_v4_b32(dst + chunk as u64, memory::ld_shared_v4_b32(staged.offset(chunk)));
    }
}

/// Whether the prologue on tiles of key `tile` stages each image in shared memory and writes
/// it out in whole chunks: on wide tiles, whose ~1000 image CTAs (2304x4608x7168) are
/// bound by L2 write throughput, which 4-byte stores into 16-byte chunks of eight rows
/// per warp used up (26.5 us against 16.4 staged on an H100; docs/perf-notes.md, session
/// 16). Elsewhere a wave or two of CTAs, hidden behind the GEMM's weight prefetch, are
/// bound by their latency, to which the staging adds a barrier (0.2-0.3 us slower on the
/// M = 128 shapes).
pub const fn staged_prologue(tile: u32) -> bool {
    tile == Wide::TILE
}

/// Where the prologue's threads put their converted pairs: straight into the image in
/// global memory, or into a shared-memory copy of it ([`staged_prologue`]).
trait ImageSink: Copy {
    /// Stores `pair` at byte `offset` of the image.
    fn store(self, offset: u32, pair: u32);
}
impl ImageSink for u64 {
    #[inline(always)]
    fn store(self, offset: u32, pair: u32) {
        memory::st_global_b32(self + offset as u64, pair);
    }
}
impl ImageSink for SmemAddr {
    /// A warp's 32 stores of one pair index (8 rows, whose chunks the swizzle puts in 8
    /// different 16-byte columns) hit 32 different banks.
    #[inline(always)]
    fn store(self, offset: u32, pair: u32) {
        memory::st_shared_b32(self.offset(offset), pair);
    }
}

/// 16-byte chunks of an image each prologue thread writes out: an image row is 8 chunks,
/// made by its 4 threads.
const IMAGE_CHUNKS_PER_THREAD: u32 = ROW_F16_BYTES / CHUNK / LANES_PER_ROW;
const _: () = assert!(IMAGE_CHUNKS_PER_THREAD * LANES_PER_ROW * CHUNK == ROW_F16_BYTES);

/// Quarter t of row r (activation row m) of the image of stage kb, into `image`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn prepare_row<S: ImageSink>(args: &GemmArgs, p: &Problem, image: S, m: u32, kb: u32, l: u32, r: u32, t: u32) {
    if args.a_format != AFormat::Nvfp4.code() {
        prepare_16bit_row(args, image, m, kb, l, r, t);
        return;
    }
    let (mut words, mut scale) = (0u64, 0u32);
    // This thread's 8 bytes of the row; past K (a partial last stage) they stay zeros.
    let byte_in_row = kb * ROW_RAW_BYTES + t * THREAD_RAW_BYTES;
    if m < args.m && (byte_in_row as u64) < p.row_bytes {
        let row = args.a + (l as u64 * args.m as u64 + m as u64) * p.row_bytes;
        words = memory::ld_global_nc_u64(row + byte_in_row as u64);
        let sf = args.sfa + l as u64 * layout::batch_bytes(args.m, p.sf_cols);
        let sf = memory::ld_global_nc_u8(sf + layout::offset(m, kb * layout::TILE_COLS + t, p.sf_cols)) as u32;
        scale = scale_f16x2(scale_byte_twice(sf, 0));
    }
    // The image's row r, in the swizzled layout the GEMM's shared-memory copy keeps: the
    // XOR pattern repeats every 1024 bytes and images are 1024-aligned in shared memory,
    // so swizzling by the offset inside the image is swizzling by the shared address (the
    // XOR moves whole 16-byte chunks; 4t stays inside the chunk).
    for i in 0..PAIRS {
        store_pair(image, r, t, i, h(words, i, scale));
    }
}

/// Stores pair H[i] of thread t of image row r (see `prepare`).
#[inline(always)]
fn store_pair<S: ImageSink>(image: S, r: u32, t: u32, i: u32, pair: u32) {
    image.store(Swizzle::B128.apply(r * ROW_F16_BYTES + i * CHUNK) + t * F32_BYTES, pair);
}

/// W4A16: A is fp16 or bf16 `[L][M][K]`, already the values the image holds, so the
/// prologue only lays them out (the bits, whatever their type): thread t of row r reads
/// its 16 values (32 bytes, two 16-byte loads) and stores them as the pairs H[i] the
/// weight fragments imply, pair 4q + kind of word q (values 8q..8q+7) being (k0,k2),
/// (k4,k6), (k1,k3), (k5,k7) with the first in the low half, exactly as `pair` orders
/// converted e2m1 values. Past M or past K: zeros.
#[inline(always)]
#[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` literals
fn prepare_16bit_row<S: ImageSink>(args: &GemmArgs, image: S, m: u32, kb: u32, l: u32, r: u32, t: u32) {
    let first = kb * BLOCK_K + t * SF_VECTOR; // this thread's first value of the row
    let mut v = [0u32; 2 * 4]; // the 16 values, two per word (even value low)
    if m < args.m && first < args.k {
        let row = args.a + (l as u64 * args.m as u64 + m as u64) * args.k as u64 * F16_BYTES as u64;
        let lo = memory::ld_global_cg_v4_b32(row + (first * F16_BYTES) as u64);
        let hi = memory::ld_global_cg_v4_b32(row + ((first + SF_VECTOR / 2) * F16_BYTES) as u64);
        v = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
    }
    // Unrolled: LLVM does not always unroll an iterator over `pairs`, and a runtime index
    // puts the arrays in local memory.
    seq_macro::seq!(Q in 0..2 {
        let quad = [v[4 * Q], v[4 * Q + 1], v[4 * Q + 2], v[4 * Q + 3]];
        let pairs =
            if args.a_format == AFormat::Bf16.code() { Bf16::activations(quad) } else { F16::activations(quad) };
        seq_macro::seq!(KIND in 0..4 {
            store_pair(image, r, t, 4 * Q + KIND, pairs[KIND]);
        });
    });
}

// ---------------------------------------------------------------------------------------
// Launch 2: the GEMM
// ---------------------------------------------------------------------------------------

/// The operand types a GEMM entry point's consumer loop is compiled for: one type
/// ([`Alone`]), or [`BothTypes`].
pub trait Loops {
    /// Both types' loops, chosen per call by the activations' format.
    const BOTH: bool;
    /// The one type (when not `BOTH`).
    type One: Element;
}
/// Both operand types' loops in one entry point.
#[derive(Clone, Copy, Debug)]
pub struct BothTypes;
impl Loops for BothTypes {
    const BOTH: bool = true;
    type One = F16;
}

/// Whether tiles of key `tile` have an entry point per operand type, both on [`Alone`],
/// rather than one with both loops (prefill and thin tiles have one with both loops and a
/// bf16 one). The host's map from tile kinds to entries and bodies; the kernels' test is
/// [`Element::ALONE`]. ptxas allocates registers and schedules a whole entry at once, so
/// the two loops in one entry shape each other's code. On an H100 (docs/perf-notes.md,
/// session 30) wide tiles ran faster apart (2304x4608x7168 214.3-214.4 against 217.5-218.1
/// us, bf16 W4A16, with its pairs a stage apart, 224.0-224.1 against 229.1-230.3) while
/// 128-row tiles' fp16 loop ran slower alone (128x7168x16384 60.9-61.8 against
/// 60.1-61.0, fp16 W4A16 62.3-62.7 against 61.3-61.5).
pub const fn entry_per_type(tile: u32) -> bool {
    tile == Wide::TILE
}

/// The kernel body, run by all 384 threads of every CTA, with the consumer loop(s) `O`.
#[inline(always)]
pub fn gemm<R: Rows, O: Loops>(args: &GemmArgs) {
    let smem = Smem { base: special::dynamic_smem(), tile: R::TILE };
    let p = Problem::new::<R>(args);
    let unit = p.unit::<R>();
    let tid = special::tid_x();

    // 1. One thread sets up the rings; the fence publishes the inits to the async proxy
    //    (the bulk copies' complete_tx), the CTA barrier to every thread.
    if tid == 0 {
        for s in 0..ring_slots(R::TILE) {
            smem.full(s).init(FULL_ARRIVALS);
            smem.empty(s).init(empty_arrivals(R::TILE));
        }
        fence::mbarrier_init();
    }
    barrier::sync(BARRIER_CTA, THREADS);

    // 2. Warpgroup 2 produces: it hands its registers to the consumers and copies.
    //    The shuffle makes the warpgroup index visibly warp-uniform, so ptxas knows no
    //    warp diverges around the wgmmas (otherwise it serializes them).
    let warpgroup = warp::shfl_sync_idx(tid / WARPGROUP, 0);
    if warpgroup == CONSUMERS {
        if R::TILE == Medium::TILE {
            warp::setmaxnreg_dec::<{ producer_regs(Medium::TILE) }>();
        } else {
            warp::setmaxnreg_dec::<{ producer_regs(Prefill::TILE) }>();
        }
        let ptid = tid - CONSUMER_THREADS;
        match producer_lag(R::TILE) {
            2 => producer::<2>(smem, &p, &unit, ptid),
            3 => producer::<3>(smem, &p, &unit, ptid),
            _ => producer::<4>(smem, &p, &unit, ptid),
        }
        return;
    }
    if R::TILE == Decode::TILE {
        warp::setmaxnreg_inc::<{ consumer_regs(Decode::TILE) }>();
    } else if R::TILE == Medium::TILE {
        warp::setmaxnreg_inc::<{ consumer_regs(Medium::TILE) }>();
    } else {
        warp::setmaxnreg_inc::<{ consumer_regs(Prefill::TILE) }>();
    }
    // No `griddepcontrol.launch_dependents` here: the reduce launch (split K) is scheduled
    // when this grid completes. Signalled early, its CTAs sat on the SMs beside the GEMM's
    // until then and the GEMM ran slower (0.5-1.2 us on 16x4096x7168, 40x4096x7168,
    // 128x4096x7168 on an H100, docs/perf-notes.md, session 15).

    // 3. Warpgroups 0 and 1 consume.
    // bf16 activations take bf16 weights and bf16 wgmmas: in an entry with both loops the
    // whole loop is a second copy (the branch is on a kernel parameter, the same in every
    // thread).
    if !O::BOTH {
        consume::<R, O::One>(smem, &p, &unit, warpgroup, tid % WARPGROUP);
    } else if args.a_format == AFormat::Bf16.code() {
        consume::<R, Bf16>(smem, &p, &unit, warpgroup, tid % WARPGROUP);
    } else {
        consume::<R, F16>(smem, &p, &unit, warpgroup, tid % WARPGROUP);
    }
}

/// Consumer warpgroup `c`'s segments of the unit, one after the other, the ring going on
/// from one to the next (one copy of the loop, whatever the count).
#[inline(always)]
fn consume<R: Rows, E: Element>(smem: Smem, p: &Problem, unit: &Unit, c: u32, thread: u32) {
    let mut ring = RingPos::start(ring_slots(R::TILE));
    let mut s = 0;
    loop {
        let seg = unit.segment(s);
        s += 1;
        ring = consumer::<R, E>(smem, p, &seg, ring, s < unit.segments, c, thread);
        if s >= unit.segments {
            break;
        }
    }
}

/// Producer thread `tid`'s copies of one segment's stages, with what does not change from
/// stage to stage computed once per segment: a loop that recomputed each row's address
/// per stage (choosing the segment per stage) made 137 instructions per refilled stage
/// against 89, and took 128x7168x16384 from 59.8 to 66.5 us on an H100 (docs/perf-notes.md,
/// session 35).
#[derive(Clone, Copy)]
struct SegmentCopies {
    /// Global address of the weight row of each of the thread's chunks (chunk i is
    /// `tid + i·PRODUCER_THREADS`: row chunk / 2, half chunk % 2). A row past N is read as
    /// row N - 1 instead: accumulator row n depends on weight row n alone and rows past N
    /// are never stored, so any finite data will do.
    rows: [u64; MAX_THREAD_CHUNKS],
    /// The thread's scale chunk of stage 0 and its step per stage (both 0 where its scale
    /// tile lies past the last row block: a `src_size` of 0 writes zeros), if it has one.
    scales: u64,
    scale_step: u32,
    /// The activation image of stage 0 (thread 0's bulk copies).
    image: u64,
}

/// Weight chunks a producer thread copies per stage, at most (256 weight rows).
const MAX_THREAD_CHUNKS: usize = 4;
const _: () = {
    let mut i = 0;
    while i < TILES.len() {
        assert!(weight_chunks(TILES[i]) / PRODUCER_THREADS <= MAX_THREAD_CHUNKS as u32);
        assert!(
            weight_chunks(TILES[i]).is_multiple_of(PRODUCER_THREADS) && PRODUCER_THREADS.is_multiple_of(ROW_CHUNKS)
        );
        i += 1;
    }
};

impl SegmentCopies {
    #[inline(always)]
    fn new(p: &Problem, seg: &Segment, tid: u32) -> SegmentCopies {
        let args = &p.args;
        let weights = args.b + seg.l as u64 * args.n as u64 * p.row_bytes;
        let rows = core::array::from_fn(|i| {
            let row = (tid + i as u32 * PRODUCER_THREADS) / ROW_CHUNKS;
            weights + (seg.n0 + row).min(args.n - 1) as u64 * p.row_bytes
        });
        let chunks_per_tile = layout::TILE_BYTES / CHUNK;
        let (tile, piece) = (tid / chunks_per_tile, tid % chunks_per_tile);
        let row_block = seg.n0 / layout::TILE_ROWS + tile;
        let inside = row_block < layout::row_blocks(args.n);
        let sf = args.sfb + seg.l as u64 * layout::batch_bytes(args.n, p.sf_cols);
        let scales = sf + layout::tile_offset(row_block, 0, p.sf_cols) + (piece * CHUNK) as u64;
        SegmentCopies {
            rows,
            scales: if inside { scales } else { 0 },
            scale_step: if inside { layout::TILE_BYTES } else { 0 },
            image: p.image(seg.l, seg.m_tile, 0),
        }
    }

    /// Producer thread `tid`'s share of stage `kb`'s weights: `weight_chunks /
    /// PRODUCER_THREADS` 16-byte chunks of the tile's `block_n` x 32-byte rows (chunk c:
    /// row c / 2, half c % 2, so a warp reads 16 whole 32-byte sectors), and for the first
    /// `scale_chunks` threads one chunk of the stage's scale tiles, all with `cp.async`
    /// into slot `slot`. The caller commits them as one group and arrives on `full[slot]`
    /// once `cp.async.wait_group` has proved the group landed, so any consumer may read any
    /// producer thread's copies after waiting on `full`. Bytes past K (a partial last
    /// stage) and scale tiles past the last row block read as zeros.
    #[inline(always)]
    fn weights(&self, smem: Smem, p: &Problem, kb: u32, slot: u32, tid: u32) {
        let half = tid % ROW_CHUNKS;
        for i in 0..weight_chunks(p.tile) / PRODUCER_THREADS {
            let chunk = tid + i * PRODUCER_THREADS;
            let dst = smem.weights(slot).offset(chunk * CHUNK);
            let byte_in_row = kb * ROW_RAW_BYTES + half * CHUNK;
            rows::copy_chunk(dst, self.rows[i as usize], byte_in_row, p.row_bytes as u32, WEIGHT_L2_PREFETCH);
        }
        if tid < scale_chunks(p.tile) {
            let dst = smem.scales(slot).offset(tid * CHUNK);
            // CHUNK bytes where the step is a scale tile, none where it is 0 (one register
            // fewer than a size of its own).
            let size = self.scale_step / (layout::TILE_BYTES / CHUNK);
            cp_async::cg_16(dst, self.scales + kb as u64 * self.scale_step as u64, size);
        }
    }

    /// Producer thread 0's bulk copy: stage `kb`'s activation image into `slot`, after
    /// announcing its bytes on `full[slot]`.
    #[inline(always)]
    fn image(&self, smem: Smem, p: &Problem, kb: u32, slot: u32) {
        let full = smem.full(slot);
        let bytes = act_stage_bytes(p.tile);
        full.arrive_expect_tx(bytes);
        bulk::global_to_shared(smem.act(slot), self.image + kb as u64 * bytes as u64, bytes, full);
    }
}

/// The producer warpgroup (producer thread `ptid`): copies every stage of the unit (its
/// segments one after the other) into the ring, the weights and scales in 16-byte
/// `cp.async`s (one commit group per stage), thread 0 also the image in one bulk copy,
/// and announces each stage on its `full` barrier once `cp.async.wait_group` proved the
/// thread's copies landed, `LAG` stages after issuing them (or at the unit's end). `LAG`
/// is [`producer_lag`] of the tile (`wait_group` takes an immediate).
#[inline(always)]
fn producer<const LAG: u32>(smem: Smem, p: &Problem, unit: &Unit, ptid: u32) {
    let stages = unit.stages();
    let slots = ring_slots(p.tile);
    // Every slot is fresh: fill the ring. The weights are inputs: their copies go out
    // while the prologue may still be running, the images once it has completed.
    let prefill = slots.min(stages);
    // Each segment in loops of its own, on its `SegmentCopies` (see there why).
    let (first, second) = (&unit.first, &unit.second);
    let first_stages = first.kb_end - first.kb_begin;
    // (The second segment's copies are computed where they are needed: the producer has
    // few registers, `producer_regs`.)
    let first_copies = SegmentCopies::new(p, first, ptid);
    // The unit's stages i < prefill in the first segment (the others, if any, are the
    // second's first stages).
    let in_first = if prefill < first_stages { prefill } else { first_stages };
    for i in 0..in_first {
        first_copies.weights(smem, p, first.kb_begin + i, i, ptid);
        cp_async::commit_group();
    }
    if in_first < prefill {
        let second_copies = SegmentCopies::new(p, second, ptid);
        for i in in_first..prefill {
            second_copies.weights(smem, p, second.kb_begin + i - in_first, i, ptid);
            cp_async::commit_group();
        }
    }
    griddep::wait();
    if ptid == 0 {
        for i in 0..in_first {
            first_copies.image(smem, p, first.kb_begin + i, i);
        }
        if in_first < prefill {
            let second_copies = SegmentCopies::new(p, second, ptid);
            for i in in_first..prefill {
                second_copies.image(smem, p, second.kb_begin + i - in_first, i);
            }
        }
    }
    // `announce`: the slot (and lap) of the next stage to announce, `announced` its
    // index in the unit. All but the newest LAG groups have landed.
    let mut announce = RingPos::start(slots);
    let mut announced = 0;
    cp_async::wait_group::<LAG>();
    while announced + LAG < prefill {
        smem.full(announce.slot).arrive();
        announce.advance();
        announced += 1;
    }
    // Refill each slot once the consumers released it; after each refill, the stage LAG
    // groups older has landed. The first segment's stages past the prefill, then the
    // second's.
    let mut refill = RingPos::start(slots);
    let kbs = (first.kb_begin + in_first, first.kb_end);
    refill_segment::<LAG>(smem, p, &first_copies, kbs, &mut refill, &mut announce, ptid);
    if unit.segments > 1 {
        let kbs = (second.kb_begin + prefill - in_first, second.kb_end);
        refill_segment::<LAG>(smem, p, &SegmentCopies::new(p, second, ptid), kbs, &mut refill, &mut announce, ptid);
    }
    // Each refill announced one stage.
    announced += stages - prefill;
    // The last LAG stages.
    cp_async::wait_group::<0>();
    while announced < stages {
        smem.full(announce.slot).arrive();
        announce.advance();
        announced += 1;
    }
}

/// The producer's refill of stages `kb_begin..kb_end` of a segment: each into the slot
/// the consumers released (`refill`), then the stage `LAG` groups older announced on its
/// `full` barrier (`announce`), as in [`producer`].
#[inline(always)]
fn refill_segment<const LAG: u32>(
    smem: Smem,
    p: &Problem,
    copies: &SegmentCopies,
    (kb_begin, kb_end): (u32, u32),
    refill: &mut RingPos,
    announce: &mut RingPos,
    ptid: u32,
) {
    for kb in kb_begin..kb_end {
        smem.empty(refill.slot).wait(refill.phase);
        copies.weights(smem, p, kb, refill.slot, ptid);
        cp_async::commit_group();
        if ptid == 0 {
            copies.image(smem, p, kb, refill.slot);
        }
        refill.advance();
        cp_async::wait_group::<LAG>();
        smem.full(announce.slot).arrive();
        announce.advance();
    }
}

/// One stage of a thread's raw data: two words (as u64) and the fp16x2 scale (sf·64) per
/// row.
struct Raw {
    words: [u64; 4],
    scales: [u32; 4],
}

/// Where a consumer thread's 4 rows lie in a slot: tile rows (B·c + b)·64 + 16w + g + 8h
/// for row i = 2b + h (B weight blocks per warpgroup, block b, h = 0 for row g, 1 for
/// g + 8).
struct OwnRows {
    /// Offset of the thread's 8 bytes of each row in the weights.
    values: [u32; 4],
    /// Offset of each row's 4-byte scale group (the thread's scale is byte t of it).
    scales: [u32; 4],
    /// Rows the thread reads: 4, or 2 on prefill and wide tiles (one weight block).
    rows_read: u32,
}

impl OwnRows {
    /// Row i of the thread is row g (+8 for odd i) of warp w's 16 in weight block i / 2 of
    /// warpgroup c; on prefill and wide tiles (one weight block) rows 2 and 3 are never read.
    #[inline(always)]
    fn new(c: u32, w: u32, g: u32, t: u32, tile: u32, n0: u32) -> OwnRows {
        let weight_blocks = weight_blocks(tile);
        // On thin tiles both warpgroups read the same rows, which lie in the first or the
        // second half of their scale tile.
        let (c, scale_row0) = if stage_step(tile) > 1 { (0, n0 % layout::TILE_ROWS) } else { (c, 0) };
        let row = |i: u32| c * weight_blocks * WGMMA_M + (i / 2) * WGMMA_M + 16 * w + g + 8 * (i % 2);
        OwnRows {
            rows_read: 2 * weight_blocks,
            values: core::array::from_fn(|i| row(i as u32) * ROW_RAW_BYTES + t * THREAD_RAW_BYTES),
            scales: core::array::from_fn(|i| layout::offset(scale_row0 + row(i as u32), 0, layout::TILE_COLS) as u32),
        }
    }

    /// Reads the thread's raw data of slot `slot` (after its `full` wait).
    #[inline(always)]
    fn read<E: Element>(&self, smem: Smem, slot: u32, t: u32) -> Raw {
        let (weights, scales) = (smem.weights(slot), smem.scales(slot));
        let used = |i: usize| (i as u32) < self.rows_read;
        Raw {
            words: core::array::from_fn(|i| {
                if !used(i) {
                    return 0;
                }
                let [lo, hi] = memory::ld_shared_v2_b32(weights.offset(self.values[i]));
                lo as u64 | (hi as u64) << 32
            }),
            scales: core::array::from_fn(|i| {
                if !used(i) {
                    return 0;
                }
                E::scale(scale_byte_twice(memory::ld_shared_b32(scales.offset(self.scales[i])), t))
            }),
        }
    }
}

/// Consumer warpgroup `c` on one segment, from ring position `start`: weight rows n0 +
/// (B·c + b)·64 + 16w + g (+8) of its B weight blocks b (see [`OwnRows`]). `more`: another
/// segment follows, whose stages the producer copies into the slots this one releases.
/// Returns the ring position after the segment's stages.
#[inline(always)]
// `seq!` expands J to the literals 0..4, so `J > 0` reads `0 > 0`, `2 * J` reads `2 * 0`:
// the lints fire on the expansion, not on anything to simplify.
#[allow(clippy::identity_op, clippy::erasing_op, clippy::eq_op, clippy::absurd_extreme_comparisons)]
fn consumer<R: Rows, E: Element>(
    smem: Smem,
    p: &Problem,
    seg: &Segment,
    start: RingPos,
    more: bool,
    c: u32,
    thread: u32,
) -> RingPos {
    let (w, lane) = (thread / WARP, thread % WARP);
    let (g, t) = (lane / LANES_PER_ROW, lane % LANES_PER_ROW);
    let own = OwnRows::new(c, w, g, t, R::TILE, seg.n0);
    // The segment's stages this warpgroup multiplies: all, or on thin tiles (whose units
    // are one segment) every other one from stage c (a thin unit has at least two stages).
    let step = stage_step(R::TILE);
    let (begin, end) = (seg.kb_begin + c % step, seg.kb_end);
    let ctid = c * WARPGROUP + thread;
    // The stage's slot and lap, and its raw words and fp16x2 scales.
    let mut ring = start;
    ring.advance_by(c % step);
    smem.full(ring.slot).wait(ring.phase);
    let weight_blocks = weight_blocks(R::TILE);
    let mut raw = own.read::<E>(smem, ring.slot, t);
    let mut acc = [R::ZERO; BLOCKS];
    // A fragments, one buffer per wgmma group in flight plus the one being written:
    // step j + FRAG_BUFFERS rewrites step j's registers only after the `wait_group
    // IN_FLIGHT` that follows step j + IN_FLIGHT proved step j complete (and across the
    // loop's back-edge after `wait_group 0`).
    let mut frags = [[[0u32; 4]; BLOCKS]; FRAG_BUFFERS];
    // A do-while: every unit has at least one stage, and with no path around the loop
    // the accumulators are never merged with their initial zeros (ptxas would serialize
    // the wgmmas over the copies such a merge needs).
    let mut kb = begin;
    // Stages go in groups of `stages_per_drain` (pairs, or fours), and only a group's last
    // stage (or the unit's last) drains: each other stage's last step stays in flight
    // while the next stage's first step converts, and its slot (`held`, while `holding`)
    // is released once that step's wait proves it done.
    let (mut held, mut holding) = (0, false);
    // Slot 0's image descriptors: a stage's are these advanced to its slot (one add in the
    // loop where building each from its address took eight instructions). Block 1's
    // activations: the same rows, or on prefill and wide tiles the image's second half (its
    // rows 64..128 or 128..256, whole swizzle atoms further).
    let first_act = smem.act(0).0;
    let act_slot_0 = SmemDesc::new(first_act, LBO_UNUSED, SWIZZLE_ATOM_BYTES, Swizzle::B128);
    let act_1_slot_0 = act_slot_0.advance_in_window(block_m_step(R::TILE) * ROW_F16_BYTES);
    // One stage: its four k16 steps, with the next stage's raw data read during the last.
    // `$S` is its place in a group (0: leaves its last step in flight; then each releases
    // the slot its predecessor held; the last drains and releases its own too); `$LONE`
    // marks a stage that drains alone (no stage before it to release). Evaluates to
    // whether the unit is done.
    macro_rules! stage {
        ($S:literal, $LONE:literal) => {{
            const S: usize = $S;
            const LONE: bool = $LONE;
            // The group's last stage drains (and releases its own slot); every stage but
            // the first releases the slot its predecessor held.
            let last = LONE || S + 1 == stages_per_drain(R::TILE) as usize;
            let releases = S > 0 && !LONE;
            // (`full[ring.slot]` was waited on before `raw` was read.)
            let scales = raw.scales;
            let slot_offset = smem.act(ring.slot).0 - first_act;
            let (act, act_1) = (act_slot_0.advance_in_window(slot_offset), act_1_slot_0.advance_in_window(slot_offset));
            seq_macro::seq!(J in 0..4 {{
                const PARITY: usize = (S * STEPS as usize + J) % FRAG_BUFFERS;
                seq_macro::seq!(B in 0..2 {
                    // Rows g and g + 8 of weight block B: the thread's rows 2B and 2B + 1
                    // (prefill and wide tiles convert block 0 only, for both blocks).
                    if B < weight_blocks {
                        frags[PARITY][B] = [
                            E::weight(raw.words[2 * B], 2 * J, scales[2 * B]),
                            E::weight(raw.words[2 * B + 1], 2 * J, scales[2 * B + 1]),
                            E::weight(raw.words[2 * B], 2 * J + 1, scales[2 * B]),
                            E::weight(raw.words[2 * B + 1], 2 * J + 1, scales[2 * B + 1]),
                        ];
                    }
                });
                // The fragments were just written: order that before the wgmmas read them.
                wgmma::fence();
                // k16 step J starts 32 bytes further into each 128-byte swizzle row (a
                // ring slot's image never ends at the top of the shared window: no wrap).
                let b_desc = act.advance_in_window(J * WGMMA_K * F16_BYTES);
                let b_desc_1 = act_1.advance_in_window(J * WGMMA_K * F16_BYTES);
                // Block 1's weights: weight block 1, or on prefill and wide tiles block 0
                // again.
                let a_1 = &frags[PARITY][1 % weight_blocks as usize];
                let accumulate = kb > begin || J > 0;
                // SAFETY: `acc` and `frags[PARITY]` stay untouched until a wait covers
                // this group, and the slot is not released before then.
                unsafe {
                    R::mma_blocks::<E>(&mut acc, [&frags[PARITY][0], a_1], [b_desc, b_desc_1], accumulate);
                }
                wgmma::commit_group();
                if J + 1 < STEPS {
                    // Step J + 1's conversion overlaps the MMAs of the last IN_FLIGHT
                    // steps.
                    wgmma::wait_group::<IN_FLIGHT>();
                    if releases && J + 1 == IN_FLIGHT as usize {
                        // The previous stage's last step is complete: no wgmma of
                        // this thread reads its slot any more.
                        smem.empty(held).arrive();
                        holding = false;
                    }
                } else {
                    // The next stage's raw data (past the last stage: a harmless
                    // re-read of this one, whose slot is not refilled any more), while
                    // this step's MMA runs: not a wgmma operand.
                    let mut next = ring;
                    next.advance_by(step);
                    let next = if kb + step < end { next } else { ring };
                    smem.full(next.slot).wait(next.phase);
                    raw = own.read::<E>(smem, next.slot, t);
                    if last {
                        // Drain at the loop's back-edge: the next group's fragments are
                        // the same PTX registers as this group's, and ptxas serializes
                        // every wgmma (C7513) if one of them is redefined while any
                        // wgmma is in flight; the other warpgroup keeps the tensor core
                        // busy meanwhile.
                        wgmma::wait_group::<0>();
                        smem.empty(ring.slot).arrive();
                    } else {
                        // (A unit that ends here drains after the loop: a wait chosen
                        // by a runtime condition is a divergent path to ptxas, which
                        // then serializes every wgmma, C7518.)
                        wgmma::wait_group::<IN_FLIGHT>();
                        held = ring.slot;
                        holding = true;
                    }
                }
            }});
            ring.advance_by(step);
            kb += step;
            kb >= end
        }};
    }
    // Groups of stages until the unit is done.
    macro_rules! stage_groups {
        () => {
            'stages: loop {
                seq_macro::seq!(S in 0..4 {
                    if S < stages_per_drain(R::TILE) as usize && stage!(S, false) {
                        break 'stages;
                    }
                });
            }
        };
    }
    // The two warpgroups share the tensor core: while one drains at the end of its pair,
    // the other's wgmmas keep it busy, if their pairs are a stage apart. So where the
    // element type asks for it, on tiles where both warpgroups take every stage,
    // warpgroup 1 multiplies its first stage alone. Only in entries of one operand type
    // (`Alone`: wide tiles' two, prefill tiles' bf16 one; thin tiles' take alternate
    // stages): in one with both loops even the test, folded away, changed what ptxas made
    // of the whole entry, and its measured time (docs/perf-notes.md, session 30).
    let apart = E::ALONE && E::PAIRS_A_STAGE_APART && step == 1;
    if E::ALONE {
        // (A lone stage is a group of its own: place 0.)
        if !(apart && c == 1 && stage!(0, true)) {
            stage_groups!();
        }
    } else {
        stage_groups!();
    }
    // A segment that ended on a stage other than its group's last left the loop with its
    // last step in flight and its slot held: harmless at the unit's end (the slot is not
    // refilled), but before another segment the producer needs it back. With pairs a
    // stage apart only one warpgroup ends so: it releases the slot, so that no `empty`
    // barrier is left mid-phase at exit.
    wgmma::wait_group::<0>();
    if holding && (apart || more) {
        smem.empty(held).arrive();
    }
    R::fence_operand(&mut acc[0]);
    R::fence_operand(&mut acc[1]);

    if step > 1 {
        // Thin tiles: warpgroup 1's sum of the odd stages joins warpgroup 0's of the even
        // ones, through the idle ring (both warpgroups are past their last wgmma at the
        // first barrier), in the same fragment positions. The tile is then warpgroup 0's.
        // summed: [BLOCKS * quads][WARPGROUP][4] f32
        let summed = smem.base;
        barrier::sync(BARRIER_CTA, CONSUMER_THREADS);
        R::exchange(summed, thread, c == 1, &mut acc);
    }
    let place = Place::new(p, seg.l, seg.m_tile, seg.n0, ctid);
    let holds = ctid < holders(R::TILE);
    if seg.slot == WHOLE_TILE {
        // C through a shared-memory copy of the tile (the ring is idle once both
        // warpgroups are past their last wgmma: the first barrier), written out in whole
        // 16-byte chunks of rows.
        // staged: [ROWS][block_n + STAGED_PAD] fp16 = staged_bytes(ROWS)
        let staged = smem.base;
        barrier::sync(BARRIER_CTA, CONSUMER_THREADS);
        if holds {
            R::stage(&place, staged, 0, &acc[0]);
            R::stage(&place, staged, 1, &acc[1]);
        }
        barrier::sync(BARRIER_CTA, CONSUMER_THREADS);
        place.write_staged(staged, R::TILE, ctid);
    } else {
        // This segment's f32 partial (straight from the registers: the ring may already
        // hold the next segment's stages); the reduce launch sums a tile's partials and
        // writes C.
        let partial = p.partial(seg.slot);
        let live_rows = p.args.m - seg.m_tile * R::ROWS;
        if holds {
            R::store_partial(partial, 0, ctid, live_rows, &acc[0]);
            R::store_partial(partial, 1, ctid, live_rows, &acc[1]);
        }
    }
    ring
}

/// The first of the two activation rows (within the tile) that quad `bq` (block x quads +
/// quad) of consumer thread `ctid` holds: accumulators 4q..4q+3 of block b lie in columns
/// m and m + 1 of the accumulator (see [`Place`]). At M = 1 only the quads with m = 0
/// (1 in 8 on decode tiles) hold anything of C, and only they are stored and summed.
#[inline(always)]
const fn quad_m(tile: u32, bq: u32, ctid: u32) -> u32 {
    let (b, q) = (bq / quads(tile), bq % quads(tile));
    let t = ctid % LANES_PER_ROW;
    b * block_m_step(tile) + 8 * q + 2 * t
}

/// Offset of quad `bq` (block x QUADS + quad) of consumer thread `ctid` in a partial:
/// [block][quad][thread][4 f32], so the 256 consumer threads' 16-byte stores are contiguous.
#[inline(always)]
fn partial_offset(tile: u32, bq: u32, ctid: u32) -> u64 {
    ((bq * holders(tile) + ctid) * CHUNK) as u64
}

/// Where consumer thread `ctid`'s accumulators go in C.
///
/// wgmma's accumulator layout (PTX ISA 9.7.15.5.1): register v of warp w's thread
/// (g = lane/4, t = lane%4) holds accumulator row 16w + g + 8·((v/2)%2) and column
/// 8·(v/4) + 2t + v%2. Rows are weight rows (n), columns activation rows (m): each value
/// is one element of `C[m][n]`, through the epilogue (alpha, `bias[n]`, fp16 or bf16).
#[derive(Clone, Copy, Debug)]
pub struct Place {
    /// C of the batch.
    c: u64,
    epilogue: Epilogue,
    m_count: u32,
    n_count: u32,
    /// n of block 0, register 0; m of register 0.
    n_base: u32,
    m_base: u32,
    /// How far block b's rows lie from block 0's: in n (a weight block further), or on
    /// prefill and wide tiles in m (the second half of the activations).
    block_n_step: u32,
    block_m_step: u32,
    /// The tile's first n and m, and the bytes per row of its staged copy.
    n0: u32,
    m0: u32,
    staged_row: u32,
}

/// Output values in a 16-byte chunk.
const CHUNK_VALUES: u32 = CHUNK / OUT_BYTES;
/// Values of padding after each row of a staged C tile (one chunk): rows two apart then
/// start 8 banks apart, so a warp's 2-byte stores of one accumulator (8 consecutive n in
/// each of 4 rows two apart) fall in 16 different banks, two to a word: no conflict.
const STAGED_PAD: u32 = CHUNK_VALUES;
/// Bytes of a staged C row of a `rows`-row tile.
const fn staged_row_bytes(tile: u32) -> u32 {
    (block_n(tile) + STAGED_PAD) * OUT_BYTES
}
/// Bytes of a staged C tile; it reuses the ring's slots, below its barriers.
const fn staged_bytes(tile: u32) -> u32 {
    rows_of(tile) * staged_row_bytes(tile)
}
const _: () = assert!(CHUNK_VALUES == 8, "`write_staged`'s `seq!`");
const _: () = {
    let mut i = 0;
    while i < TILES.len() {
        let tile = TILES[i];
        assert!(staged_bytes(tile) <= full_offset(tile), "the staged tile leaves the barriers alone");
        assert!(
            (rows_of(tile) * block_n(tile) / CHUNK_VALUES).is_multiple_of(CONSUMER_THREADS),
            "whole chunks per thread"
        );
        i += 1;
    }
};

impl Place {
    #[inline(always)]
    fn new(p: &Problem, l: u32, m_tile: u32, n0: u32, ctid: u32) -> Place {
        let (c, thread) = (ctid / WARPGROUP, ctid % WARPGROUP);
        let (w, lane) = (thread / WARP, thread % WARP);
        let (g, t) = (lane / LANES_PER_ROW, lane % LANES_PER_ROW);
        let args = &p.args;
        Place {
            c: args.c + l as u64 * args.m as u64 * args.n as u64 * OUT_BYTES as u64,
            // The weights' power of two (see `Element::UNDO`), taken out of every sum.
            epilogue: Epilogue::load(args).scaled(undo(args.a_format)),
            m_count: args.m,
            n_count: args.n,
            n_base: n0 + c * weight_blocks(p.tile) * WGMMA_M + 16 * w + g,
            m_base: m_tile * rows_of(p.tile) + 2 * t,
            block_n_step: block_n_step(p.tile),
            block_m_step: block_m_step(p.tile),
            n0,
            m0: m_tile * rows_of(p.tile),
            staged_row: staged_row_bytes(p.tile),
        }
    }

    /// (n, m) of accumulator `v` of block `b`.
    #[inline(always)]
    fn position(&self, b: u32, v: u32) -> (u32, u32) {
        let n = self.n_base + b * self.block_n_step + 8 * ((v / 2) % 2);
        let m = self.m_base + b * self.block_m_step + 8 * (v / 4) + v % 2;
        (n, m)
    }

    // Staging a tile's accumulators is straight-line code: no test of a value's place
    // against M and N, no per-value test of the bias. A value past M or N lands in the
    // tile's own shared copy, which `write_staged` does not write out; the bias of such a
    // column is read at the last column instead, so no load leaves the vector. Tested per
    // value, ptxas branched around each one (a convergence barrier and the constants
    // reloaded per value): a CTA's epilogue took 2.1 us on 128x7168x2048 and 5.5-6.6 us
    // per wide tile of 2304x4608x7168 on an H100, its tensor cores idle; without the tests
    // those calls took 15.2-15.4 against 16.7-17.4 us and 206.7-207.1 against 212.5-213.6
    // (docs/perf-notes.md, session 40).

    /// The bias of the two columns of block `b` that this thread's accumulators lie in
    /// (registers v with (v / 2) % 2 = 0 and 1); a column past N reads the last one's.
    #[inline(always)]
    fn block_bias(&self, b: u32) -> [f32; 2] {
        let last = self.n_count - 1;
        let n = self.n_base + b * self.block_n_step;
        [self.epilogue.bias_at(n.min(last)), self.epilogue.bias_at((n + 8).min(last))]
    }

    /// Stages accumulator `v` of block `b` through an epilogue that adds no bias at its
    /// place in the tile's shared-memory copy of C.
    #[inline(always)]
    fn stage_unbiased(&self, staged: SmemAddr, b: u32, v: u32, value: f32) {
        self.stage_bits(staged, b, v, self.epilogue.one_unbiased(value));
    }

    /// [`Place::stage_unbiased`] for an epilogue that adds `bias`, the column's entry of
    /// [`Place::block_bias`].
    #[inline(always)]
    fn stage_biased(&self, staged: SmemAddr, b: u32, v: u32, value: f32, bias: f32) {
        self.stage_bits(staged, b, v, self.epilogue.one_biased(value, bias));
    }

    /// Stores the C bits of accumulator `v` of block `b` at its place in the tile's
    /// shared-memory copy.
    #[inline(always)]
    fn stage_bits(&self, staged: SmemAddr, b: u32, v: u32, bits: u16) {
        let (n, m) = self.position(b, v);
        memory::st_shared_b16(staged.offset((m - self.m0) * self.staged_row + (n - self.n0) * OUT_BYTES), bits);
    }

    /// Writes the staged `rows`-row tile to C: consumer thread `ctid` takes every
    /// `CONSUMER_THREADS`-th 16-byte chunk (a warp 32 consecutive ones: whole rows), of
    /// the rows inside M; whole chunks when C's rows are 16-byte aligned (N a multiple of
    /// 8, C aligned), else the values inside N one by one.
    #[inline(always)]
    #[allow(clippy::identity_op, clippy::erasing_op, clippy::eq_op)] // `seq!` literals
    fn write_staged(&self, staged: SmemAddr, tile: u32, ctid: u32) {
        let row_chunks = block_n(tile) / CHUNK_VALUES;
        let whole_chunks = self.n_count.is_multiple_of(CHUNK_VALUES) && self.c.is_multiple_of(CHUNK as u64);
        for i in 0..rows_of(tile) * row_chunks / CONSUMER_THREADS {
            let chunk = ctid + i * CONSUMER_THREADS;
            let (r, j) = (chunk / row_chunks, chunk % row_chunks);
            let (m, n) = (self.m0 + r, self.n0 + j * CHUNK_VALUES);
            if m < self.m_count && n < self.n_count {
                let bits = memory::ld_shared_v4_b32(staged.offset(r * self.staged_row + j * CHUNK));
                let dst = self.c + (m as u64 * self.n_count as u64 + n as u64) * OUT_BYTES as u64;
                if whole_chunks {
                    memory::st_global_v4_b32(dst, bits);
                } else {
                    seq_macro::seq!(E in 0..8 {
                        if n + E < self.n_count {
                            memory::st_global_b16(dst + (E * OUT_BYTES) as u64, (bits[E / 2] >> (16 * (E % 2))) as u16);
                        }
                    });
                }
            }
        }
    }

    /// Stores quad `q` of block `b` (accumulators 4q..4q + 3, `values`) through the
    /// epilogue, those inside C. As in staging, the epilogue is straight-line code (the
    /// quad's two bias columns loaded once) and only the stores are predicated: tested per
    /// value around a load, ptxas branched around each one.
    #[inline(always)]
    #[allow(clippy::identity_op, clippy::erasing_op, clippy::eq_op)] // `seq!` literals
    fn store_quad(&self, b: u32, q: u32, values: [f32; 4]) {
        let mut bits = [0u16; 4];
        if self.epilogue.adds_bias() {
            let bias = self.block_bias(b);
            seq_macro::seq!(E in 0..4 {
                // Register 4q + E lies in column (E / 2) % 2 of the block's two.
                bits[E] = self.epilogue.one_biased(values[E], bias[(E / 2) % 2]);
            });
        } else {
            seq_macro::seq!(E in 0..4 {
                bits[E] = self.epilogue.one_unbiased(values[E]);
            });
        }
        seq_macro::seq!(E in 0..4 {
            let (n, m) = self.position(b, 4 * q + E);
            if n < self.n_count && m < self.m_count {
                let addr = self.c + (m as u64 * self.n_count as u64 + n as u64) * OUT_BYTES as u64;
                memory::st_global_b16(addr, bits[E]);
            }
        });
    }
}

// ---------------------------------------------------------------------------------------
// Launch 3 (split K only): the sum of the partials
// ---------------------------------------------------------------------------------------

/// Splits whose partials a prefill, medium or wide [`reduce`] thread loads at once.
const SPLITS_IN_FLIGHT: u32 = 4;
const _: () = assert!(SPLITS_IN_FLIGHT == 4, "the `seq!` loops of `reduce`");

/// Quads a prefill, medium or wide [`reduce`] thread sums where the launch still gives every
/// SM a CTA ([`Plan::reduce_quads`]; decode threads sum one quad of up to 16 splits,
/// `sum_unrolled`). A thread first works out its tile, the tile's partial slots and its
/// place in C, some 300 instructions of divisions and index arithmetic, three quarters of a
/// one-quad thread's; two quads share them. On an H100, against one quad per thread:
/// 128x7168x16384 58.75-58.98 → 58.19-58.42 us, 128x6144x12288 43.4-43.8 → 43.1-43.5;
/// four quads took 58.2-58.4 there but lost 1.1 us on 100x260x4096, whose reduce launch
/// then had 10 CTAs (docs/perf-notes.md, session 41).
const REDUCE_QUADS: u32 = 2;
const _: () = assert!(REDUCE_QUADS == 2, "the `seq!` loops of `reduce`");

/// Threads of a [`reduce`] CTA.
const REDUCE_THREADS: u32 = 256;
const _: () = assert!(MAX_DECODE_SPLITS == 16, "`sum_unrolled`'s `seq!` loads 16 splits");

/// [`reduce`] threads per split tile of key `tile` with one quad per thread.
const fn reduce_threads_per_tile(tile: u32) -> u32 {
    BLOCKS as u32 * quads(tile) * holders(tile)
}
const _: () = {
    let mut i = 0;
    while i < TILES.len() {
        let tile = TILES[i];
        assert!((BLOCKS as u32 * quads(tile)).is_multiple_of(REDUCE_QUADS), "whole groups of quads");
        let threads = reduce_threads_per_tile(tile) / REDUCE_QUADS;
        assert!(threads.is_multiple_of(REDUCE_THREADS), "whole reduce CTAs per tile");
        i += 1;
    }
};

/// Sums quads of a tile's partials in split order (so the result does not depend on which
/// CTA finished first) and writes their values to C. All SMs share the work; the first
/// version had the last CTA of each tile read all its tile's partials: one SM reading 4-8 x
/// 128 KiB took ~17 us, a quarter of the big shape's time. Consumer thread `ctid`'s quads
/// lie 16 bytes apart across the 256 (or 128) threads of a partial, so a warp's load of one
/// quad is 512 contiguous bytes.
#[inline(always)]
#[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` literals
pub fn reduce<R: Rows>(args: &GemmArgs) {
    // Scheduled once the GEMM grid completes (it does not signal earlier); the wait makes
    // its partials visible.
    griddep::wait();
    let p = Problem::new::<R>(args);
    let i = special::ctaid_x() * REDUCE_THREADS + special::tid_x();
    let (ctid, rest) = (i % holders(R::TILE), i / holders(R::TILE));
    // Each thread sums `per_thread` consecutive quads of one tile: `groups` per tile (written
    // as two divisions by constants, not one by the runtime `per_thread`).
    let (per_thread, block_quads) = (p.reduce_quads, BLOCKS as u32 * quads(R::TILE));
    let groups = if per_thread == 1 { block_quads } else { block_quads / REDUCE_QUADS };
    let (group, t) = (rest % groups, rest / groups);
    let index = p.whole_tiles + t;
    let (n_tile, rest) = (index % p.n_tiles, index / p.n_tiles);
    let (m_tile, l) = (rest % p.m_tiles, rest / p.m_tiles);
    // The tile's partials, in K order.
    let (slot, count) = p.split.contributors(t, p.k_stages);
    let place = Place::new(&p, l, m_tile, n_tile * block_n(R::TILE), ctid);
    // Quads of padding rows past M: the GEMM stored nothing there.
    let live = |bq: u32| m_tile * R::ROWS + quad_m(R::TILE, bq, ctid) < p.args.m;
    if R::TILE == Decode::TILE {
        let bq = group;
        if live(bq) {
            place.store_quad(bq / quads(R::TILE), bq % quads(R::TILE), sum_unrolled(&p, slot, count, bq, ctid));
        }
        return;
    }
    // Prefill, medium and wide tiles: 2-8 splits (stream-K: 2 or more partials) of
    // `per_thread` quads, summed in K order, the loads of up to four splits of every quad
    // in flight at once.
    let first_bq = group * per_thread;
    let mut sums = [[0f32; 4]; REDUCE_QUADS as usize];
    let mut first = 0;
    while first < count {
        let mut parts = [[[0u32; 4]; SPLITS_IN_FLIGHT as usize]; REDUCE_QUADS as usize];
        seq_macro::seq!(Q in 0..2 {
            if Q < per_thread && live(first_bq + Q) {
                seq_macro::seq!(S in 0..4 {
                    if first + S < count {
                        let at = p.partial(slot + first + S) + partial_offset(R::TILE, first_bq + Q, ctid);
                        parts[Q][S] = memory::ld_global_v4_b32(at);
                    }
                });
            }
        });
        seq_macro::seq!(Q in 0..2 {
            seq_macro::seq!(S in 0..4 {
                if first + S < count {
                    seq_macro::seq!(E in 0..4 {
                        sums[Q][E] += f32::from_bits(parts[Q][S][E]);
                    });
                }
            });
        });
        first += SPLITS_IN_FLIGHT;
    }
    seq_macro::seq!(Q in 0..2 {
        let bq = first_bq + Q;
        if Q < per_thread && live(bq) {
            place.store_quad(bq / quads(R::TILE), bq % quads(R::TILE), sums[Q]);
        }
    });
}

/// The split-order sum of one quad of a decode tile's `count` partials from slot `slot`,
/// every split's quad loaded before the first add, with weak loads and no branch: decode
/// tiles split 9-16 ways over only ~100 reduce CTAs, and one load after another (the
/// loop prefill tiles use) left each thread waiting out the L2 latency once per split. Slots past the last split re-read
/// it (an L1 hit) and add +0.0, which changes no sum (it starts at +0.0, so it is never
/// -0.0). On prefill tiles the 4-12 re-reads cost more than the overlap gains (an H100 run,
/// docs/perf-notes.md, session 12).
#[inline(always)]
#[allow(clippy::identity_op, clippy::erasing_op)] // `seq!` literals
fn sum_unrolled(p: &Problem, slot: u32, count: u32, bq: u32, ctid: u32) -> [f32; 4] {
    let mut parts = [[0u32; 4]; MAX_DECODE_SPLITS as usize];
    seq_macro::seq!(S in 0..16 {
        let v = memory::ld_global_v4_b32(p.partial(slot + count.min(S + 1) - 1) + partial_offset(p.tile, bq, ctid));
        parts[S] = if S < count { v } else { [0; 4] };
    });
    let mut sum = [0f32; 4];
    seq_macro::seq!(S in 0..16 {
        seq_macro::seq!(E in 0..4 {
            sum[E] += f32::from_bits(parts[S][E]);
        });
    });
    sum
}

/// The entry points of tiles of key `tile` with A in `a_format`. Where the GEMM has a bf16
/// entry ([`Alone`]) bf16 activations take it (bf16 weights and
/// wgmmas), the others the main one; elsewhere one entry takes every format.
pub const fn entries_of(tile: u32, a_format: AFormat) -> [&'static str; 3] {
    let [prepare, gemm, reduce] = entries_f16(tile);
    match (a_format, gemm_bf16_entry(tile)) {
        (AFormat::Bf16, Some(bf16)) => [prepare, bf16, reduce],
        _ => [prepare, gemm, reduce],
    }
}

/// The bf16 GEMM entry of tiles of key `tile`, if they have one (on [`Alone`]).
const fn gemm_bf16_entry(tile: u32) -> Option<&'static str> {
    match tile {
        Wide::TILE => Some("nvfp4_gemm_sm90v2_wide_bf16"),
        Prefill::TILE => Some("nvfp4_gemm_sm90v2_bf16"),
        Thin::TILE => Some("nvfp4_gemm_sm90v2_thin_bf16"),
        ThinMedium::TILE => Some("nvfp4_gemm_sm90v2_thin_medium_bf16"),
        _ => None,
    }
}
// A tile kind with an entry per type has a bf16 entry.
const _: () = {
    let mut i = 0;
    while i < TILES.len() {
        assert!(!entry_per_type(TILES[i]) || gemm_bf16_entry(TILES[i]).is_some());
        i += 1;
    }
};

/// The entry points of tiles of key `tile` with fp16 operands (or with both types, see
/// [`entry_per_type`]).
const fn entries_f16(tile: u32) -> [&'static str; 3] {
    match tile {
        Decode::TILE => ["nvfp4_sm90v2_decode_prepare", "nvfp4_gemm_sm90v2_decode", "nvfp4_sm90v2_decode_reduce"],
        Medium::TILE => ["nvfp4_sm90v2_medium_prepare", "nvfp4_gemm_sm90v2_medium", "nvfp4_sm90v2_medium_reduce"],
        Narrow::TILE => ["nvfp4_sm90v2_narrow_prepare", "nvfp4_gemm_sm90v2_narrow", "nvfp4_sm90v2_narrow_reduce"],
        Thin::TILE => ["nvfp4_sm90v2_thin_prepare", "nvfp4_gemm_sm90v2_thin", "nvfp4_sm90v2_thin_reduce"],
        ThinMedium::TILE => {
            ["nvfp4_sm90v2_thin_medium_prepare", "nvfp4_gemm_sm90v2_thin_medium", "nvfp4_sm90v2_thin_medium_reduce"]
        }
        Wide::TILE => ["nvfp4_sm90v2_wide_prepare", "nvfp4_gemm_sm90v2_wide", "nvfp4_sm90v2_wide_reduce"],
        _ => ["nvfp4_sm90v2_prepare", "nvfp4_gemm_sm90v2", "nvfp4_sm90v2_reduce"],
    }
}

// The GPU entry points, per tile kind and (the GEMM's) operand type (see `entries_of`).
gemm_entry_point!(nvfp4_sm90v2_prepare => prepare::<Prefill>);
gemm_entry_point!(nvfp4_gemm_sm90v2 => gemm::<Prefill, BothTypes>);
gemm_entry_point!(nvfp4_gemm_sm90v2_bf16 => gemm::<Prefill, Alone<Bf16>>);
gemm_entry_point!(nvfp4_sm90v2_reduce => reduce::<Prefill>);
gemm_entry_point!(nvfp4_sm90v2_decode_prepare => prepare::<Decode>);
gemm_entry_point!(nvfp4_gemm_sm90v2_decode => gemm::<Decode, BothTypes>);
gemm_entry_point!(nvfp4_sm90v2_decode_reduce => reduce::<Decode>);
gemm_entry_point!(nvfp4_sm90v2_medium_prepare => prepare::<Medium>);
gemm_entry_point!(nvfp4_gemm_sm90v2_medium => gemm::<Medium, BothTypes>);
gemm_entry_point!(nvfp4_sm90v2_medium_reduce => reduce::<Medium>);
gemm_entry_point!(nvfp4_sm90v2_narrow_prepare => prepare::<Narrow>);
gemm_entry_point!(nvfp4_gemm_sm90v2_narrow => gemm::<Narrow, BothTypes>);
gemm_entry_point!(nvfp4_sm90v2_narrow_reduce => reduce::<Narrow>);
gemm_entry_point!(nvfp4_sm90v2_thin_prepare => prepare::<Thin>);
gemm_entry_point!(nvfp4_gemm_sm90v2_thin => gemm::<Thin, BothTypes>);
gemm_entry_point!(nvfp4_gemm_sm90v2_thin_bf16 => gemm::<Thin, Alone<Bf16>>);
gemm_entry_point!(nvfp4_sm90v2_thin_reduce => reduce::<Thin>);
gemm_entry_point!(nvfp4_sm90v2_thin_medium_prepare => prepare::<ThinMedium>);
gemm_entry_point!(nvfp4_gemm_sm90v2_thin_medium => gemm::<ThinMedium, BothTypes>);
gemm_entry_point!(nvfp4_gemm_sm90v2_thin_medium_bf16 => gemm::<ThinMedium, Alone<Bf16>>);
gemm_entry_point!(nvfp4_sm90v2_thin_medium_reduce => reduce::<ThinMedium>);
gemm_entry_point!(nvfp4_sm90v2_wide_prepare => prepare::<Wide>);
gemm_entry_point!(nvfp4_gemm_sm90v2_wide => gemm::<Wide, Alone<F16>>);
gemm_entry_point!(nvfp4_gemm_sm90v2_wide_bf16 => gemm::<Wide, Alone<Bf16>>);
gemm_entry_point!(nvfp4_sm90v2_wide_reduce => reduce::<Wide>);
