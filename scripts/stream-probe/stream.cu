// How fast can one launch stream a decode call's weights on this GPU, and in what pattern?
//
// A throwaway CUDA C microbenchmark (built and run on the device machine with nvcc; not part
// of the Rust product): it reads the 7168 x 8192-byte weight rows of 1x7168x16384 (58.7 MB)
// the way the GEMV does and a few other ways, with no arithmetic beyond an XOR that keeps
// the loads alive, and prints the medians of event-timed launches after the host's L2 flush
// (a memset of twice L2). See docs/perf-notes.md, session 27.
//
//   nvcc -O3 -arch=sm_90a -o stream stream.cu && ./stream
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e = (x);                                                                    \
        if (e != cudaSuccess) {                                                                 \
            printf("CUDA error %s at line %d: %s\n", #x, __LINE__, cudaGetErrorString(e));       \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

constexpr int ROWS = 7168;
constexpr int ROW_BYTES = 8192;
constexpr size_t W_BYTES = size_t(ROWS) * ROW_BYTES;
constexpr int WARPS = 16;
constexpr int THREADS = WARPS * 32;
constexpr int LOAD = 512;  // a warp's 16 bytes per lane

__device__ __forceinline__ uint32_t smem(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void cp16(uint32_t dst, const char* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait_group() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// A plain grid-stride read, four 16-byte loads in flight per thread: the reference.
__global__ void __launch_bounds__(512) seq_read(const uint4* __restrict__ w, size_t n16, uint32_t* out) {
    uint32_t acc = 0;
    size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = __ldg(&w[i]), b = __ldg(&w[i + stride]), c = __ldg(&w[i + 2 * stride]), d = __ldg(&w[i + 3 * stride]);
        acc ^= a.x ^ b.y ^ c.z ^ d.w;
    }
    for (; i < n16; i += stride) acc ^= __ldg(&w[i]).x;
    if (acc == 0x9e3779b9u) out[0] = acc;
}

// The weight row of a CTA's pass row r (the GEMV's sets: rows c, c+32, c+64, c+96 of a
// 128-row tile row share a scale chunk).
__device__ __forceinline__ int weight_row(int first_set, int r) {
    int set = first_set + r / 4;
    return set / 32 * 128 + r % 4 * 32 + set % 32;
}

// The GEMV's pattern: one CTA per SM owning a range of sets; units = (group of R rows of a
// set, part of PARTS), dealt round robin to the 16 warps; a slot is C consecutive warp loads
// (C x 512 bytes) of each of the unit's R rows; each lane streams its 16-byte pieces
// through a ring of RING slots of cp.async groups (RING - 1 in flight).
template <int R, int C, int RING, int PARTS>
__global__ void __launch_bounds__(512, 1) gemv_pattern(const char* __restrict__ w, uint32_t* out) {
    extern __shared__ __align__(16) char ring_smem[];
    int sets = ROWS / 4, cta = blockIdx.x, ctas = gridDim.x;
    int first = int(int64_t(cta) * sets / ctas), end = int(int64_t(cta + 1) * sets / ctas);
    int rows = (end - first) * 4, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int PART_BYTES = ROW_BYTES / PARTS, SLOT_ROW_BYTES = C * LOAD, SPU = PART_BYTES / SLOT_ROW_BYTES;
    int units = rows / R * PARTS;
    int my_units = warp < units ? (units - warp + WARPS - 1) / WARPS : 0;
    int slots = my_units * SPU;
    char* my_ring = ring_smem + (warp * RING * R * C * 32 + lane) * 16;
    auto fetch = [&](int s, int slot) {
        if (s < slots) {
            int unit = warp + WARPS * (s / SPU), j = s % SPU;
            int group = unit / PARTS, part = unit % PARTS;
            for (int r = 0; r < R; r++) {
                const char* src = w + size_t(weight_row(first, group * R + r)) * ROW_BYTES + part * PART_BYTES +
                                  j * SLOT_ROW_BYTES + lane * 16;
                for (int c = 0; c < C; c++) cp16(smem(my_ring + ((slot * R + r) * C + c) * 512), src + c * LOAD);
            }
        }
        commit();
    };
    for (int s = 0; s < RING - 1; s++) fetch(s, s);
    uint32_t acc = 0;
    for (int s = 0; s < slots; s++) {
        fetch(s + RING - 1, (s + RING - 1) % RING);
        wait_group<RING - 1>();
        int slot = s % RING;
        for (int i = 0; i < R * C; i++) {
            uint4 v = *reinterpret_cast<const uint4*>(my_ring + (slot * R * C + i) * 512);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    if (acc == 0x9e3779b9u) out[0] = acc;
}

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect(uint32_t bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes));
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, int parity) {
    asm volatile(
        "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}\n" ::"r"(bar),
        "r"(parity));
}
__device__ __forceinline__ void bulk(uint32_t dst, const char* src, int bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

// Bulk copies: the same units, each warp's lane 0 copying a slot of B contiguous bytes of
// one row with one cp.async.bulk into a ring of D slots (an mbarrier each), the warp reading
// it from shared memory when it lands.
template <int B, int D, int PARTS>
__global__ void __launch_bounds__(512, 1) bulk_pattern(const char* __restrict__ w, uint32_t* out) {
    extern __shared__ __align__(128) char bulk_smem[];
    __shared__ __align__(8) uint64_t bars[WARPS][D];
    int sets = ROWS / 4, cta = blockIdx.x, ctas = gridDim.x;
    int first = int(int64_t(cta) * sets / ctas), end = int(int64_t(cta + 1) * sets / ctas);
    int rows = (end - first) * 4, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int PART_BYTES = ROW_BYTES / PARTS, SPU = PART_BYTES / B;
    int units = rows * PARTS;
    int my_units = warp < units ? (units - warp + WARPS - 1) / WARPS : 0;
    int slots = my_units * SPU;
    char* my_ring = bulk_smem + warp * D * B;
    if (lane == 0)
        for (int d = 0; d < D; d++) mbar_init(smem(&bars[warp][d]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::);
    __syncwarp();
    auto fetch = [&](int s) {
        if (lane == 0 && s < slots) {
            int unit = warp + WARPS * (s / SPU), j = s % SPU;
            int row = weight_row(first, unit / PARTS), part = unit % PARTS;
            uint32_t bar = smem(&bars[warp][s % D]);
            mbar_expect(bar, B);
            bulk(smem(my_ring + (s % D) * B), w + size_t(row) * ROW_BYTES + part * PART_BYTES + j * B, B, bar);
        }
    };
    for (int s = 0; s < D; s++) fetch(s);
    uint32_t acc = 0;
    for (int s = 0; s < slots; s++) {
        mbar_wait(smem(&bars[warp][s % D]), (s / D) & 1);
        for (int i = lane * 16; i < B; i += 512) {
            uint4 v = *reinterpret_cast<const uint4*>(my_ring + (s % D) * B + i);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
        __syncwarp();
        fetch(s + D);
    }
    if (acc == 0x9e3779b9u) out[0] = acc;
}

// How L2 is emptied before each timed launch: the host's memset of twice L2 (leaves L2 full
// of dirty lines), a read of twice L2 (leaves it full of clean lines), or nothing.
enum Flush { MEMSET, READ, NONE };

__global__ void read_flush(const uint4* __restrict__ buf, size_t n16, uint32_t* out) {
    uint32_t acc = 0;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x)
        acc ^= __ldcg(&buf[i]).x;
    if (acc == 0x9e3779b9u) out[0] = acc;
}

struct Timer {
    Flush mode = MEMSET;
    uint32_t* sink;
    void* flush;
    size_t flush_bytes;
    cudaEvent_t a, b;
    Timer() {
        int l2 = 0;
        CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
        flush_bytes = 2 * size_t(l2);
        CK(cudaMalloc(&flush, flush_bytes));
        CK(cudaMalloc(&sink, 4));
        CK(cudaMemset(flush, 1, flush_bytes));
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
    }
    template <typename F>
    float median_us(F launch, int iters = 30) {
        std::vector<float> t;
        launch();  // warm-up
        CK(cudaDeviceSynchronize());
        for (int i = 0; i < iters; i++) {
            if (mode == MEMSET) CK(cudaMemsetAsync(flush, 0, flush_bytes));
            if (mode == READ) read_flush<<<1056, 512>>>((const uint4*)flush, flush_bytes / 16, sink);
            CK(cudaEventRecord(a));
            launch();
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            CK(cudaGetLastError());
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            t.push_back(ms * 1000);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    }
};

int main() {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    char* w;
    uint32_t* out;
    CK(cudaMalloc(&w, W_BYTES));
    CK(cudaMalloc(&out, 4));
    std::vector<uint8_t> host(W_BYTES);
    uint64_t x = 88172645463325252ull;
    for (auto& b : host) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b = uint8_t(x);
    }
    CK(cudaMemcpy(w, host.data(), W_BYTES, cudaMemcpyHostToDevice));
    Timer timer;
    auto report = [&](const char* name, float us) {
        printf("%-44s %8.2f us %7.0f GB/s\n", name, us, W_BYTES / (us * 1e3));
    };
    for (Flush mode : {MEMSET, READ, NONE}) {
    timer.mode = mode;
    printf("--- flush: %s\n", mode == MEMSET ? "memset of 2x L2 (the host's)" : mode == READ ? "read of 2x L2" : "none");
    auto empty = [&]() {};
    report("events around nothing (after the flush)", timer.median_us(empty));
    for (int per_sm : {2, 4, 8}) {
        char name[64];
        snprintf(name, sizeof name, "seq_read, %d CTAs of 512 per SM", per_sm);
        report(name, timer.median_us([&] { seq_read<<<sms * per_sm, 512>>>((const uint4*)w, W_BYTES / 16, out); }));
    }
#define GEMV(R, C, RING, PARTS)                                                                            \
    do {                                                                                                   \
        auto k = gemv_pattern<R, C, RING, PARTS>;                                                          \
        int bytes = WARPS * RING * R * C * 512;                                                            \
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));                  \
        report("cp.async R" #R " C" #C " RING" #RING " PARTS" #PARTS,                                      \
               timer.median_us([&] { k<<<sms, THREADS, bytes>>>(w, out); }));                              \
    } while (0)
    GEMV(2, 1, 5, 4);  // the GEMV as of session 26
    GEMV(2, 1, 5, 1);
    GEMV(2, 1, 8, 4);
    GEMV(2, 1, 12, 4);
    GEMV(1, 4, 3, 4);
    GEMV(1, 4, 5, 4);
    GEMV(2, 2, 4, 4);
    GEMV(2, 4, 3, 4);
    GEMV(4, 1, 4, 4);
#define BULK(B, D, PARTS)                                                                                  \
    do {                                                                                                   \
        auto k = bulk_pattern<B, D, PARTS>;                                                                \
        int bytes = WARPS * D * B;                                                                         \
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));                  \
        report("bulk B" #B " D" #D " PARTS" #PARTS, timer.median_us([&] { k<<<sms, THREADS, bytes>>>(w, out); })); \
    } while (0)
    BULK(1024, 4, 4);
    BULK(2048, 3, 4);
    BULK(2048, 4, 4);
    BULK(2048, 6, 4);
    BULK(4096, 3, 2);
    BULK(8192, 1, 1);
    BULK(2048, 6, 1);
    }
    // The host's copy ceiling: a device-to-device copy, bytes read plus written.
    for (size_t mb : {59, 1024}) {
        void *src, *dst;
        size_t bytes = mb << 20;
        CK(cudaMalloc(&src, bytes));
        CK(cudaMalloc(&dst, bytes));
        timer.mode = MEMSET;
        float us = timer.median_us([&] { CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
        printf("memcpy %4zu MiB after the memset flush %8.2f us %7.0f GB/s (read + written)\n", mb, us, 2 * bytes / (us * 1e3));
        CK(cudaFree(src));
        CK(cudaFree(dst));
    }
    return 0;
}
