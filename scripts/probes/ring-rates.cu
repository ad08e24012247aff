// sm90v2's 128x128 main loop rebuilt in CUDA C, to find which of its parts keeps the tensor
// cores from the rate of `wgmma-rates.cu`'s bare loops. One CTA per SM, 384 threads: two
// consumer warpgroups (64 weight rows each, one `wgmma m64n128k16` RS per k16 step, three
// groups in flight, a drain every two stages, each stage's raw weights and scales read
// from its ring slot during the last step of the stage before) and a producer warpgroup
// (the stage's 4 KiB of row-major weights and 512 B of scales as 16-byte
// `cp.async.cg ... L2::128B`, one commit group per stage, `cp.async.wait_group LAG` before
// announcing the stage LAG older on `full`; thread 0 the 16 KiB image in one
// `cp.async.bulk`), on a ring of 8 slots with `full` (129 arrivals) and `empty` (256)
// mbarriers, as in crates/kernel/src/sm90v2.rs (the role taken from a shuffle, as the
// kernel does, so that ptxas sees it warp-uniform and keeps the wgmma descriptors in
// uniform registers). Template switches leave out the weight copies, the image copies or
// the conversion; read the next stage's raw data at an earlier step (READ_AT); let the
// producer's `empty` wait suspend or sleep (WAIT); convert a whole stage before its first
// wgmma (HOIST); drop the producer and the barriers, or keep only the consumers' barrier
// instructions (both, the `full` waits, the `empty` arrivals) or only a polling producer
// (RING); start warpgroup 1 some cycles late (SKEW); or run three consumer warpgroups, 192
// weight rows (CWG). SIMPLE takes single differences from wgmma-rates' bare loop out
// (constant scales, one image slot, accumulate always, one 16-byte raw load), or arrives
// once per warp, or gives a copy-less ring 32 barrier slots, or waits on `full` at step 1
// (the raw read still at READ_AT), or only tests it early and waits at READ_AT if need be,
// or has the producer build each stage's image from raw activations (PRODUCER_IMAGES), or
// has warpgroup 1 drain at the other stage of each pair (OFFSET_DRAIN), or announces stages
// in pairs on one `full` barrier each (PAIR_FULL); `run_alternate` runs four consumer
// warpgroups on alternate stages (640 threads; ptxas serializes its wgmmas, C7512, at the
// 96 registers that leaves). `./ring-rates` runs the main series, `./ring-rates simple` the
// SIMPLE, RING and SKEW isolations and the alternate warpgroups, `./ring-rates drains` the
// drains a stage apart against the same loops draining together, `./ring-rates pairs` a
// `full` barrier per pair against one per stage. Small source changes move ptxas's schedule
// of every variant and its rate by several points (docs/perf-notes.md, session 45): compare
// variants of one build.
// Timing only: the values are never checked. Cycles from clock64 on consumer thread 0
// from its first stage's `full` to its last drain, median over CTAs; tensor utilisation =
// 4 x CWG wgmmas x 64 cycles per stage / cycles.
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o ring-rates ring-rates.cu && ./ring-rates [simple | drains | pairs]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "wgmma.cuh"

__device__ __forceinline__ void bar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// The producer's `empty` wait: a spin on try_wait (as the kernel), try_wait with a
// suspend-time hint, or a spin with `nanosleep` between polls.
constexpr int SPIN = 0, SUSPEND = 1, SLEEP = 2;
// RING: the full ring (0); no producer warps and no barriers, 256 threads (NO_PRODUCER);
// 384 threads whose producer warps exit at once, no barriers (IDLE_PRODUCER).
constexpr int FULL_RING = 0, NO_PRODUCER = 1, IDLE_PRODUCER = 2;
// ...the consumers' barrier instructions alone: the producer warps exit, each `full` wait
// asks for the phase before a fresh barrier's first (complete at once) and the `empty`
// arrivals go on, with no one waiting for them (CONSUMER_BARRIERS); or the producer warps
// alone, polling a barrier that never completes until the consumers are done, and no
// barriers in the consumers (POLLING_PRODUCER).
constexpr int CONSUMER_BARRIERS = 3, POLLING_PRODUCER = 4;
// ...or of those consumers' barrier instructions only the `full` waits (CONSUMER_WAITS) or
// only the `empty` arrivals (CONSUMER_ARRIVALS).
constexpr int CONSUMER_WAITS = 5, CONSUMER_ARRIVALS = 6;
// SIMPLE: bits that take a difference from wgmma-rates' bare loop out: constant scales (no
// scale loads or conversion), one image slot for every stage, accumulate always, one
// 16-byte load of raw words per stage instead of two rows' 8 bytes.
constexpr int CONST_SCALE = 1, ONE_SLOT = 2, ALWAYS_ACC = 4, ONE_LOAD = 8;
constexpr int ALL_FOUR = CONST_SCALE | ONE_SLOT | ALWAYS_ACC | ONE_LOAD;
// And one more bit: each warp's lane 0 arrives on `full` and `empty` for the whole warp
// (after `__syncwarp`), a 32nd of the barrier arrivals.
constexpr int ARRIVE_PER_WARP = 16;
// And DEEP_RING: 32 barrier slots over the 8 data slots, so that the producer may run 28
// stages ahead (only without copies: the slots' bytes are then never written).
constexpr int DEEP_RING = 32;
// And EARLY_WAIT: the next stage's `full` wait at step 1, its raw read still at READ_AT.
constexpr int EARLY_WAIT = 64;
// And SPLIT_WAIT: a non-blocking `test_wait` of the next stage's `full` at step 2 (step 1
// with EARLY_WAIT), the blocking wait at READ_AT only if that said not yet, so that the
// test's latency overlaps the steps between.
constexpr int SPLIT_WAIT = 128;
// And PRODUCER_IMAGES: no image bulk copy; the producer copies each stage's raw activations
// (128 rows x 32 bytes and a 512-byte scale tile, into a staging ring of their own) with
// the weights, and once they have landed each producer thread converts one activation row
// into the slot's image (eight 16-byte chunks, 128B-swizzled), `fence.proxy.async`, then
// announces the stage: what building the images in the GEMM, with no prologue launch, would
// cost the loop.
constexpr int PRODUCER_IMAGES = 256;
// And OFFSET_DRAIN: warpgroup 1 drains its wgmmas (`wait_group 0`) at the end of the first
// stage of each pair instead of the second, so that the two warpgroups never drain at the
// same stage boundary (the kernel's bf16 entries' "pairs a stage apart").
constexpr int OFFSET_DRAIN = 512;
// And PAIR_FULL: one `full` barrier per pair of stages (the producer announces a pair once
// both stages have landed, thread 0's two image copies expected on it), so that the
// consumers wait once per pair, before its first stage; `empty` stays per stage.
constexpr int PAIR_FULL = 1024;
template <int MODE>
__device__ __forceinline__ void producer_wait(uint32_t bar, uint32_t parity) {
  if (MODE == SPIN) bar_wait(bar, parity);
  if (MODE == SUSPEND)
    asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1, %2; @!p bra W; }"
                 ::"r"(bar), "r"(parity), "r"(1000000) : "memory");
  if (MODE == SLEEP) {
    uint32_t done = 0;
    while (true) {
      asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(bar), "r"(parity) : "memory");
      if (done) break;
      __nanosleep(100);
    }
  }
}
// One `try_wait` on a barrier phase (with a suspend-time hint if SUSPEND), no loop.
template <bool SUSPEND_HINT>
__device__ __forceinline__ void poll_once(uint32_t bar, uint32_t parity) {
  if (SUSPEND_HINT)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1, %2; }" ::"r"(bar), "r"(parity), "r"(1000000) : "memory");
  else
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; }" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ uint32_t test_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done;
}
__device__ __forceinline__ void copy16(uint32_t dst, const uint8_t* src) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
template <int N>
__device__ __forceinline__ void copies_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void copies_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ uint32_t f16x2_from_e4m3x2(uint32_t x) {
  uint32_t d;
  asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, lo; }" : "=r"(d) : "r"(x));
  return d;
}
// The high half's two bytes, read in place (F2FP's .H1 operand), as the kernel's `pair`.
__device__ __forceinline__ uint32_t f16x2_from_e4m3x2_high(uint32_t x) {
  uint32_t d;
  asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, hi; }" : "=r"(d) : "r"(x));
  return d;
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
}

constexpr int SLOTS = 8, LAG = 4, IMAGE = 16384;
// Barrier pairs a ring may have (DEEP_RING: more than its data slots, see SIMPLE).
constexpr int MAX_BARRIER_SLOTS = 32;
// A stage's raw part for CWG consumer warpgroups (64 weight rows each): 32 bytes per row,
// then one 512-byte scale tile per 128 rows.
__host__ __device__ constexpr int weight_bytes(int cwg) { return cwg * 64 * 32; }
__host__ __device__ constexpr int scale_bytes(int cwg) { return 512 * ((cwg * 64 + 127) / 128); }
__host__ __device__ constexpr int raw_bytes(int cwg) { return weight_bytes(cwg) + scale_bytes(cwg); }
// A stage's raw activations for PRODUCER_IMAGES: 128 rows x 32 bytes, a 512-byte scale tile.
constexpr int ACT_RAW = 128 * 32 + 512;
__host__ __device__ constexpr int smem_bytes(int cwg) {
  return 1024 + SLOTS * (IMAGE + raw_bytes(cwg)) + 2 * MAX_BARRIER_SLOTS * 8 + 16 + SLOTS * ACT_RAW;
}
constexpr int MAX_CWG = 3;
constexpr int STAGES = 512;                      // per CTA; K = 64 x STAGES
constexpr int ROW_BYTES = STAGES * 32;           // a weight row: 32 bytes per stage
constexpr int IMAGES = 256;                      // 4 MiB of images that every CTA reads

// Pair `kind` of the eight e2m1 codes in q times scale (sm90v2's `pair`).
template <bool CONVERT>
__device__ __forceinline__ uint32_t pair(uint32_t q, int kind, uint32_t scale) {
  if (!CONVERT) return (q >> (8 * kind)) ^ scale;
  uint32_t bytes = kind < 2 ? ((q << 4) & 0x80808080u) | ((q << 2) & 0x1C1C1C1Cu)
                            : (q & 0x80808080u) | ((q >> 2) & 0x1C1C1C1Cu);
  return hmul2(kind & 1 ? f16x2_from_e4m3x2_high(bytes) : f16x2_from_e4m3x2(bytes), scale);
}

// The CTA's shared memory, 1024-aligned: SLOTS images, SLOTS raw parts (weights, scales) for
// CWG consumer warpgroups, then `bslots` `full` and `empty` mbarriers (taking `full_arrivals`
// and `empty_arrivals`), initialised; the slots filled with arbitrary values.
struct Ring {
  uint8_t* smem;
  uint32_t base, raw0, full0, empty0;
  volatile int* consumers_done;  // POLLING_PRODUCER's flag
  uint32_t act_raw0;             // PRODUCER_IMAGES' staging ring
};
template <int CWG>
__device__ __forceinline__ Ring setup_ring(uint8_t* smem_raw, int full_arrivals, int empty_arrivals, int bslots = SLOTS) {
  uint32_t base = (uint32_t)__cvta_generic_to_shared(smem_raw);
  uint32_t pad = (1024 - (base & 1023)) & 1023;
  Ring r;
  r.smem = smem_raw + pad;
  r.base = base + pad;
  r.raw0 = r.base + SLOTS * IMAGE;
  r.full0 = r.raw0 + SLOTS * raw_bytes(CWG);
  r.empty0 = r.full0 + MAX_BARRIER_SLOTS * 8;
  r.consumers_done = (volatile int*)(r.smem + (r.empty0 - r.base) + MAX_BARRIER_SLOTS * 8);
  r.act_raw0 = r.empty0 + MAX_BARRIER_SLOTS * 8 + 16;
  const int tid = threadIdx.x;
  for (int i = tid * 16; i < SLOTS * (IMAGE + raw_bytes(CWG)); i += blockDim.x * 16)
    *(uint4*)(r.smem + i) = make_uint4(0x3c3c3c3c, 0x11111111, 0x22222222, 0x38383838);
  if (tid == 0) {
    *r.consumers_done = 0;
    for (int s = 0; s < bslots; s++) {
      bar_init(r.full0 + 8 * s, full_arrivals);
      bar_init(r.empty0 + 8 * s, empty_arrivals);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  return r;
}

// PRODUCER_IMAGES: producer thread p turns activation row p of stage `slot`'s raw copy into
// its image row: for each of its four 16-value quarters t (two words, one scale), the four
// pairs of each word times the scale; chunk i of the row holds pair i of every quarter (the
// kernel's K order), at chunk i ^ (p % 8) (the 128B swizzle).
template <bool CONVERT>
__device__ __forceinline__ void build_image_row(const Ring& r, int slot, int p) {
  const uint8_t* src = r.smem + (r.act_raw0 - r.base) + slot * ACT_RAW;
  const uint4 lo = *(const uint4*)(src + p * 32), hi = *(const uint4*)(src + p * 32 + 16);
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const uint32_t sfw = *(const uint32_t*)(src + 4096 + p * 4);
  uint32_t sc[4];
#pragma unroll
  for (int t = 0; t < 4; t++) sc[t] = f16x2_from_e4m3x2(prmt(sfw, 0, t * 0x11));
  uint8_t* row = r.smem + slot * IMAGE + p * 128;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    uint4 chunk;
    chunk.x = pair<CONVERT>(w[0 + i / 4], i % 4, sc[0]);
    chunk.y = pair<CONVERT>(w[2 + i / 4], i % 4, sc[1]);
    chunk.z = pair<CONVERT>(w[4 + i / 4], i % 4, sc[2]);
    chunk.w = pair<CONVERT>(w[6 + i / 4], i % 4, sc[3]);
    *(uint4*)(row + 16 * (i ^ (p % 8))) = chunk;
  }
}

// Producer thread p's copies of every stage into the ring (the CTA's own weight rows, its
// scale tiles, images that every CTA reads), announced on `full` LAG stages later (by
// each thread, or PER_WARP by lane 0 for its warp).
template <bool WEIGHT_COPIES, bool IMAGE_COPIES, int WAIT, int CWG, bool PER_WARP = false, int BSLOTS = SLOTS,
          bool IMAGES_HERE = false, bool PAIR = false>
__device__ __forceinline__ void produce(const Ring& r, int p, const uint8_t* weights, const uint8_t* scales,
                                        const uint8_t* images) {
  constexpr int WEIGHTS = weight_bytes(CWG), SCALES = scale_bytes(CWG), RAW = raw_bytes(CWG);
  const uint8_t* my_weights = weights + (size_t)blockIdx.x * CWG * 64 * ROW_BYTES;
  const uint8_t* my_scales = scales + (size_t)blockIdx.x * STAGES * 1024;
  // The `full` barrier of stage s (PAIR: its pair's), and whether its announcement is due
  // once stage s has landed (PAIR: the pair's second stage).
  auto full_of = [](int s) { return PAIR ? (s / 2) % (BSLOTS / 2) : s % BSLOTS; };
  auto announces = [](int s) { return !PAIR || s % 2 == 1; };
  for (int s = 0; s < STAGES; s++) {
    const int slot = s % SLOTS, bslot = s % BSLOTS;
    if (s >= BSLOTS) producer_wait<WAIT>(r.empty0 + 8 * bslot, (s / BSLOTS - 1) & 1);
    const uint32_t raw = r.raw0 + slot * RAW;
    if (WEIGHT_COPIES) {
#pragma unroll
      for (int i = 0; i < CWG; i++) {
        int chunk = p + 128 * i, row = chunk / 2, half = chunk % 2;
        copy16(raw + chunk * 16, my_weights + (size_t)row * ROW_BYTES + s * 32 + half * 16);
      }
      if (p < SCALES / 16) copy16(raw + WEIGHTS + p * 16, my_scales + (size_t)s * 1024 + p * 16);
    }
    if (IMAGES_HERE) {
      // The stage's raw activations, from 4 MiB that every CTA reads (as the images).
      const uint32_t act = r.act_raw0 + slot * ACT_RAW;
      const uint8_t* a = images + (size_t)((s + blockIdx.x) % IMAGES) * ACT_RAW;
      copy16(act + p * 16, a + p * 16);
      copy16(act + (p + 128) * 16, a + (p + 128) * 16);
      if (p < 32) copy16(act + 4096 + p * 16, a + 4096 + p * 16);
    }
    copies_commit();
    if (p == 0) {
      if (IMAGE_COPIES) {
        bar_expect(r.full0 + 8 * full_of(s), IMAGE);
        bulk(r.base + slot * IMAGE, images + (size_t)((s + blockIdx.x) % IMAGES) * IMAGE, IMAGE, r.full0 + 8 * full_of(s));
      } else {
        bar_arrive(r.full0 + 8 * full_of(s));
      }
    }
    if (s >= LAG) {
      copies_wait<LAG>();
      if (IMAGES_HERE) {
        build_image_row<true>(r, (s - LAG) % SLOTS, p);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      }
      if (PER_WARP) __syncwarp();
      if ((!PER_WARP || p % 32 == 0) && announces(s - LAG)) bar_arrive(r.full0 + 8 * full_of(s - LAG));
    }
  }
  copies_wait<0>();
  if (IMAGES_HERE) {
    for (int s = STAGES - LAG; s < STAGES; s++) build_image_row<true>(r, s % SLOTS, p);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  if (PER_WARP) __syncwarp();
  if (!PER_WARP || p % 32 == 0)
    for (int s = STAGES - LAG; s < STAGES; s++)
      if (announces(s)) bar_arrive(r.full0 + 8 * full_of(s));
}

// A consumer thread's raw words of rows r0 and r0 + 8 (8 bytes each, quarter t) and their
// fp16x2 scales, from slot `slot` (or what SIMPLE puts in their place).
template <int CWG, int SIMPLE>
__device__ __forceinline__ void read_raw(const Ring& r, int slot, int r0, int t, uint32_t* words, uint32_t* sc) {
  const uint8_t* raw = r.smem + (r.raw0 - r.base) + slot * raw_bytes(CWG);
  const int r1 = r0 + 8;
  if (SIMPLE & ONE_LOAD) {
    uint4 q = *(const uint4*)(raw + (threadIdx.x % 256) * 16);
    words[0] = q.x, words[1] = q.y, words[2] = q.z, words[3] = q.w;
  } else {
    uint2 a = *(const uint2*)(raw + r0 * 32 + t * 8), b = *(const uint2*)(raw + r1 * 32 + t * 8);
    words[0] = a.x, words[1] = a.y, words[2] = b.x, words[3] = b.y;
  }
  if (SIMPLE & CONST_SCALE) {
    sc[0] = sc[1] = 0x3c003c00u;
    return;
  }
  constexpr int WEIGHTS = weight_bytes(CWG);
  uint32_t s0 = *(const uint32_t*)(raw + WEIGHTS + (r0 / 128) * 512 + (r0 % 128) * 4),
           s1 = *(const uint32_t*)(raw + WEIGHTS + (r1 / 128) * 512 + (r1 % 128) * 4);
  sc[0] = f16x2_from_e4m3x2(prmt(s0, 0, t * 0x11));
  sc[1] = f16x2_from_e4m3x2(prmt(s1, 0, t * 0x11));
}

template <bool WEIGHT_COPIES, bool IMAGE_COPIES, bool CONVERT, int READ_AT = 3, int WAIT = SPIN, bool HOIST = false, int RING = 0,
          int SKEW = 0, int CWG = 2, int SIMPLE = 0>
__global__ void __launch_bounds__((CWG + 1) * 128, 1) run(long long* cycles, float* sink, const uint8_t* weights,
                                               const uint8_t* scales, const uint8_t* images) {
  extern __shared__ uint8_t smem_raw[];
  constexpr bool PER_WARP = SIMPLE & ARRIVE_PER_WARP;
  constexpr int BSLOTS = SIMPLE & DEEP_RING ? MAX_BARRIER_SLOTS : SLOTS;
  static_assert(!(SIMPLE & DEEP_RING) || (!WEIGHT_COPIES && !IMAGE_COPIES), "a deep ring only without copies");
  constexpr bool PAIR = SIMPLE & PAIR_FULL;
  static_assert(!PAIR || !(SIMPLE & (ARRIVE_PER_WARP | DEEP_RING | EARLY_WAIT | SPLIT_WAIT | PRODUCER_IMAGES)), "PAIR_FULL alone");
  // `full` takes each producer thread's arrival (PER_WARP: each warp's) and thread 0's
  // `expect_tx` (or arrival) of each stage: two of those per pair with PAIR_FULL.
  const Ring ring = setup_ring<CWG>(smem_raw, (PAIR ? 2 : 1) + (PER_WARP ? 4 : 128), PER_WARP ? CWG * 4 : CWG * 128, BSLOTS);
  const uint32_t base = ring.base, full0 = ring.full0, empty0 = ring.empty0;
  const int tid = threadIdx.x;

  // The role, visibly warp-uniform (as the kernel's shuffle makes it), so that ptxas keeps
  // the consumers' descriptors in uniform registers.
  const int role = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (role == CWG && RING == POLLING_PRODUCER) {
    while (!*ring.consumers_done) poll_once<WAIT == SUSPEND>(empty0, 0);
    return;
  }
  if (role == CWG && RING != FULL_RING) return;
  if (role == CWG) {
    static_assert(!(SIMPLE & PRODUCER_IMAGES) || (!IMAGE_COPIES && CWG == 2), "images from the producer replace the bulk copies");
    produce<WEIGHT_COPIES, IMAGE_COPIES, WAIT, CWG, PER_WARP, BSLOTS, (SIMPLE & PRODUCER_IMAGES) != 0, PAIR>(ring, tid - CWG * 128,
                                                                                                    weights, scales, images);
    return;
  }

  // The consumers: warpgroup c, warp w, lane (g, t); rows r0 = 64c + 16w + g and r0 + 8.
  const int c = tid / 128, w = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int r0 = 64 * c + 16 * w + g;
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; i++) d[i] = 0.f;
  uint32_t frags[8][4];
  uint32_t words[4], sc[2], next_words[4], next_sc[2];
  auto read = [&](int slot) { read_raw<CWG, SIMPLE>(ring, slot, r0, t, words, sc); };
  auto release = [&](int slot) {
    if (PER_WARP) __syncwarp();
    if (!PER_WARP || lane == 0) bar_arrive(empty0 + 8 * slot);
  };
  if (RING == FULL_RING) bar_wait(full0, 0);
  if (RING == CONSUMER_BARRIERS || RING == CONSUMER_WAITS) bar_wait(full0, 1);
  long long t0 = clock64();
  // SKEW: warpgroup 1 starts this many cycles after warpgroup 0.
  if (SKEW > 0 && c == 1)
    while (clock64() - t0 < SKEW) {
    }
  read(0);
#pragma unroll
  for (int i = 0; i < 4; i++) next_words[i] = words[i];
  next_sc[0] = sc[0], next_sc[1] = sc[1];
  int held = 0;
  uint32_t ready = 0;
  // DS: the stage of each pair (0 or 1) at whose end this warpgroup drains.
  auto loop = [&](auto drain_stage) {
    constexpr int DS = decltype(drain_stage)::value;
    for (int s = 0; s < STAGES; s += 2) {
#pragma unroll
      for (int S = 0; S < 2; S++) {
        const int stage = s + S, slot = stage % SLOTS, bslot = stage % BSLOTS;
        const uint64_t act = desc(base + (SIMPLE & ONE_SLOT ? 0 : slot) * IMAGE);
        // This stage's raw data, read during the last one (at its step READ_AT).
#pragma unroll
        for (int i = 0; i < 4; i++) words[i] = next_words[i];
        const uint32_t sc0 = next_sc[0], sc1 = next_sc[1];
        uint32_t cur[4] = {words[0], words[1], words[2], words[3]};
        // H[i] of a row is pair(word i / 4, kind i % 4); step J takes H[2J] and H[2J + 1].
        auto convert = [&](int J) {
          const int P = HOIST ? S * 4 + J : (S * 4 + J) % 4;
          frags[P][0] = pair<CONVERT>(cur[(2 * J) / 4], (2 * J) % 4, sc0);
          frags[P][1] = pair<CONVERT>(cur[2 + (2 * J) / 4], (2 * J) % 4, sc1);
          frags[P][2] = pair<CONVERT>(cur[(2 * J + 1) / 4], (2 * J + 1) % 4, sc0);
          frags[P][3] = pair<CONVERT>(cur[2 + (2 * J + 1) / 4], (2 * J + 1) % 4, sc1);
        };
        if (HOIST) {
          // The whole stage's fragments first (eight buffers: a pair's stages never share one).
#pragma unroll
          for (int J = 0; J < 4; J++) convert(J);
          fence();
        }
#pragma unroll
        for (int J = 0; J < 4; J++) {
          const int P = HOIST ? S * 4 + J : (S * 4 + J) % 4;
          if (!HOIST) {
            convert(J);
            fence();
          }
          mma_rs_n128(d, frags[P], act + 2 * J, SIMPLE & ALWAYS_ACC ? 1 : stage > 0 || J > 0);
          commit();
          constexpr int WAIT_AT = SIMPLE & EARLY_WAIT ? 1 : READ_AT;
          constexpr int TEST_AT = SIMPLE & EARLY_WAIT ? 1 : 2;
          if ((SIMPLE & SPLIT_WAIT) && J == TEST_AT) {
            const int next = stage + 1 < STAGES ? stage + 1 : stage;
            if (RING == FULL_RING) ready = test_wait(full0 + 8 * (next % BSLOTS), (next / BSLOTS) & 1);
          }
          if ((SIMPLE & SPLIT_WAIT) && J == READ_AT) {
            const int next = stage + 1 < STAGES ? stage + 1 : stage;
            if (RING == FULL_RING && !ready) bar_wait(full0 + 8 * (next % BSLOTS), (next / BSLOTS) & 1);
          }
          if (!(SIMPLE & SPLIT_WAIT) && J == WAIT_AT) {
            const int next = stage + 1 < STAGES ? stage + 1 : stage;
            if (RING == FULL_RING && !PAIR) bar_wait(full0 + 8 * (next % BSLOTS), (next / BSLOTS) & 1);
            // PAIR: the next pair's barrier before its first stage (S = 1: the next stage is even).
            constexpr int PAIRS = BSLOTS / 2;
            if (RING == FULL_RING && PAIR && S == 1 && next != stage) bar_wait(full0 + 8 * ((next / 2) % PAIRS), ((next / 2) / PAIRS) & 1);
            if (RING == CONSUMER_BARRIERS || RING == CONSUMER_WAITS) bar_wait(full0 + 8 * (next % BSLOTS), 1);
          }
          if (J == READ_AT) {
            const int next = stage + 1 < STAGES ? stage + 1 : stage;
            read(next % SLOTS);
#pragma unroll
            for (int i = 0; i < 4; i++) next_words[i] = words[i];
            next_sc[0] = sc[0], next_sc[1] = sc[1];
          }
          if (J < 3) {
            wait<3>();
            if (S == DS && J == 2 && stage > 0 && (RING == FULL_RING || RING == CONSUMER_BARRIERS || RING == CONSUMER_ARRIVALS)) release(held);
          } else {
            if (S == DS) {
              wait<0>();
              if (RING == FULL_RING || RING == CONSUMER_BARRIERS || RING == CONSUMER_ARRIVALS) release(bslot);
            } else {
              wait<3>();
              held = bslot;
            }
          }
        }
      }
    }
  };
  if ((SIMPLE & OFFSET_DRAIN) && c == 1)
    loop(std::integral_constant<int, 0>{});
  else
    loop(std::integral_constant<int, 1>{});
  wait<0>();
  long long t1 = clock64();
  if (RING == POLLING_PRODUCER && tid == 0) *ring.consumers_done = 1;
  float acc = 0;
#pragma unroll
  for (int i = 0; i < 64; i++) acc += d[i];
  if (acc == 1234.5f) sink[tid] = acc;
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
}

// Runs `kernel` twice on one CTA per SM (the second timed) and prints its loop's tensor
// utilisation: `weight_rows` / 64 m64n128k16 wgmmas per k16 step, 64 cycles each.
template <typename Kernel>
void run_and_report(const char* name, Kernel kernel, int sms, int threads, int smem, int weight_rows, long long* dc,
                    float* ds, const uint8_t* wts, const uint8_t* scl, const uint8_t* img) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  for (int rep = 0; rep < 2; rep++) kernel<<<sms, threads, smem>>>(dc, ds, wts, scl, img);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { printf("%-44s cuda error %s\n", name, cudaGetErrorString(e)); return; }
  std::vector<long long> c(sms);
  cudaMemcpy(c.data(), dc, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  std::sort(c.begin(), c.end());
  double ideal = double(STAGES) * 4 * weight_rows;
  printf("%-44s %7.1f cycles per stage, tensor %5.1f %% (CTAs %5.1f-%5.1f %%)\n", name, c[sms / 2] / double(STAGES),
         100 * ideal / c[sms / 2], 100 * ideal / c[sms - 1], 100 * ideal / c[0]);
}

template <bool W, bool I, bool C, int READ_AT = 3, int WAIT = SPIN, bool HOIST = false, int RING = FULL_RING, int SKEW = 0,
          int CWG = 2, int SIMPLE = 0>
void measure(const char* name, int sms, long long* dc, float* ds, const uint8_t* wts, const uint8_t* scl, const uint8_t* img) {
  const int threads = (CWG + (RING == NO_PRODUCER ? 0 : 1)) * 128;
  run_and_report(name, run<W, I, C, READ_AT, WAIT, HOIST, RING, SKEW, CWG, SIMPLE>, sms, threads, smem_bytes(CWG), CWG * 64,
                 dc, ds, wts, scl, img);
}

// Four consumer warpgroups on alternate stages of the 128x128 tile (640 threads): warpgroup c
// multiplies weight block c % 2 (64 rows) for the stages of parity c / 2, so that each m64
// block has two warpgroups converting for it, the two sums to be added at the end (not done
// here). Two or three fragment buffers (`wait_group 1` or 2) instead of four, to fit the 96
// registers ptxas gives 640 threads; it still serializes the wgmmas (C7512). The producer
// is as above; `empty` takes the 256 arrivals of the
// stage's two warpgroups.
template <bool CONVERT, int FRAGS>
__global__ void __launch_bounds__(640, 1) run_alternate(long long* cycles, float* sink, const uint8_t* weights,
                                                        const uint8_t* scales, const uint8_t* images) {
  extern __shared__ uint8_t smem_raw[];
  const Ring ring = setup_ring<2>(smem_raw, 129, 256);
  const uint32_t base = ring.base, full0 = ring.full0, empty0 = ring.empty0;
  const int tid = threadIdx.x;
  const int role = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (role == 4) {
    produce<true, true, SPIN, 2>(ring, tid - 4 * 128, weights, scales, images);
    return;
  }
  const int c = role, blk = c % 2, parity = c / 2, w = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int r0 = 64 * blk + 16 * w + g;
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; i++) d[i] = 0.f;
  uint32_t frags[FRAGS][4];
  uint32_t words[4], sc[2], next_words[4], next_sc[2];
  auto read = [&](int slot) { read_raw<2, 0>(ring, slot, r0, t, words, sc); };
  bar_wait(full0 + 8 * parity, 0);
  long long t0 = clock64();
  read(parity);
#pragma unroll
  for (int i = 0; i < 4; i++) next_words[i] = words[i];
  next_sc[0] = sc[0], next_sc[1] = sc[1];
  int held = 0;
  for (int s = parity; s < STAGES; s += 4) {
#pragma unroll
    for (int S = 0; S < 2; S++) {
      const int stage = s + 2 * S, slot = stage % SLOTS;
      const uint64_t act = desc(base + slot * IMAGE);
#pragma unroll
      for (int i = 0; i < 4; i++) words[i] = next_words[i];
      const uint32_t sc0 = next_sc[0], sc1 = next_sc[1];
      uint32_t cur[4] = {words[0], words[1], words[2], words[3]};
#pragma unroll
      for (int J = 0; J < 4; J++) {
        const int P = (S * 4 + J) % FRAGS;
        frags[P][0] = pair<CONVERT>(cur[(2 * J) / 4], (2 * J) % 4, sc0);
        frags[P][1] = pair<CONVERT>(cur[2 + (2 * J) / 4], (2 * J) % 4, sc1);
        frags[P][2] = pair<CONVERT>(cur[(2 * J + 1) / 4], (2 * J + 1) % 4, sc0);
        frags[P][3] = pair<CONVERT>(cur[2 + (2 * J + 1) / 4], (2 * J + 1) % 4, sc1);
        fence();
        mma_rs_n128(d, frags[P], act + 2 * J, stage > parity || J > 0);
        commit();
        if (J == 3) {
          const int next = stage + 2 < STAGES ? stage + 2 : stage;
          bar_wait(full0 + 8 * (next % SLOTS), (next / SLOTS) & 1);
          read(next % SLOTS);
#pragma unroll
          for (int i = 0; i < 4; i++) next_words[i] = words[i];
          next_sc[0] = sc[0], next_sc[1] = sc[1];
        }
        if (S == 1 && J == 3) {
          wait<0>();
          bar_arrive(empty0 + 8 * slot);
        } else {
          wait<FRAGS - 1>();
          if (S == 1 && J == FRAGS - 2) bar_arrive(empty0 + 8 * held);
          if (S == 0 && J == 3) held = slot;
        }
      }
    }
  }
  wait<0>();
  long long t1 = clock64();
  float acc = 0;
#pragma unroll
  for (int i = 0; i < 64; i++) acc += d[i];
  if (acc == 1234.5f) sink[tid] = acc;
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
}

template <bool C, int FRAGS>
void measure_alternate(const char* name, int sms, long long* dc, float* ds, const uint8_t* wts, const uint8_t* scl, const uint8_t* img) {
  run_and_report(name, run_alternate<C, FRAGS>, sms, 640, smem_bytes(2), 128, dc, ds, wts, scl, img);
}

void simple_series(int sms, long long* dc, float* ds, const uint8_t* wts, const uint8_t* scl, const uint8_t* img) {
  constexpr int NP = NO_PRODUCER;
  measure<false, false, true, 3, SPIN, false, NP>("no ring: conversion", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, CONST_SCALE>("no ring: const scale", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, ONE_SLOT>("no ring: one slot", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, ALWAYS_ACC>("no ring: always acc", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, ONE_LOAD>("no ring: one load", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, ALL_FOUR>("no ring: all four", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, ALL_FOUR & ~CONST_SCALE>("no ring: all but const scale", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, ALL_FOUR & ~ONE_SLOT>("no ring: all but one slot", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, ALL_FOUR & ~ALWAYS_ACC>("no ring: all but always acc", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, ALL_FOUR & ~ONE_LOAD>("no ring: all but one load", sms, dc, ds, wts, scl, img);
  measure<false, false, false, 3, SPIN, false, NP>("no ring: no conversion", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 0, 2, ALL_FOUR>("ring: all, all four simplified", sms, dc, ds, wts, scl, img);
  measure<true, true, true>("ring: weights, scales, images, conversion", sms, dc, ds, wts, scl, img);
  constexpr int PW = ARRIVE_PER_WARP;
  measure<false, false, true, 3, SPIN, false, FULL_RING, 0, 2, PW>("ring: no copies, per-warp arrivals", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 256, 2, PW>("ring: no copies, per-warp, wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 0, 2, PW>("ring: all, per-warp arrivals", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 256, 2, PW>("ring: all, per-warp, wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_BARRIERS>("consumers' barriers alone", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_BARRIERS, 256>("consumers' barriers alone, wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<true, false, true, 3, SPIN, false, FULL_RING, 0, 2, PRODUCER_IMAGES>("ring: images built by the producer", sms, dc, ds, wts, scl, img);
  measure<true, false, true, 3, SPIN, false, FULL_RING, 0, 2>("ring: no image copies (same build)", sms, dc, ds, wts, scl, img);
  measure<true, false, false, 3, SPIN, false, FULL_RING, 0, 2, PRODUCER_IMAGES>("ring: producer images, no conversion", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 0, 2, SPLIT_WAIT>("ring: all, full tested at step 2", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 0, 2, SPLIT_WAIT | EARLY_WAIT>("ring: all, full tested at step 1", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 0, 2, SPLIT_WAIT | DEEP_RING>("deep ring: no copies, tested at step 2", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 256, 2, SPLIT_WAIT | DEEP_RING>("deep ring: tested at step 2, 256 later", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 256, 2, SPLIT_WAIT>("ring: all, tested at step 2, 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_WAITS>("consumers' full waits alone", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_WAITS, 256>("consumers' full waits alone, 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_ARRIVALS>("consumers' empty arrivals alone", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_ARRIVALS, 256>("consumers' empty arrivals alone, 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_BARRIERS, 0, 2, EARLY_WAIT>("consumers' barriers alone, early wait", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_BARRIERS, 256, 2, EARLY_WAIT>("consumers' barriers, early wait, 256 later", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 0, 2, EARLY_WAIT>("ring: all, early wait", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 256, 2, EARLY_WAIT>("ring: all, early wait, 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 0, 2, EARLY_WAIT>("ring: no copies, early wait", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, POLLING_PRODUCER>("polling producer alone", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, POLLING_PRODUCER, 256>("polling producer alone, wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SUSPEND, false, POLLING_PRODUCER, 256>("suspending producer alone, 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 0, 2, DEEP_RING>("deep ring: no copies", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 256, 2, DEEP_RING>("deep ring: no copies, wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 128, 2, DEEP_RING>("deep ring: no copies, wg 1 128 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 256, 2, DEEP_RING | PW>("deep ring: no copies, per-warp, 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 256>("ring: no copies, wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NO_PRODUCER, 128>("no ring, conversion, warpgroup 1 128 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NO_PRODUCER, 512>("no ring, conversion, warpgroup 1 512 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NO_PRODUCER, 256>("no ring, conversion, warpgroup 1 256 later", sms, dc, ds, wts, scl, img);
  measure_alternate<true, 2>("4 wg alternate, 2 fragment buffers", sms, dc, ds, wts, scl, img);
  measure_alternate<false, 2>("4 wg alternate, 2 buffers, no conversion", sms, dc, ds, wts, scl, img);
  measure_alternate<true, 3>("4 wg alternate, 3 fragment buffers", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 0, 3>("ring, 3 consumer warpgroups: all", sms, dc, ds, wts, scl, img);
}

// The drains a stage apart (OFFSET_DRAIN) against the same loops with both warpgroups
// draining together, in one build.
void drains_series(int sms, long long* dc, float* ds, const uint8_t* wts, const uint8_t* scl, const uint8_t* img) {
  constexpr int NP = NO_PRODUCER, FR = FULL_RING, OD = OFFSET_DRAIN;
  measure<false, false, true, 3, SPIN, false, NP>("no ring: conversion", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 0, 2, OD>("no ring: drains apart", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 256>("no ring: wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NP, 256, 2, OD>("no ring: drains apart, wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FR>("ring: all", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FR, 0, 2, OD>("ring: all, drains apart", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FR, 256, 2, OD>("ring: all, drains apart, wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FR>("ring: no copies", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FR, 0, 2, OD>("ring: no copies, drains apart", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FR, 0, 2, DEEP_RING>("deep ring: no copies", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FR, 0, 2, DEEP_RING | OD>("deep ring: no copies, drains apart", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_WAITS, 0, 2, OD>("consumer waits only, drains apart", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, CONSUMER_ARRIVALS, 0, 2, OD>("consumer arrivals only, drains apart", sms, dc, ds, wts, scl, img);
}

// One `full` barrier per pair of stages (PAIR_FULL) against one per stage, in one build.
void pairs_series(int sms, long long* dc, float* ds, const uint8_t* wts, const uint8_t* scl, const uint8_t* img) {
  constexpr int FR = FULL_RING, PF = PAIR_FULL;
  measure<true, true, true, 3, SPIN, false, FR>("ring: all", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FR, 0, 2, PF>("ring: all, full per pair", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FR, 256, 2, PF>("ring: all, full per pair, wg 1 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FR>("ring: no copies", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FR, 0, 2, PF>("ring: no copies, full per pair", sms, dc, ds, wts, scl, img);
  measure<true, true, false, 3, SPIN, false, FR>("ring: no conversion", sms, dc, ds, wts, scl, img);
  measure<true, true, false, 3, SPIN, false, FR, 0, 2, PF>("ring: no conversion, full per pair", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FR, 0, 3>("ring, 3 consumer warpgroups: all", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FR, 0, 3, PF>("ring, 3 consumer warpgroups: full per pair", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NO_PRODUCER>("no ring: conversion", sms, dc, ds, wts, scl, img);
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long* dc;
  float* ds;
  uint8_t *wts, *scl, *img;
  cudaMalloc(&dc, sms * sizeof(long long));
  cudaMalloc(&ds, 4096 * sizeof(float));
  size_t wbytes = (size_t)sms * MAX_CWG * 64 * ROW_BYTES, sbytes = (size_t)sms * STAGES * 1024, ibytes = (size_t)IMAGES * IMAGE;
  cudaMalloc(&wts, wbytes);
  cudaMalloc(&scl, sbytes);
  cudaMalloc(&img, ibytes);
  cudaMemset(wts, 0x35, wbytes);
  cudaMemset(scl, 0x38, sbytes);
  cudaMemset(img, 0x00, ibytes);
  if (argc > 1 && std::string(argv[1]) == "pairs") {
    pairs_series(sms, dc, ds, wts, scl, img);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "drains") {
    drains_series(sms, dc, ds, wts, scl, img);
    return 0;
  }
  if (argc > 1) {
    simple_series(sms, dc, ds, wts, scl, img);
    return 0;
  }
  measure<true, true, true>("ring: weights, scales, images, conversion", sms, dc, ds, wts, scl, img);
  measure<true, true, false>("ring: no conversion", sms, dc, ds, wts, scl, img);
  measure<false, true, true>("ring: no weight copies", sms, dc, ds, wts, scl, img);
  measure<true, false, true>("ring: no image copies", sms, dc, ds, wts, scl, img);
  measure<false, false, true>("ring: no copies", sms, dc, ds, wts, scl, img);
  measure<false, false, false>("ring: no copies, no conversion", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 2>("ring: all, next stage read at step 2", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 1>("ring: all, next stage read at step 1", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 0>("ring: all, next stage read at step 0", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 0>("ring: no copies, read at step 0", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SUSPEND>("ring: no copies, producer suspends", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SLEEP>("ring: no copies, producer sleeps", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SUSPEND>("ring: all, producer suspends", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SLEEP>("ring: all, producer sleeps", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, true>("ring: no copies, a stage converted at once", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, true>("ring: all, a stage converted at once", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NO_PRODUCER>("no ring, 256 threads, conversion", sms, dc, ds, wts, scl, img);
  measure<false, false, false, 3, SPIN, false, NO_PRODUCER>("no ring, 256 threads, no conversion", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, IDLE_PRODUCER>("no ring, producer warps exit, conversion", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 128>("ring: all, warpgroup 1 128 cycles later", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 256>("ring: all, warpgroup 1 256 cycles later", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 512>("ring: all, warpgroup 1 512 cycles later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 256>("ring: no copies, warpgroup 1 256 later", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, NO_PRODUCER, 256>("no ring, conversion, warpgroup 1 256 later", sms, dc, ds, wts, scl, img);
  measure<true, true, true, 3, SPIN, false, FULL_RING, 0, 3>("ring, 3 consumer warpgroups: all", sms, dc, ds, wts, scl, img);
  measure<false, false, true, 3, SPIN, false, FULL_RING, 0, 3>("ring, 3 consumer warpgroups: no copies", sms, dc, ds, wts, scl, img);
  measure<true, true, false, 3, SPIN, false, FULL_RING, 0, 3>("ring, 3 consumer warpgroups: no conversion", sms, dc, ds, wts, scl, img);
  measure<true, true, true>("ring: weights, scales, images, conversion", sms, dc, ds, wts, scl, img);
  return 0;
}
