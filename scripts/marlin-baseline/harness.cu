// marlin-bench: standalone baseline benchmark of vLLM's Marlin NVFP4 W4A16 GEMM.
//
// Own code (no torch). It contains no vLLM source; build.sh downloads the vLLM
// sdist and generates/compiles these from it (see tools/):
//   * marlin_host.cu    - vLLM's marlin.cu without the torch op wrapper
//                         (marlin::marlin_mm and its exec-config heuristics)
//   * marlin_mm_decl.h  - declaration of marlin::marlin_mm taken from it
//   * sm80_kernel_*_fe2m1f_*.cu - vLLM's generate_kernels.py output limited to
//                         the NVFP4 config (fp16 and bf16 activations)
//   * repack_kernel.cuh - vLLM's gptq_marlin_repack kernel template
// The weight/scale preparation that vLLM does in Python (prepare_fp4_layer_for_marlin
// and the helpers it calls) is re-implemented on the host below;
// tools/check_prep_vs_vllm.py compares it bit for bit with vLLM's Python.
//
// C[M,N] = A[M,K] * W[N,K]^T, W in NVFP4 (e2m1 + e4m3 scale per 16 K values).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernel.h"          // vLLM header (ScalarType, Marlin constants)
#include "marlin_mm_decl.h"  // generated: marlin::marlin_mm declaration
#include "repack_kernel.cuh" // generated: vLLM's repack kernel template

#ifndef MARLIN_BENCH_VLLM_VERSION
  #define MARLIN_BENCH_VLLM_VERSION "unknown"
#endif

// libstdc++.a (gcc 12, linked statically for portability) references glibc 2.36's
// arc4random from std::random_device (unused here). Defining it locally keeps the
// binary's glibc requirement at 2.34, like the team's other device binaries.
#include <sys/random.h>
extern "C" uint32_t arc4random(void) noexcept {
  uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = (uint32_t)clock();
  return v;
}

// ---------------------------------------------------------------- errors
#define CK(x)                                                             \
  do {                                                                    \
    cudaError_t e_ = (x);                                                 \
    if (e_ != cudaSuccess) {                                              \
      fprintf(stderr, "error: CUDA call failed: %s\n  %s (%s, code %d)\n  at %s:%d\n", \
              #x, cudaGetErrorString(e_), cudaGetErrorName(e_), (int)e_,  \
              __FILE__, __LINE__);                                        \
      exit(2);                                                            \
    }                                                                     \
  } while (0)

static void die(const std::string& msg) {
  fprintf(stderr, "error: %s\n", msg.c_str());
  exit(2);
}

// ---------------------------------------------------------------- launch hook
struct LaunchRec {
  int m_split, thread_m_blocks, m_block_size_8, thread_k, thread_n, threads,
      blocks, smem;
};
static std::vector<LaunchRec> g_launches;
static bool g_record = false;
void marlin_bench_on_launch(int prob_m_split, int thread_m_blocks,
                            int m_block_size_8, int thread_k, int thread_n,
                            int num_threads, int blocks, int smem_bytes) {
  if (g_record)
    g_launches.push_back({prob_m_split, thread_m_blocks, m_block_size_8,
                          thread_k, thread_n, num_threads, blocks, smem_bytes});
}

// ---------------------------------------------------------------- numerics
static const float kE2M1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
static inline float e2m1_to_float(uint8_t nib) {
  float v = kE2M1[nib & 7];
  return (nib & 8) ? -v : v;
}
static inline float e4m3fn_to_float(uint8_t b) {
  int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  float v = (e == 0) ? std::ldexp((float)m / 8.f, -6)
                     : std::ldexp(1.f + (float)m / 8.f, e - 7);
  return s ? -v : v;
}
template <class H>
static inline uint16_t bits_of(H h) {
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}
template <class H>
static inline H from_bits(uint16_t u) {
  H h;
  memcpy(&h, &u, 2);
  return h;
}
static inline uint16_t f2h_bits(float f) { return bits_of(__float2half_rn(f)); }
static inline float h_bits2f(uint16_t u) { return __half2float(from_bits<__half>(u)); }
static inline uint16_t f2bf_bits(float f) { return bits_of(__float2bfloat16_rn(f)); }
static inline float bf_bits2f(uint16_t u) { return __bfloat162float(from_bits<__nv_bfloat16>(u)); }

struct Rng {  // splitmix64
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

template <typename F>
static void parallel_for(int64_t n, F f) {
  int nt = (int)std::min<unsigned>(std::max(1u, std::thread::hardware_concurrency()), 64u);
  if (n < nt) nt = (int)std::max<int64_t>(n, 1);
  std::atomic<int64_t> next(0);
  std::vector<std::thread> th;
  for (int t = 0; t < nt; t++)
    th.emplace_back([&]() {
      for (;;) {
        int64_t i = next.fetch_add(1);
        if (i >= n) break;
        f(i);
      }
    });
  for (auto& t : th) t.join();
}

// ---------------------------------------------------------------- problem
struct Shape {
  int m, n, k;
};

struct HostProblem {
  Shape s;
  std::vector<uint8_t> w_packed;   // [N, K/2], low nibble = even k
  std::vector<uint8_t> w_scale;    // [N, K/16] e4m3fn
  std::vector<float> a;            // [M, K] exact multiples of 1/8 in [-2, 2]
  std::vector<int> rows;           // rows checked against the reference
  std::vector<double> ref;         // [rows.size(), N] exact-ish reference
};

static void make_problem(HostProblem& P, uint64_t seed, bool check_all_rows) {
  const int M = P.s.m, N = P.s.n, K = P.s.k;
  Rng r(seed ^ ((uint64_t)M << 40) ^ ((uint64_t)N << 20) ^ (uint64_t)K);
  P.w_packed.resize((size_t)N * K / 2);
  for (size_t i = 0; i < P.w_packed.size(); i += 8) {
    uint64_t v = r.next();
    memcpy(&P.w_packed[i], &v, 8);  // K/2 is a multiple of 8
  }
  P.w_scale.resize((size_t)N * (K / 16));
  for (auto& b : P.w_scale) {
    uint64_t v = r.next();
    int e = 4 + (int)(v % 5);        // 2^-3 .. 2^1 (values 0.125 .. 3.75)
    int m = (int)((v >> 8) & 7);
    b = (uint8_t)((e << 3) | m);
  }
  P.a.resize((size_t)M * K);
  for (auto& x : P.a) x = (float)((int)(r.next() % 33) - 16) / 8.f;

  // rows to check
  P.rows.clear();
  if (check_all_rows || M <= 256) {
    for (int i = 0; i < M; i++) P.rows.push_back(i);
  } else {
    for (int i = 0; i < 32; i++) P.rows.push_back(i);
    for (int i = 0; i < 64; i++) P.rows.push_back(32 + (int)((int64_t)i * (M - 64) / 64) + (i * 7) % 5);
    for (int i = M - 32; i < M; i++) P.rows.push_back(i);
    std::sort(P.rows.begin(), P.rows.end());
    P.rows.erase(std::unique(P.rows.begin(), P.rows.end()), P.rows.end());
  }

  // dequantized W (exact in float: <= 5 significant bits), global scale 1.0
  std::vector<float> wd((size_t)N * K);
  parallel_for(N, [&](int64_t n) {
    for (int k = 0; k < K; k++) {
      uint8_t byte = P.w_packed[(size_t)n * (K / 2) + k / 2];
      uint8_t nib = (k & 1) ? (byte >> 4) : (byte & 15);
      wd[(size_t)n * K + k] =
          e2m1_to_float(nib) * e4m3fn_to_float(P.w_scale[(size_t)n * (K / 16) + k / 16]);
    }
  });
  const int R = (int)P.rows.size();
  P.ref.assign((size_t)R * N, 0.0);
  parallel_for((int64_t)R * ((N + 63) / 64), [&](int64_t job) {
    int ri = (int)(job / ((N + 63) / 64));
    int n0 = (int)(job % ((N + 63) / 64)) * 64;
    const float* arow = &P.a[(size_t)P.rows[ri] * K];
    for (int n = n0; n < std::min(N, n0 + 64); n++) {
      const float* wrow = &wd[(size_t)n * K];
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int k = 0; k < K; k += 8)
        for (int j = 0; j < 8; j++) acc[j] += (double)arow[k + j] * (double)wrow[k + j];
      double s = 0;
      for (int j = 0; j < 8; j++) s += acc[j];
      P.ref[(size_t)ri * N + n] = s;
    }
  });
}

// ---- host re-implementation of vLLM's prepare_fp4_layer_for_marlin (NVFP4) ----

// Weight, before vLLM's gptq_marlin_repack: the packed [N, K/2] bytes are read as
// little-endian int32 words (8 nibbles = 8 consecutive k) and transposed to a
// contiguous [K/8, N] int32 array.
static std::vector<uint32_t> make_gptq_qweight(const HostProblem& P) {
  const int N = P.s.n, K = P.s.k;
  std::vector<uint32_t> q((size_t)(K / 8) * N);
  for (int n = 0; n < N; n++)
    for (int kk = 0; kk < K / 8; kk++) {
      uint32_t v;
      memcpy(&v, &P.w_packed[(size_t)n * (K / 2) + (size_t)kk * 4], 4);  // little endian view
      q[(size_t)kk * N + n] = v;
    }
  return q;
}

// Scales: transpose to [K/16, N] in the activation dtype, then the steps of vLLM's
// marlin_permute_scales (group 16, 16-bit activations) and
// nvfp4_marlin_process_scales. Returns the fp8 bytes [K/16, N] and the
// power-of-two scale_factor that the global scale is divided by.
static std::vector<uint8_t> process_scales(const HostProblem& P, bool bf16, float* scale_factor_out) {
  const int N = P.s.n, K = P.s.k, G = K / 16;
  const size_t total = (size_t)G * N;
  // transpose to [G, N]; e4m3 values are exact in fp16/bf16 and float
  std::vector<float> st(total);
  for (int n = 0; n < N; n++)
    for (int g = 0; g < G; g++)
      st[(size_t)g * N + n] = e4m3fn_to_float(P.w_scale[(size_t)n * G + g]);
  // Mirrors vLLM's marlin_permute_scales for group 16 < K with 16-bit
  // activations: the flat array is cut into runs of 64 scales, and within each
  // run the output position 8a+b takes input position a+8b (an 8x8 transpose).
  std::vector<float> sp(total);
  for (size_t run = 0; run < total / 64; run++)
    for (int a = 0; a < 8; a++)
      for (int b = 0; b < 8; b++) sp[run * 64 + 8 * a + b] = st[run * 64 + a + 8 * b];
  // Mirrors vLLM's nvfp4_marlin_process_scales. First: round to fp16.
  std::vector<uint16_t> h(total);
  for (size_t i = 0; i < total; i++) h[i] = f2h_bits(sp[i]);
  // Then swap the middle two of every 4 consecutive scales (order 0,2,1,3).
  std::vector<uint16_t> h2(total);
  for (size_t q = 0; q < total / 4; q++) {
    h2[4 * q + 0] = h[4 * q + 0];
    h2[4 * q + 1] = h[4 * q + 2];
    h2[4 * q + 2] = h[4 * q + 1];
    h2[4 * q + 3] = h[4 * q + 3];
  }
  // Scale factor as in vLLM's _nvfp4_compute_scale_factor: 1 for fp16
  // activations; for bf16 the largest power of two p >= 1 with
  // p * max(128*s) <= 448*128 (max over the positive scales), in float32.
  float sf = 1.0f;
  if (bf16) {
    float max_val = 0.f;
    bool any = false;
    for (size_t i = 0; i < total; i++) {
      float w = h_bits2f(h2[i]) * 128.f;
      if (w > 0) {
        any = true;
        max_val = std::max(max_val, w);
      }
    }
    if (any && max_val < 448.f * 128.f)
      sf = exp2f(floorf(log2f((448.f * 128.f) / max_val)));
  }
  // Apply it (in float32, back to fp16) when it is above 1.
  if (sf > 1.0f)
    for (size_t i = 0; i < total; i++) h2[i] = f2h_bits(h_bits2f(h2[i]) * sf);
  // Multiply by 128 in fp16, flush results below 2 to zero, shift the 16-bit
  // pattern left by one and keep its upper byte as the fp8 scale byte.
  std::vector<uint8_t> out(total);
  for (size_t i = 0; i < total; i++) {
    uint16_t v = f2h_bits(h_bits2f(h2[i]) * 128.f);
    if (h_bits2f(v) < 2.f) v = 0;
    uint16_t sh = (uint16_t)(v << 1);
    out[i] = (uint8_t)(sh >> 8);
  }
  *scale_factor_out = sf;
  return out;
}

// Global scale as vLLM's nvfp4_marlin_process_global_scale computes it, divided by
// the scale factor: gs * 2^(bias_act - bias_e2m1 - 7), where bias_act is the
// exponent bias of the activation type (15 for fp16, 127 for bf16) and bias_e2m1
// is 1, i.e. gs * 2^7 (fp16) or gs * 2^119 (bf16).
static float process_global_scale(float gs, bool bf16, float sf) {
  const int shift = (bf16 ? 127 : 15) - 1 - 7;
  float g = gs * (float)std::ldexp(1.0, shift);
  return g / sf;
}

// ---------------------------------------------------------------- check
struct CheckResult {
  double max_abs = 0, max_rel = 0, atol = 0;
  int64_t bad = 0, checked = 0;
};

static CheckResult check_output(const HostProblem& P, const std::vector<uint16_t>& c, bool bf16) {
  const int N = P.s.n;
  CheckResult r;
  double ss = 0;
  for (double v : P.ref) ss += v * v;
  double rms = std::sqrt(ss / std::max<size_t>(1, P.ref.size()));
  r.atol = 1e-3 * rms + 1e-6;
  for (size_t ri = 0; ri < P.rows.size(); ri++) {
    int m = P.rows[ri];
    for (int n = 0; n < N; n++) {
      double ref = P.ref[ri * N + n];
      double refq = bf16 ? bf_bits2f(f2bf_bits((float)ref)) : h_bits2f(f2h_bits((float)ref));
      uint16_t got_bits = c[(size_t)m * N + n];
      double got = bf16 ? bf_bits2f(got_bits) : h_bits2f(got_bits);
      double err = std::fabs(got - refq);
      if (!std::isfinite(got)) err = INFINITY;
      double rel = err / std::max(std::fabs(refq), 1e-30);
      r.max_abs = std::max(r.max_abs, err);
      if (std::fabs(refq) > r.atol) r.max_rel = std::max(r.max_rel, rel);
      if (!(err <= 1e-2 * std::fabs(refq) + r.atol)) r.bad++;
      r.checked++;
    }
  }
  return r;
}

// ---------------------------------------------------------------- args
static std::vector<Shape> parse_shapes(const std::string& s) {
  std::vector<Shape> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t e = s.find(',', pos);
    if (e == std::string::npos) e = s.size();
    std::string t = s.substr(pos, e - pos);
    Shape sh;
    if (sscanf(t.c_str(), "%dx%dx%d", &sh.m, &sh.n, &sh.k) != 3 || sh.m <= 0 || sh.n <= 0 || sh.k <= 0)
      die("bad shape '" + t + "' (expected MxNxK)");
    out.push_back(sh);
    pos = e + 1;
  }
  return out;
}

static void usage() {
  printf(
      "usage: marlin-bench [--shapes MxNxK[,MxNxK...]] [--dtype bf16|fp16|both]\n"
      "                    [--iters N] [--json FILE] [--seed S] [--device D]\n"
      "                    [--check-all-rows] [--selftest-check] [--dump-prep DIR]\n"
      "Benchmarks vLLM's Marlin NVFP4 W4A16 GEMM (C = A * W^T, W NVFP4 group 16).\n");
}

int main(int argc, char** argv) {
  std::string shapes_s = "128x7168x16384,128x4096x7168,128x7168x2048,2304x4608x7168,1x7168x16384,16x7168x16384";
  std::string dtype_s = "both", json_path;
  int iters = 50, device = 0;
  uint64_t seed = 1234;
  bool selftest = false, check_all_rows = false;
  std::string dump_prep_dir;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto need = [&](const char* what) -> std::string {
      if (i + 1 >= argc) die(std::string("missing value for ") + what);
      return argv[++i];
    };
    if (a == "--shapes") shapes_s = need("--shapes");
    else if (a == "--dtype") dtype_s = need("--dtype");
    else if (a == "--iters") iters = atoi(need("--iters").c_str());
    else if (a == "--json") json_path = need("--json");
    else if (a == "--seed") seed = strtoull(need("--seed").c_str(), nullptr, 10);
    else if (a == "--device") device = atoi(need("--device").c_str());
    else if (a == "--selftest-check") selftest = true;
    else if (a == "--check-all-rows") check_all_rows = true;
    else if (a == "--dump-prep") dump_prep_dir = need("--dump-prep");
    else if (a == "-h" || a == "--help") { usage(); return 0; }
    else { usage(); die("unknown argument '" + a + "'"); }
  }
  if (iters < 1) die("--iters must be >= 1");
  std::vector<bool> dtypes;  // false = fp16, true = bf16
  if (dtype_s == "fp16") dtypes = {false};
  else if (dtype_s == "bf16") dtypes = {true};
  else if (dtype_s == "both") dtypes = {false, true};
  else die("--dtype must be bf16, fp16 or both");
  std::vector<Shape> shapes = parse_shapes(shapes_s);

  // Host-only debugging aid (no GPU needed): dump the generated NVFP4 inputs and
  // the host-side Marlin preparation for the first shape, to compare with vLLM's Python.
  if (!dump_prep_dir.empty()) {
    HostProblem P;
    P.s = shapes[0];
    make_problem(P, seed, false);
    auto wr = [&](const std::string& name, const void* p, size_t n) {
      std::string path = dump_prep_dir + "/" + name;
      FILE* f = fopen(path.c_str(), "wb");
      if (!f || fwrite(p, 1, n, f) != n) die("cannot write " + path);
      fclose(f);
    };
    wr("w_packed.bin", P.w_packed.data(), P.w_packed.size());
    wr("w_scale.bin", P.w_scale.data(), P.w_scale.size());
    std::vector<uint32_t> qw = make_gptq_qweight(P);
    wr("qweight.bin", qw.data(), qw.size() * 4);
    for (bool bf16 : {false, true}) {
      float sf;
      std::vector<uint8_t> sc = process_scales(P, bf16, &sf);
      float g = process_global_scale(1.0f, bf16, sf);
      std::string dn = bf16 ? "bf16" : "fp16";
      wr("scales_" + dn + ".bin", sc.data(), sc.size());
      float gs[2] = {sf, g};
      wr("sf_gs_" + dn + ".bin", gs, sizeof gs);
    }
    printf("dumped prep for %dx%dx%d to %s\n", P.s.m, P.s.n, P.s.k, dump_prep_dir.c_str());
    return 0;
  }

  // ---- device
  int ndev = 0;
  cudaError_t de = cudaGetDeviceCount(&ndev);
  if (de != cudaSuccess || ndev == 0) {
    fprintf(stderr, "error: no CUDA device available (cudaGetDeviceCount: %s: %s)\n",
            cudaGetErrorName(de), de == cudaSuccess ? "0 devices" : cudaGetErrorString(de));
    return 3;
  }
  if (device < 0 || device >= ndev) die("--device out of range");
  CK(cudaSetDevice(device));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, device));
  int drv = 0, rtv = 0;
  CK(cudaDriverGetVersion(&drv));
  CK(cudaRuntimeGetVersion(&rtv));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  printf("GPU: %s (sm_%d%d, %d SMs), driver CUDA %d.%d, runtime %d.%d\n", prop.name, prop.major,
         prop.minor, sms, drv / 1000, (drv % 1000) / 10, rtv / 1000, (rtv % 1000) / 10);
  printf("kernel: vLLM %s Marlin (marlin_mm), NVFP4 W4A16 (e2m1 + e4m3 group 16), "
         "use_fp32_reduce=1 use_atomic_add=0 (vLLM defaults), code built for sm_90a\n",
         MARLIN_BENCH_VLLM_VERSION);
  if (prop.major != 9)
    die("this binary contains only sm_90a code (Hopper); found sm_" + std::to_string(prop.major) +
        std::to_string(prop.minor));

  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t flush_bytes = 256ull << 20;
  void* d_flush = nullptr;
  CK(cudaMalloc(&d_flush, flush_bytes));
  // Workspace like vLLM's marlin_make_workspace_new with 4 blocks per SM: sms*4
  // zeroed int32, allocated once; the kernel restores its locks itself, so vLLM
  // does not re-zero it per call and neither do we.
  int* d_workspace = nullptr;
  CK(cudaMalloc(&d_workspace, sizeof(int) * sms * 4));
  CK(cudaMemset(d_workspace, 0, sizeof(int) * sms * 4));
  cudaEvent_t ev0, ev1;
  CK(cudaEventCreate(&ev0));
  CK(cudaEventCreate(&ev1));

  FILE* jf = nullptr;
  if (!json_path.empty()) {
    jf = fopen(json_path.c_str(), "w");
    if (!jf) die("cannot open --json file " + json_path);
    fprintf(jf, "{\"gpu\": \"%s\", \"sms\": %d, \"vllm\": \"%s\", \"iters\": %d, \"rows\": [\n",
            prop.name, sms, MARLIN_BENCH_VLLM_VERSION, iters);
  }
  bool first_row = true, any_fail = false, selftest_done = false, selftest_ok = true;

  for (const Shape& sh : shapes) {
    const int M = sh.m, N = sh.n, K = sh.k;
    if (K % 16 != 0) die("K must be a multiple of 16 (NVFP4 group)");
    bool fam1 = (N % 64 == 0) && (K % 128 == 0), fam2 = (N % 128 == 0) && (K % 64 == 0);
    if (!(fam1 || fam2))
      die("shape " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
          " needs Marlin padding (N%64 && K%128, or N%128 && K%64); padding is not implemented");

    HostProblem P;
    P.s = sh;
    make_problem(P, seed, check_all_rows);

    // ---- weights: run vLLM's repack kernel (4-bit, 16-bit activations) the way
    // its gptq_marlin_repack op launches it: one block per SM, repack_threads
    // threads, the opt-in maximum of dynamic shared memory.
    std::vector<uint32_t> qw = make_gptq_qweight(P);
    uint32_t *d_qw = nullptr, *d_bq = nullptr;
    CK(cudaMalloc(&d_qw, qw.size() * 4));
    CK(cudaMemcpy(d_qw, qw.data(), qw.size() * 4, cudaMemcpyHostToDevice));
    const size_t bq_elems = (size_t)K * N / 8;  // [K/16, 2N] int32 words
    CK(cudaMalloc(&d_bq, bq_elems * 4));
    {
      int smem_optin = 0;
      CK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
      const int nthr = marlin::repack_threads;
      auto repack = marlin::gptq_marlin_repack_kernel<nthr, 4, false>;
      CK(cudaFuncSetAttribute(repack, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin));
      repack<<<sms, nthr, smem_optin, stream>>>(d_qw, d_bq, K, N);
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(stream));
    }
    CK(cudaFree(d_qw));

    for (bool bf16 : dtypes) {
      const char* dn = bf16 ? "bf16" : "fp16";
      const vllm::ScalarType act = bf16 ? vllm::kBFloat16 : vllm::kFloat16;
      float sf = 1.f;
      std::vector<uint8_t> sc = process_scales(P, bf16, &sf);
      float gscale = process_global_scale(1.0f, bf16, sf);

      std::vector<uint16_t> ah((size_t)M * K);
      for (size_t i = 0; i < ah.size(); i++) ah[i] = bf16 ? f2bf_bits(P.a[i]) : f2h_bits(P.a[i]);

      void *d_a, *d_c, *d_ctmp, *d_s;
      float* d_g;
      CK(cudaMalloc(&d_a, ah.size() * 2));
      CK(cudaMemcpy(d_a, ah.data(), ah.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&d_c, (size_t)M * N * 2));
      CK(cudaMemset(d_c, 0xFF, (size_t)M * N * 2));  // NaN pattern: unwritten outputs fail the check
      // fp32 reduction buffer sized as vLLM's marlin_gemm wrapper sizes it when
      // use_fp32_reduce is on: sms * min(M rounded up to 16, 64) * max_thread_n floats
      const int m_rows = std::min(64, 16 * ((M + 15) / 16));
      size_t ctmp_elems = (size_t)sms * m_rows * marlin::max_thread_n;
      CK(cudaMalloc(&d_ctmp, ctmp_elems * sizeof(float)));
      CK(cudaMalloc(&d_s, sc.size()));
      CK(cudaMemcpy(d_s, sc.data(), sc.size(), cudaMemcpyHostToDevice));
      CK(cudaMalloc(&d_g, sizeof(float)));
      CK(cudaMemcpy(d_g, &gscale, sizeof(float), cudaMemcpyHostToDevice));

      auto run = [&]() {
        try {
          marlin::marlin_mm(d_a, d_bq, d_c, d_ctmp, /*b_bias=*/nullptr, /*a_s=*/nullptr, d_s, d_g,
                            /*zp=*/nullptr, M, N, K, /*lda=*/K, d_workspace, act, vllm::kFE2M1f,
                            act, vllm::kFE4M3fn, /*has_bias=*/false, /*has_zp=*/false,
                            /*num_groups=*/K / 16, /*group_size=*/16, device, stream,
                            /*thread_k=*/-1, /*thread_n=*/-1, sms, /*use_atomic_add=*/false,
                            /*use_fp32_reduce=*/true, /*is_zp_float=*/false);
        } catch (const std::exception& e) {
          die(std::string("marlin_mm rejected the problem: ") + e.what());
        }
        CK(cudaGetLastError());
      };
      auto run_and_check = [&](std::vector<uint16_t>& c) {
        run();
        CK(cudaStreamSynchronize(stream));
        c.resize((size_t)M * N);
        CK(cudaMemcpy(c.data(), d_c, c.size() * 2, cudaMemcpyDeviceToHost));
        return check_output(P, c, bf16);
      };

      // ---- correctness
      g_launches.clear();
      g_record = true;
      std::vector<uint16_t> c;
      CheckResult cr = run_and_check(c);
      g_record = false;
      bool pass = cr.bad == 0;
      if (!pass) any_fail = true;
      std::string cfg;
      for (auto& L : g_launches) {
        char b[256];
        snprintf(b, sizeof b, "%sm_split=%d thread_m_blocks=%d%s tile(k,n)=(%d,%d) threads=%d blocks=%d smem=%d",
                 cfg.empty() ? "" : "; ", L.m_split, L.thread_m_blocks, L.m_block_size_8 ? " (m_block_size_8)" : "",
                 L.thread_k, L.thread_n, L.threads, L.blocks, L.smem);
        cfg += b;
      }
      printf("check %dx%dx%d %s: %s  max_abs=%.4g max_rel=%.4g bad=%lld/%lld (tol: 1e-2*|ref| + %.3g; %zu rows checked) scale_factor=%g global_scale=%g\n",
             M, N, K, dn, pass ? "PASS" : "FAIL", cr.max_abs, cr.max_rel, (long long)cr.bad,
             (long long)cr.checked, cr.atol, P.rows.size(), sf, gscale);

      // ---- self-test: the check must be able to fail
      if (selftest && !selftest_done && pass) {
        selftest_done = true;
        size_t idx = sc.size() / 3;  // arbitrary scale byte
        uint8_t orig = sc[idx], bad = (uint8_t)(orig ^ 0x40);
        CK(cudaMemcpy((uint8_t*)d_s + idx, &bad, 1, cudaMemcpyHostToDevice));
        std::vector<uint16_t> c2;
        CheckResult cb = run_and_check(c2);
        CK(cudaMemcpy((uint8_t*)d_s + idx, &orig, 1, cudaMemcpyHostToDevice));
        std::vector<uint16_t> c3;
        CheckResult cc = run_and_check(c3);
        bool caught = cb.bad > 0, restored = cc.bad == 0;
        printf("selftest: corrupted scale byte %zu (0x%02x -> 0x%02x): check %s (bad=%lld, max_abs=%.4g); restored: %s\n",
               idx, orig, bad, caught ? "FAILED as it must" : "DID NOT FAIL (check is too weak!)",
               (long long)cb.bad, cb.max_abs, restored ? "PASS" : "FAIL");
        if (!caught || !restored) selftest_ok = false;
      }

      // ---- timing
      for (int i = 0; i < 3; i++) run();
      CK(cudaStreamSynchronize(stream));
      std::vector<float> ts;
      for (int i = 0; i < iters; i++) {
        CK(cudaMemsetAsync(d_flush, i & 0xFF, flush_bytes, stream));
        CK(cudaEventRecord(ev0, stream));
        run();
        CK(cudaEventRecord(ev1, stream));
        CK(cudaEventSynchronize(ev1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, ev0, ev1));
        ts.push_back(ms);
      }
      std::vector<float> sorted = ts;
      std::sort(sorted.begin(), sorted.end());
      double med = (sorted.size() % 2) ? sorted[sorted.size() / 2]
                                       : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
      double mn = sorted.front();
      double tflops = 2.0 * M * N * K / (med * 1e-3) / 1e12;
      printf("%dx%dx%d %s  median %.2f us  min %.2f us  %.1f TFLOP/s  check=%s  [%s]\n", M, N, K,
             dn, med * 1e3, mn * 1e3, tflops, pass ? "PASS" : "FAIL", cfg.c_str());
      fflush(stdout);
      if (jf) {
        fprintf(jf,
                "%s  {\"m\": %d, \"n\": %d, \"k\": %d, \"dtype\": \"%s\", \"median_us\": %.3f, "
                "\"min_us\": %.3f, \"tflops\": %.3f, \"check\": \"%s\", \"max_abs_err\": %.6g, "
                "\"max_rel_err\": %.6g, \"bad\": %lld, \"checked\": %lld, \"config\": \"%s\"}",
                first_row ? "" : ",\n", M, N, K, dn, med * 1e3, mn * 1e3, tflops,
                pass ? "PASS" : "FAIL", cr.max_abs, cr.max_rel, (long long)cr.bad,
                (long long)cr.checked, cfg.c_str());
        first_row = false;
        fflush(jf);
      }
      CK(cudaFree(d_a));
      CK(cudaFree(d_c));
      CK(cudaFree(d_ctmp));
      CK(cudaFree(d_s));
      CK(cudaFree(d_g));
    }
    CK(cudaFree(d_bq));
  }
  if (jf) {
    fprintf(jf, "\n]}\n");
    fclose(jf);
  }
  if (selftest && !selftest_done) {
    fprintf(stderr, "error: --selftest-check did not run (no passing shape to corrupt)\n");
    selftest_ok = false;
  }
  if (any_fail) fprintf(stderr, "error: at least one correctness check FAILED\n");
  if (!selftest_ok) fprintf(stderr, "error: self-test of the check FAILED\n");
  return (any_fail || !selftest_ok) ? 1 : 0;
}
