// What each instruction of the e2m1 -> fp16 conversion costs an SM: warp instructions per
// clock per SM for long runs of independent `cvt.rn.f16x2.e4m3x2` (SASS F2FP), `prmt`,
// `lop3`, `shf`, `mul.rn.f16x2` (HMUL2) and mixes of them, one CTA of 32 warps per SM,
// eight independent chains per thread, cycles from `clock64` per CTA (median over CTAs).
// Then: is `mul.rn.f16x2` exact on the fp16 subnormals that an e2m1 code built straight
// into fp16 bits (value * 2^-14) gives, times fp16(sf * 2^7) for every e4m3 scale?
//
//   nvcc -O3 -arch=sm_90a -o convert-rates convert-rates.cu && ./convert-rates
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#define CHAINS 8

__device__ __forceinline__ uint32_t f2fp(uint32_t x) {
  uint32_t d;
  asm volatile("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, hi; }" : "=r"(d) : "r"(x));
  return d;
}
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t d;
  asm volatile("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
}
__device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm volatile("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ uint32_t shf(uint32_t a, uint32_t b) {
  uint32_t d;
  asm volatile("shf.l.wrap.b32 %0, %1, %2, 5;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm volatile("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// OP: 0 f2fp, 1 prmt, 2 lop3, 3 shf, 4 hmul2, 5 f2fp+hmul2, 6 prmt+hmul2, 7 lop3+prmt,
// 8 lop3+hmul2, 9 f2fp+lop3
template <int OP>
__global__ void run(long long* cycles, uint32_t* sink, uint32_t seed, int iters) {
  uint32_t r[CHAINS];
  for (int i = 0; i < CHAINS; i++) r[i] = seed * (threadIdx.x + 7 * i + 1) | 0x3c003c00u;
  uint32_t k1 = seed ^ 0x1234u, k2 = 0x3c003c00u, sel = 0x3210u ^ (seed & 0x0101u);
  __syncthreads();
  long long t0 = clock64();
  for (int it = 0; it < iters; it++) {
#pragma unroll
    for (int i = 0; i < CHAINS; i++) {
      uint32_t x = r[i];
      if (OP == 0) x = f2fp(x);
      if (OP == 1) x = prmt(x, k1, sel);
      if (OP == 2) x = lop3(x, k1, k2);
      if (OP == 3) x = shf(x, k1);
      if (OP == 4) x = hmul2(x, k2);
      if (OP == 5) x = hmul2(f2fp(x), k2);
      if (OP == 6) x = hmul2(prmt(x, k1, sel), k2);
      if (OP == 7) x = prmt(lop3(x, k1, k2), k1, sel);
      if (OP == 8) x = hmul2(lop3(x, k1, k2), k2);
      if (OP == 9) x = lop3(f2fp(x), k1, k2);
      r[i] = x;
    }
  }
  __syncthreads();
  long long t1 = clock64();
  uint32_t acc = 0;
  for (int i = 0; i < CHAINS; i++) acc ^= r[i];
  if (acc == 0x9e3779b9u) sink[0] = acc;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int OP>
double rate(int sms, long long* dc, uint32_t* ds, int per_op) {
  const int iters = 4096, threads = 1024;
  run<OP><<<sms, threads>>>(dc, ds, 0x9u, 64);
  run<OP><<<sms, threads>>>(dc, ds, 0x9u, iters);
  cudaDeviceSynchronize();
  std::vector<long long> c(sms);
  cudaMemcpy(c.data(), dc, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  std::sort(c.begin(), c.end());
  double warp_instr = double(threads / 32) * iters * CHAINS * per_op;
  return warp_instr / double(c[sms / 2]);
}

// Exactness: e2m1 code c (sign s, magnitude m) as fp16 bits s<<15 | m<<9 (= value * 2^-14),
// times fp16(sf * 128), must be value * sf * 2^-7 exactly for every code and every finite
// e4m3 scale.
__global__ void exact(const uint32_t* a, const uint32_t* b, uint32_t* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = hmul2(a[i], b[i]);
}

static float half_to_float(uint16_t h) {
  uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), (int)e - 25);
  return s ? -v : v;
}
static float e4m3(uint8_t b) {
  int e = (b >> 3) & 15, m = b & 7;
  float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
  return (b & 0x80) ? -v : v;
}
static uint16_t float_to_half_exact(float f) {  // only for values exact in fp16 (normal)
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t s = u >> 31;
  int e = (int)((u >> 23) & 255) - 127 + 15;
  uint32_t m = (u >> 13) & 1023;
  if (f == 0) return (uint16_t)(s << 15);
  return (uint16_t)((s << 15) | (e << 10) | m);
}

int main() {
  int dev = 0, sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  long long* dc;
  uint32_t* ds;
  cudaMalloc(&dc, sms * sizeof(long long));
  cudaMalloc(&ds, 64);
  printf("warp instructions per clock per SM (4 = one per scheduler per clock):\n");
  printf("  f2fp (cvt.rn.f16x2.e4m3x2)  %.3f\n", rate<0>(sms, dc, ds, 1));
  printf("  prmt                        %.3f\n", rate<1>(sms, dc, ds, 1));
  printf("  lop3                        %.3f\n", rate<2>(sms, dc, ds, 1));
  printf("  shf                         %.3f\n", rate<3>(sms, dc, ds, 1));
  printf("  hmul2 (mul.rn.f16x2)        %.3f\n", rate<4>(sms, dc, ds, 1));
  printf("  f2fp + hmul2                %.3f\n", rate<5>(sms, dc, ds, 2));
  printf("  prmt + hmul2                %.3f\n", rate<6>(sms, dc, ds, 2));
  printf("  lop3 + prmt                 %.3f\n", rate<7>(sms, dc, ds, 2));
  printf("  lop3 + hmul2                %.3f\n", rate<8>(sms, dc, ds, 2));
  printf("  f2fp + lop3                 %.3f\n", rate<9>(sms, dc, ds, 2));

  // Exactness over every finite e4m3 scale (sign bit clear, not 0x7f) and code.
  std::vector<uint32_t> ha, hb;
  std::vector<float> want_lo, want_hi;
  for (int sf = 0; sf < 0x7f; sf++) {
    float s = e4m3((uint8_t)sf);
    float scaled = s * 128.0f;
    if (s == 0) continue;
    uint16_t sb = float_to_half_exact(scaled);
    if (half_to_float(sb) != scaled) { printf("scale %d: fp16(sf*128) not exact\n", sf); return 1; }
    for (int c = 0; c < 16; c++) {
      uint16_t lo = (uint16_t)(((c & 8) << 12) | ((c & 7) << 9));
      int c2 = c ^ 8;
      uint16_t hi = (uint16_t)(((c2 & 8) << 12) | ((c2 & 7) << 9));
      ha.push_back(lo | ((uint32_t)hi << 16));
      hb.push_back(sb | ((uint32_t)sb << 16));
      const float mag[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
      want_lo.push_back(((c & 8) ? -1 : 1) * mag[c & 7] * s / 128.0f);
      want_hi.push_back(((c2 & 8) ? -1 : 1) * mag[c2 & 7] * s / 128.0f);
    }
  }
  int n = (int)ha.size();
  uint32_t *da, *db, *dd;
  cudaMalloc(&da, n * 4);
  cudaMalloc(&db, n * 4);
  cudaMalloc(&dd, n * 4);
  cudaMemcpy(da, ha.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, hb.data(), n * 4, cudaMemcpyHostToDevice);
  exact<<<(n + 255) / 256, 256>>>(da, db, dd, n);
  std::vector<uint32_t> hd(n);
  cudaMemcpy(hd.data(), dd, n * 4, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    float lo = half_to_float((uint16_t)hd[i]), hi = half_to_float((uint16_t)(hd[i] >> 16));
    if (lo != want_lo[i] || hi != want_hi[i]) {
      if (bad++ < 10) printf("pair %d: got %g %g want %g %g\n", i, lo, hi, want_lo[i], want_hi[i]);
    }
  }
  printf("fp16 value*2^-14 times fp16(sf*2^7): %d of %d pairs wrong\n", bad, n);
  cudaError_t e = cudaGetLastError();
  printf("cuda: %s\n", cudaGetErrorString(e));
  return bad != 0 || e != cudaSuccess;
}
