// Does mul.rn.bf16x2 on sm_90 keep subnormal inputs? a = bf16 bits of x * 2^-126 for every
// e2m1 magnitude code c (bits c << 6: c = 1 is the subnormal 2^-127), b = bf16 of 2^119 * s.
#include <cstdio>
#include <cstdint>
#include <cstring>
__global__ void k(const uint32_t* a, const uint32_t* b, uint32_t* d, int n) {
  int i = threadIdx.x;
  if (i < n) { uint32_t r; asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a[i]), "r"(b[i])); d[i] = r; }
}
static float bf(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t tobf(float f) { uint32_t u; memcpy(&u, &f, 4); return (uint16_t)(u >> 16); }
int main() {
  const float sf[] = {1.0f, 0.001953125f, 448.0f, 3.0f, 0.375f};
  const int n = 8 * 5;
  uint32_t ha[n], hb[n], hd[n];
  for (int s = 0; s < 5; s++) for (int c = 0; c < 8; c++) {
    int i = s * 8 + c;
    uint16_t lo = (uint16_t)(c << 6), hi = (uint16_t)(0x8000 | (c << 6));
    ha[i] = lo | ((uint32_t)hi << 16);
    uint16_t sb = tobf(sf[s] * 6.6461399789245794e35f);  // 2^119
    hb[i] = sb | ((uint32_t)sb << 16);
  }
  uint32_t *da, *db, *dd;
  cudaMalloc(&da, sizeof ha); cudaMalloc(&db, sizeof hb); cudaMalloc(&dd, sizeof hd);
  cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice); cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice);
  k<<<1, 64>>>(da, db, dd, n);
  cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost);
  const float e2m1[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  int bad = 0;
  for (int s = 0; s < 5; s++) for (int c = 0; c < 8; c++) {
    int i = s * 8 + c;
    float want = e2m1[c] * sf[s] / 128.0f;
    float lo = bf((uint16_t)hd[i]), hi = bf((uint16_t)(hd[i] >> 16));
    if (lo != want || hi != -want) { bad++; printf("sf %g code %d: got %g %g want %g\n", sf[s], c, lo, hi, want); }
  }
  printf("mul.rn.bf16x2 subnormal probe: %d of %d wrong\n", bad, n);
  return 0;
}
