// How close can wgmma come to the tensor cores' peak on an SM, with the weights as the
// register operand (RS, the sm90v2 design) or staged in shared memory (SS)? Each CTA (one
// per SM) runs WGS consumer warpgroups; each issues per 64-value stage four
// `wgmma m64nNk16`, committed one group each, `wait_group 3` after each, and drains every
// two stages as the kernel does. CONV adds the kernel's per-weight work: each thread
// loads four raw words per stage and turns them into 16 fp16x2 registers (7 integer
// ops, 4 `cvt.rn.f16x2.e4m3x2`, 4 `mul.rn.f16x2` per word), either for the next stage
// while the current stage's wgmmas run (STAGE_AHEAD) or each step's word right before its
// wgmma (JUST_IN_TIME, sm90v2's order, RS only); RS feeds them to wgmma as A fragments, SS
// stores them (st.shared.v4) as the next stage's weight tile, shared by both warpgroups,
// then `fence.proxy.async` and a CTA barrier. IMAGE and WEIGHTS add a copy warp that streams
// a stage's bytes into a ring of its own in shared memory, as sm90v2's producer does
// (`cp.async.bulk` from global memory: the image from 4 MiB that every CTA reads, so L2
// keeps it, the weights from a 60 MiB stream of the CTA's own), at most three stages
// ahead of warpgroup 0; the wgmmas never read those bytes, so what they cost is the
// traffic alone. Cycles from clock64 per CTA, median over CTAs;
// utilisation = wgmmas x (N/2 cycles each at 2048 fp16 FMA per clock per SM) / cycles.
// Values are arbitrary: only the rate is measured.
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o wgmma-rates wgmma-rates.cu && ./wgmma-rates
// (with `-arch=sm_90a` alone, CUDA 13.0's nvcc on the device built compute_90 PTX, which has
// no wgmma)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "wgmma.cuh"

__device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm volatile("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ uint32_t shr4(uint32_t a) {
  uint32_t d;
  asm volatile("shr.b32 %0, %1, 4;" : "=r"(d) : "r"(a));
  return d;
}
__device__ __forceinline__ uint32_t f2fp(uint32_t x, bool hi) {
  uint32_t d;
  if (hi)
    asm volatile("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, hi; }" : "=r"(d) : "r"(x));
  else
    asm volatile("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, lo; }" : "=r"(d) : "r"(x));
  return d;
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm volatile("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// One raw word of eight codes -> four fp16x2 registers, about as the kernel does it.
__device__ __forceinline__ void convert(uint32_t w, uint32_t scale, uint32_t* out) {
  uint32_t even = lop3(w, 0x07070707u, 0x80808080u);
  uint32_t odd = lop3(shr4(w), 0x07070707u, 0x80808080u);
  uint32_t e2 = lop3(even, 0x00ff00ffu, odd);
  uint32_t o2 = lop3(shr4(even), 0xff00ff00u, odd);
  out[0] = hmul2(f2fp(e2, false), scale);
  out[1] = hmul2(f2fp(e2, true), scale);
  out[2] = hmul2(f2fp(o2, false), scale);
  out[3] = hmul2(f2fp(o2, true), scale);
}

template <int N, bool RS>
__device__ __forceinline__ void mma(float* d, const uint32_t* a, uint64_t adesc, uint64_t b) {
  if constexpr (RS) {
    if constexpr (N == 64) mma_rs_n64(d, a, b, 1);
    if constexpr (N == 128) mma_rs_n128(d, a, b, 1);
    if constexpr (N == 256) mma_rs_n256(d, a, b, 1);
  } else {
    if constexpr (N == 64) mma_ss_n64(d, adesc, b, 1);
    if constexpr (N == 128) mma_ss_n128(d, adesc, b, 1);
    if constexpr (N == 256) mma_ss_n256(d, adesc, b, 1);
  }
}

constexpr int RAW_BYTES = 16 * 1024;
// CONV: none, a whole stage ahead (after the stage's wgmmas are issued), or each step's
// fragments right before its wgmma (sm90v2's order).
constexpr int NONE = 0, STAGE_AHEAD = 1, JUST_IN_TIME = 2;

// Shared memory (1024-aligned): RS: the activation image, N rows x 128 B, then raw words.
// SS: A = activation rows, 64 per warpgroup x 128 B; B = two weight tiles of N rows x 128 B
// (the stage read and the stage written), then raw words.
template <int N, bool RS, int WGS>
__host__ __device__ constexpr int smem_bytes() {
  return 1024 + (RS ? N * 128 : WGS * 64 * 128 + 2 * N * 128) + RAW_BYTES;
}
// The copy warp's ring (after the above): COPY_SLOTS slots of image + weight bytes, then
// one mbarrier per slot, then the consumers' stage counter.
constexpr int COPY_SLOTS = 4;
__host__ __device__ constexpr int copy_bytes(int image, int weights) {
  return image + weights == 0 ? 0 : COPY_SLOTS * (image + weights) + COPY_SLOTS * 8 + 16;
}
constexpr size_t GLOBAL_BYTES = 64u << 20;  // weights stream from here; images from its first 4 MiB
constexpr size_t IMAGE_BYTES = 4u << 20;


template <int N, bool RS, int WGS, int CONV, int IMAGE = 0, int WEIGHTS = 0>
__global__ void __launch_bounds__(WGS * 128 + (IMAGE + WEIGHTS > 0 ? 32 : 0), 1) run(long long* cycles, float* sink, const uint8_t* gsrc, int iters) {
  extern __shared__ uint8_t smem_raw[];
  uint32_t base = (uint32_t)__cvta_generic_to_shared(smem_raw);
  uint32_t pad = (1024 - (base & 1023)) & 1023;
  uint8_t* smem = smem_raw + pad;
  base += pad;
  const int tid = threadIdx.x, wg = tid / 128;
  const int total = smem_bytes<N, RS, WGS>() - 1024;
  // The copy warp's ring, barriers and the consumers' progress.
  constexpr int STAGE_COPY = IMAGE + WEIGHTS;
  const uint32_t ring = base + total, bars = ring + COPY_SLOTS * STAGE_COPY;
  volatile int* progress = (volatile int*)(smem + total + COPY_SLOTS * STAGE_COPY + COPY_SLOTS * 8);
  if (STAGE_COPY > 0 && tid == WGS * 128) {
    for (int i = 0; i < COPY_SLOTS; i++)
      bar_init(bars + 8 * i, 1);
    *progress = 0;
  }
  for (int i = tid * 4; i < total; i += WGS * 128 * 4) *(uint32_t*)(smem + i) = 0x3c003c00u ^ (i * 0x9e3779b9u & 0x03ff03ffu);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  const uint32_t act = base;                             // RS: N x 128 B. SS: 64 rows per warpgroup.
  const uint32_t wt = base + WGS * 64 * 128;             // SS: weight tiles 0 and 1
  const uint32_t raw = base + (RS ? N * 128 : WGS * 64 * 128 + 2 * N * 128);
  const uint64_t bdesc_rs = desc(act);
  const uint64_t adesc_ss = desc(act + wg * 64 * 128);
  const uint32_t scale = 0x3c003c00u;

  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; i++) d[i] = 0.f;
  uint32_t frag[2][16];
#pragma unroll
  for (int i = 0; i < 16; i++) {
    frag[0][i] = *(const uint32_t*)(smem + 4 * ((tid + 37 * i) % 1024));
    frag[1][i] = *(const uint32_t*)(smem + 4 * ((tid + 53 * i + 11) % 1024));
  }

  // One stage: four k16 steps on set `cur`; meanwhile convert the next stage into `nxt`.
  uint4 next_raw = *(const uint4*)(smem + (raw - base) + tid * 16);
  auto stage = [&](int cur, int nxt, int s) {
    if (RS && CONV == JUST_IN_TIME) {
      // Each step's fragments converted right before its wgmma, from the stage's raw
      // words read during the last stage (the kernel's order), into one of four buffers.
      uint32_t ws[4] = {next_raw.x, next_raw.y, next_raw.z, next_raw.w};
#pragma unroll
      for (int j = 0; j < 4; j++) {
        convert(ws[j], scale, &frag[j / 2][4 * (j % 2)]);
        if (j == 3) next_raw = *(const uint4*)(smem + (raw - base) + (((s + 1) * WGS * 128 + tid) * 16) % RAW_BYTES);
        fence();
        mma<N, RS>(d, &frag[j / 2][4 * (j % 2)], 0, bdesc_rs + 2 * j);
        commit();
        wait<3>();
      }
      (void)cur, (void)nxt;
      return;
    }
    if (RS && CONV) fence();
#pragma unroll
    for (int j = 0; j < 4; j++) {
      mma<N, RS>(d, &frag[cur][4 * j], desc(wt + cur * N * 128) + 2 * j, RS ? bdesc_rs + 2 * j : bdesc_rs);
      commit();
      wait<3>();
    }
    if (CONV) {
      uint4 w = *(const uint4*)(smem + (raw - base) + ((s * WGS * 128 + tid) * 16) % RAW_BYTES);
      uint32_t ws[4] = {w.x, w.y, w.z, w.w};
      // (SS: the tile about to be overwritten was read by the last stage, whose wgmmas the
      // waits above have retired in this warpgroup; a real kernel would keep three tiles so
      // that the other warpgroup's are retired too.)
#pragma unroll
      for (int q = 0; q < 4; q++) convert(ws[q], scale, &frag[nxt][4 * q]);
      if (!RS) {
        uint8_t* dst = smem + (wt - base) + nxt * N * 128 + (tid * 64) % (N * 128);
#pragma unroll
        for (int q = 0; q < 4; q++)
          *(uint4*)(dst + 16 * q) = make_uint4(frag[nxt][4 * q], frag[nxt][4 * q + 1], frag[nxt][4 * q + 2], frag[nxt][4 * q + 3]);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync 1, %0;" ::"n"(WGS * 128) : "memory");
      }
    }
  };
  (void)adesc_ss;

  if (tid >= WGS * 128) {
    // The copy warp: stage s's image (from the 4 MiB the CTAs share, as L2 keeps it) and
    // weights (this CTA's own stream), at most COPY_SLOTS - 1 stages ahead of warpgroup 0.
    __syncthreads();
    if (STAGE_COPY > 0 && tid == WGS * 128) {
      for (int s = 0; s < 2 * iters; s++) {
        int slot = s % COPY_SLOTS;
        while (*progress < s - (COPY_SLOTS - 1)) {
        }
        if (s >= COPY_SLOTS) bar_wait(bars + 8 * slot, ((s / COPY_SLOTS) - 1) & 1);
        uint32_t dst = ring + slot * STAGE_COPY;
        bar_expect(bars + 8 * slot, STAGE_COPY);
        if constexpr (IMAGE > 0) bulk(dst, gsrc + (size_t)(s % (IMAGE_BYTES / IMAGE)) * IMAGE, IMAGE, bars + 8 * slot);
        if constexpr (WEIGHTS > 0) {
          size_t w = ((size_t)blockIdx.x * 2 * iters + s) * WEIGHTS % (GLOBAL_BYTES - IMAGE_BYTES);
          bulk(dst + IMAGE, gsrc + IMAGE_BYTES + w, WEIGHTS, bars + 8 * slot);
        }
      }
      for (int s = 2 * iters - COPY_SLOTS; s < 2 * iters; s++)
        if (s >= 0) bar_wait(bars + 8 * (s % COPY_SLOTS), (s / COPY_SLOTS) & 1);
    }
    __syncthreads();
    return;
  }
  fence();
  __syncthreads();
  long long t0 = clock64();
  for (int it = 0; it < iters; it++) {
    stage(0, 1, 2 * it);
    if (STAGE_COPY > 0 && tid == 0) *progress = 2 * it + 1;
    stage(1, 0, 2 * it + 1);
    if (STAGE_COPY > 0 && tid == 0) *progress = 2 * it + 2;
    wait<0>();
  }
  wait<0>();
  __syncthreads();
  long long t1 = clock64();
  float acc = 0;
#pragma unroll
  for (int i = 0; i < N / 2; i++) acc += d[i];
  if (acc == 1234.5f) sink[tid] = acc;
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int N, bool RS, int WGS, int CONV, int IMAGE = 0, int WEIGHTS = 0>
void measure(const char* name, int sms, long long* dc, float* ds, const uint8_t* gsrc) {
  const int iters = 2000, smem = smem_bytes<N, RS, WGS>() + copy_bytes(IMAGE, WEIGHTS);
  auto kernel = run<N, RS, WGS, CONV, IMAGE, WEIGHTS>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const int threads = WGS * 128 + (IMAGE + WEIGHTS > 0 ? 32 : 0);
  kernel<<<sms, threads, smem>>>(dc, ds, gsrc, 20);
  kernel<<<sms, threads, smem>>>(dc, ds, gsrc, iters);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { printf("%-34s cuda error %s\n", name, cudaGetErrorString(e)); return; }
  std::vector<long long> c(sms);
  cudaMemcpy(c.data(), dc, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  std::sort(c.begin(), c.end());
  double wgmmas = double(iters) * 8 * WGS, ideal = wgmmas * (N / 2);
  printf("%-34s %8.1f cycles per stage per warpgroup, tensor %5.1f %% of peak\n", name,
         double(c[sms / 2]) / (2.0 * iters), 100.0 * ideal / double(c[sms / 2]));
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long* dc;
  float* ds;
  cudaMalloc(&dc, sms * sizeof(long long));
  cudaMalloc(&ds, 4096 * sizeof(float));
  uint8_t* gsrc;
  cudaMalloc(&gsrc, GLOBAL_BYTES);
  cudaMemset(gsrc, 0x11, GLOBAL_BYTES);
  measure<128, true, 2, NONE>("RS m64n128k16, 2 wg", sms, dc, ds, gsrc);
  measure<128, false, 2, NONE>("SS m64n128k16, 2 wg", sms, dc, ds, gsrc);
  measure<256, true, 2, NONE>("RS m64n256k16, 2 wg", sms, dc, ds, gsrc);
  measure<256, false, 2, NONE>("SS m64n256k16, 2 wg", sms, dc, ds, gsrc);
  measure<64, true, 2, NONE>("RS m64n64k16, 2 wg", sms, dc, ds, gsrc);
  measure<64, false, 2, NONE>("SS m64n64k16, 2 wg", sms, dc, ds, gsrc);
  measure<128, true, 3, NONE>("RS m64n128k16, 3 wg", sms, dc, ds, gsrc);
  measure<128, false, 3, NONE>("SS m64n128k16, 3 wg", sms, dc, ds, gsrc);
  measure<128, true, 2, STAGE_AHEAD>("RS m64n128k16, 2 wg, convert", sms, dc, ds, gsrc);
  measure<128, false, 2, STAGE_AHEAD>("SS m64n128k16, 2 wg, convert", sms, dc, ds, gsrc);
  measure<256, true, 2, STAGE_AHEAD>("RS m64n256k16, 2 wg, convert", sms, dc, ds, gsrc);
  measure<256, false, 2, STAGE_AHEAD>("SS m64n256k16, 2 wg, convert", sms, dc, ds, gsrc);
  measure<128, true, 3, STAGE_AHEAD>("RS m64n128k16, 3 wg, convert", sms, dc, ds, gsrc);
  measure<128, false, 3, STAGE_AHEAD>("SS m64n128k16, 3 wg, convert", sms, dc, ds, gsrc);
  // With the copies a CTA of the kernel makes per stage, paced by warpgroup 0's progress.
  measure<128, true, 2, STAGE_AHEAD, 16384, 4096>("RS n128, convert, copy 16+4 KiB", sms, dc, ds, gsrc);
  measure<128, true, 2, STAGE_AHEAD, 16384, 0>("RS n128, convert, copy 16 KiB", sms, dc, ds, gsrc);
  measure<128, true, 2, STAGE_AHEAD, 0, 4096>("RS n128, convert, copy 4 KiB", sms, dc, ds, gsrc);
  measure<128, true, 2, NONE, 16384, 4096>("RS n128, copy 16+4 KiB", sms, dc, ds, gsrc);
  measure<128, true, 2, JUST_IN_TIME>("RS n128, convert per step", sms, dc, ds, gsrc);
  measure<128, true, 2, JUST_IN_TIME, 16384, 4096>("RS n128, convert per step, copy 16+4", sms, dc, ds, gsrc);
  measure<128, true, 3, JUST_IN_TIME>("RS n128 3 wg, convert per step", sms, dc, ds, gsrc);
  measure<128, true, 3, STAGE_AHEAD, 16384, 6144>("RS n128 3 wg, convert, copy 16+6 KiB", sms, dc, ds, gsrc);
  return 0;
}
