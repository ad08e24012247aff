//! The bulk-copy unit (`cp.async.bulk`, `cp.async.bulk.tensor`; instructions in
//! `ops::bulk`): the CTA's copies in issue order. A copy lands when no thread can run
//! without it (the oldest first, see `units::complete_one_lazy`): its data is written and
//! its bytes signalled to its mbarrier with `complete_tx`.

use std::collections::VecDeque;

use super::AsyncUnit;
use crate::cta::{Cta, CtaState};
use crate::model::tensor_map::TensorMap;
use crate::report::{EmuError, ErrorKind, Loc};

#[derive(Clone, Debug)]
pub(crate) enum Source {
    Linear { src: u64 },
    Tensor { map: Box<TensorMap>, coords: Vec<i32> },
}

#[derive(Clone, Debug)]
pub(crate) struct BulkCopy {
    pub sequence: u64,
    pub source: Source,
    pub dst: u32,
    pub bytes: u32,
    pub mbarrier: u32,
    pub thread: u32,
    pub loc: Loc,
}

/// The CTA's bulk copies in flight, oldest first.
#[derive(Default)]
pub(crate) struct BulkCopies {
    pub queue: VecDeque<BulkCopy>,
}

impl AsyncUnit for BulkCopies {
    fn new(_threads: usize) -> BulkCopies {
        BulkCopies::default()
    }

    fn oldest_pending(&self) -> Option<(u64, u32)> {
        self.queue.front().map(|b| (b.sequence, b.thread))
    }

    fn complete_oldest(cta: &Cta<'_>, st: &mut CtaState, _thread: u32) -> Result<(), EmuError> {
        complete_front(cta, st)
    }

    fn mbarrier_in_flight(&self, addr: u32) -> Option<String> {
        let bytes: u64 = self.queue.iter().filter(|b| b.mbarrier == addr).map(|b| b.bytes as u64).sum();
        Some(format!("{bytes} bytes of bulk copies"))
    }

    fn end_of_cta(st: &mut CtaState) -> Result<(), EmuError> {
        match st.units.get::<BulkCopies>().queue.front() {
            Some(b) => Err(EmuError::new(
                ErrorKind::Mbarrier,
                "exit",
                format!(
                    "the CTA exited with a bulk copy into {:#x} never waited for (issued at {}:{})",
                    b.dst,
                    b.loc.file(),
                    b.loc.line()
                ),
            )),
            None => Ok(()),
        }
    }
}

/// Completes the oldest bulk copy: writes its data and signals its mbarrier.
fn complete_front(cta: &Cta<'_>, st: &mut CtaState) -> Result<(), EmuError> {
    let Some(copy) = st.units.get_mut::<BulkCopies>().queue.pop_front() else { return Ok(()) };
    let fail = |kind, m: String| EmuError::new(kind, "cp.async.bulk", m).at(copy.thread, copy.loc);
    let base = st.smem.base;
    match &copy.source {
        Source::Linear { src } => {
            let ptr = cta.global.resolve(*src, copy.bytes as usize).map_err(|m| fail(ErrorKind::OutOfBounds, m))?;
            let i = (copy.dst - base) as usize;
            // SAFETY: `resolve` checked the range.
            let data = unsafe { std::slice::from_raw_parts(ptr, copy.bytes as usize) };
            st.smem.bytes[i..i + data.len()].copy_from_slice(data);
        }
        Source::Tensor { map, coords } => {
            let plan = map.box_plan(coords, copy.dst).map_err(|m| fail(ErrorKind::OutOfBounds, m))?;
            let fill = map.fill_element().map_err(|m| fail(ErrorKind::Unsupported, m))?;
            for run in plan {
                let (i, len) = ((run.smem_addr - base) as usize, run.bytes);
                let dst = &mut st.smem.bytes[i..i + len as usize];
                match run.global_addr {
                    Some(g) => {
                        let ptr = cta.global.resolve(g, len as usize).map_err(|m| fail(ErrorKind::OutOfBounds, m))?;
                        // SAFETY: `resolve` checked the range.
                        dst.copy_from_slice(unsafe { std::slice::from_raw_parts(ptr, len as usize) });
                    }
                    None => dst.iter_mut().zip(fill.iter().cycle()).for_each(|(d, f)| *d = *f),
                }
            }
        }
    }
    let i = (copy.dst - base) as usize;
    st.smem.async_writers[i..i + copy.bytes as usize].iter_mut().for_each(|b| *b -= 1);
    // The write is the issuing thread's, at completion; so is the `complete_tx` release.
    let kind = crate::race::Kind::Bulk;
    crate::race::async_write_complete(st, copy.thread, i, copy.bytes as usize, kind, "cp.async.bulk", copy.loc)?;
    let m = st.mbarriers.get(&copy.mbarrier).ok_or_else(|| {
        fail(ErrorKind::Mbarrier, format!("mbarrier {:#x} of a bulk copy no longer exists", copy.mbarrier))
    })?;
    if !m.init_fenced {
        return Err(fail(
            ErrorKind::Mbarrier,
            format!(
                "a bulk copy (async proxy) signals mbarrier {:#x}, whose init ({}:{}) was never fenced with fence.mbarrier_init or fence.proxy.async",
                copy.mbarrier,
                m.init_loc.file(),
                m.init_loc.line()
            ),
        ));
    }
    crate::race::mbarrier_signal(st, copy.mbarrier, Some(copy.thread), |m| m.complete_tx(copy.bytes))
        .map_err(|msg| fail(ErrorKind::Mbarrier, format!("mbarrier {:#x}: {msg}", copy.mbarrier)))
}
