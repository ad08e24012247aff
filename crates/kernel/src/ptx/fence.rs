//! Memory and proxy fences (PTX ISA 9.7.13.4 `membar`/`fence`).

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `fence.proxy.async.shared::cta;` — orders this thread's earlier generic-proxy writes
/// to shared memory (`st.shared`, cp.async) before later async-proxy reads of it
/// (wgmma, bulk copies, tcgen05). Each writing thread executes it before the barrier
/// that hands the data to the tensor cores.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn proxy_async_shared_cta() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        asm!("fence.proxy.async.shared::cta;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::fence::proxy_async_shared_cta()
}

/// `fence.mbarrier_init.release.cluster;` — makes this thread's `mbarrier.init`s visible
/// to the async proxy and the rest of the cluster before the barriers are used.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mbarrier_init() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        asm!("fence.mbarrier_init.release.cluster;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::fence::mbarrier_init()
}

/// `fence.acq_rel.gpu;` — orders this thread's memory accesses before and after it for
/// every thread of the GPU (CUDA's `__threadfence()`): a producer's global writes before
/// the atomic that publishes them, a consumer's reads after the atomic that found them.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn acq_rel_gpu() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        asm!("fence.acq_rel.gpu;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::fence::acq_rel_gpu()
}
