//! Fences (PTX ISA 9.7.13.4 `membar`/`fence`).

use super::exec;

/// `fence.proxy.async.shared::cta`: makes this thread's earlier generic-proxy writes to
/// shared memory visible to later async-proxy operations (wgmma, bulk copies, tcgen05)
/// that are ordered after it by a barrier. The emulator clears this thread's unfenced
/// writes; an async-proxy read of a byte still unfenced is reported. It also publishes the
/// thread's `mbarrier.init`s to the async proxy, as `fence.mbarrier_init` does.
///
/// Only the writer-side pattern (write, fence, then barrier) is modelled: a fence by the
/// reading thread after the barrier does not clear another thread's writes here.
#[track_caller]
pub fn proxy_async_shared_cta() {
    let mut ex = exec("fence.proxy.async.shared::cta");
    if ex.dropped() {
        return;
    }
    let me = ex.me as usize;
    for m in ex.st.mbarriers.values_mut() {
        if m.initialised_by == me as u32 {
            m.init_fenced = true;
        }
    }
    let smem = &mut ex.st.smem;
    let base = smem.base;
    for w in std::mem::take(&mut smem.unfenced[me]) {
        let start = (w.start - base) as usize;
        for b in &mut smem.unfenced_by[start..start + w.len as usize] {
            if *b == me as u32 + 1 {
                *b = 0;
            }
        }
    }
}

/// `fence.mbarrier_init.release.cluster`: makes this thread's earlier `mbarrier.init`s
/// visible to the async proxy (copies completing transactions on them).
#[track_caller]
pub fn mbarrier_init() {
    let mut ex = exec("fence.mbarrier_init.release.cluster");
    if ex.dropped() {
        return;
    }
    let me = ex.me;
    for m in ex.st.mbarriers.values_mut() {
        if m.initialised_by == me {
            m.init_fenced = true;
        }
    }
}

/// `fence.acq_rel.cta` / `membar.cta`: memory under emulation is sequentially consistent,
/// so there is nothing to model beyond counting it.
#[track_caller]
pub fn acq_rel_cta() {
    // Droppable (`crate::faults`), but with nothing modelled a drop changes nothing
    // either: fault injection reports such a site as undetected.
    let ex = exec("fence.acq_rel.cta");
    if ex.dropped() {
        return;
    }
    drop(ex);
}

/// `fence.acq_rel.gpu` (`__threadfence()`): global memory under emulation is sequentially
/// consistent across CTAs, so there is nothing to model beyond counting it. (A missing
/// GPU-scope fence is therefore not detected here: see the kernels' comments.)
#[track_caller]
pub fn acq_rel_gpu() {
    // Droppable, with the same caveat as `acq_rel_cta`.
    let ex = exec("fence.acq_rel.gpu");
    if ex.dropped() {
        return;
    }
    drop(ex);
}
