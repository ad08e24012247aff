//! The instructions, as the kernel's `ptx` layer calls them on the host.
//!
//! One module per PTX family; each public function is one instruction form, named like
//! the kernel's wrapper, and marked `#[track_caller]` so reports name the kernel line.
//! Each runs with the CTA lock held by the calling thread (which holds the baton).
//!
//! This is the instructions layer: ops block through the scheduler (`crate::sched`),
//! join collectives through `Exec::collective` with payloads typed per instruction, and
//! issue asynchronous work to the units (`crate::units`), whose state they reach by type
//! (`st.units.get_mut::<U>()`).

pub mod barrier;
pub mod bulk;
pub mod cp_async;
pub mod fence;
pub mod griddep;
pub mod integer;
pub mod mbarrier;
pub mod memory;
pub mod numeric;
pub mod special;
pub mod tcgen05;
pub mod warp;
pub mod wgmma;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::panic::Location;
use std::sync::MutexGuard;

use crate::cta::{Cta, CtaState, Scope};
use crate::faults::{Site, is_droppable};
use crate::report::{EmuError, ErrorKind, Loc};
use crate::sched::Wait;

thread_local! {
    /// The CTA and thread index of the emulated thread running on this host thread.
    static CURRENT: Cell<Option<(*const Cta<'static>, u32)>> = const { Cell::new(None) };
    /// Instructions executed by this thread, merged into the launch's statistics at exit.
    static COUNTS: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
    /// Executions of droppable instructions by site (see `crate::faults`), merged likewise.
    static SITES: RefCell<BTreeMap<Site, u64>> = const { RefCell::new(BTreeMap::new()) };
    /// The dropped site this thread just executed, until its op asks `Exec::dropped`: an
    /// op that never asks ignores the drop, which the thread's next instruction reports.
    static UNHONOURED_DROP: Cell<Option<Site>> = const { Cell::new(None) };
}

/// Binds this host thread to emulated thread `me` of `cta` for the kernel's duration.
pub(crate) fn enter(cta: &Cta<'_>, me: u32) {
    CURRENT.with(|c| c.set(Some(((cta as *const Cta<'_>).cast::<Cta<'static>>(), me))));
}

/// What one thread executed: instructions by mnemonic, droppable instructions by site.
pub(crate) type Executed = (BTreeMap<&'static str, u64>, BTreeMap<Site, u64>);

pub(crate) fn leave() -> Executed {
    CURRENT.with(|c| c.set(None));
    UNHONOURED_DROP.set(None);
    (COUNTS.with(|c| std::mem::take(&mut *c.borrow_mut())), SITES.with(|c| std::mem::take(&mut *c.borrow_mut())))
}

/// Counts one executed instruction of this thread.
pub(crate) fn count(instruction: &'static str) {
    COUNTS.with(|c| *c.borrow_mut().entry(instruction).or_insert(0) += 1);
}

/// The emulated thread running on this host thread.
#[track_caller]
pub(crate) fn current(instruction: &'static str) -> (&'static Cta<'static>, u32) {
    match CURRENT.with(|c| c.get()) {
        // SAFETY: the pointer is set by the launch for exactly the lifetime of the kernel
        // call on this thread; instructions run only inside that call.
        Some((cta, me)) => (unsafe { &*cta }, me),
        None => panic!(
            "`{instruction}` executed outside an emulated launch (at {}): run kernels through emu::launch",
            Location::caller()
        ),
    }
}

/// One instruction in progress: the CTA lock held by the thread that has the baton.
pub(crate) struct Exec {
    pub cta: &'static Cta<'static>,
    pub me: u32,
    pub st: MutexGuard<'static, CtaState>,
    pub instruction: &'static str,
    pub loc: Loc,
}

/// Starts executing `instruction` for the calling emulated thread.
#[track_caller]
pub(crate) fn exec(instruction: &'static str) -> Exec {
    let loc = Location::caller();
    let (cta, me) = current(instruction);
    count(instruction);
    let mut st = cta.maybe_preempt(me, cta.lock());
    if let Some(site) = UNHONOURED_DROP.take() {
        let message = format!(
            "{} (the op must return at once when `ex.dropped()`; see emu::faults)",
            crate::faults::UNHONOURED_DROP
        );
        cta.abort(st, EmuError::new(ErrorKind::Unsupported, site.instruction, message).at(me, site.loc));
    }
    if is_droppable(instruction) {
        let site = Site { loc, instruction };
        SITES.with(|c| *c.borrow_mut().entry(site).or_insert(0) += 1);
        if cta.drop == Some(site) {
            UNHONOURED_DROP.set(Some(site));
        }
    }
    debug_assert_eq!(st.baton, me, "only the baton holder executes instructions");
    if !instruction.starts_with("mbarrier.test_wait") {
        st.futile_polls = 0;
    }
    Exec { cta, me, st, instruction, loc }
}

impl Exec {
    /// Whether this is the site the launch drops (`Options::drop`): the op must then
    /// return at once with no effect. Only ops listed in `faults::DROPPABLE` may ask.
    pub fn dropped(&self) -> bool {
        debug_assert!(is_droppable(self.instruction), "`{}` is not in faults::DROPPABLE", self.instruction);
        let dropped = self.cta.drop.is_some_and(|s| s.instruction == self.instruction && s.loc == self.loc);
        if dropped {
            UNHONOURED_DROP.set(None);
        }
        dropped
    }

    /// Aborts the launch with a report blaming this thread and instruction.
    pub fn fail(self, kind: ErrorKind, message: String) -> ! {
        let error = EmuError::new(kind, self.instruction, message).at(self.me, self.loc);
        self.cta.abort(self.st, error)
    }

    /// Unwraps a check, failing the launch on error.
    pub fn check<T>(self, result: Result<T, (ErrorKind, String)>) -> (Self, T) {
        match result {
            Ok(v) => (self, v),
            Err((kind, message)) => self.fail(kind, message),
        }
    }

    /// Blocks until `wait` holds.
    pub fn block(self, wait: Wait) -> Exec {
        let Exec { cta, me, st, instruction, loc } = self;
        let st = cta.block(me, st, wait, instruction, loc);
        Exec { cta, me, st, instruction, loc }
    }

    /// Joins the collective of `scope`: deposits this thread's `input`, and when the last
    /// member arrives runs `complete` over all inputs (in member order), which fills the
    /// outputs (one per member, starting from `Out::default()`). Returns this thread's
    /// output. Each instruction says what its collective carries with `In` and `Out`.
    /// Members and operands are checked: every member must reach the same instruction at
    /// the same source line (so all of them bring the same `In`).
    pub fn collective<In, Out>(
        mut self,
        scope: Scope,
        members: Vec<u32>,
        input: In,
        complete: impl FnOnce(&mut Exec, &[u32], &[In], &mut [Out]) -> Result<(), (ErrorKind, String)>,
    ) -> (Exec, Out)
    where
        In: Clone + Send + 'static,
        Out: Clone + Default + Send + 'static,
    {
        let me = self.me;
        let (instruction, loc) = (self.instruction, self.loc);
        // Two groups of one warp whose member sets overlap must not be in different
        // collectives at once (disjoint groups, e.g. even and odd lanes, are independent).
        if let Scope::Warp { warp, mask } = scope {
            let clash = self.st.rendezvous.iter().find(|(s, r)| {
                r.count > 0
                    && matches!(s, Scope::Warp { warp: w, mask: m } if *w == warp && *m != mask && *m & mask != 0)
            });
            if let Some((_, r)) = clash {
                let message = format!(
                    "divergent collective: this thread reached `{instruction}` with membermask {mask:#010x} while lanes of its warp wait at `{}` ({}:{}) with an overlapping mask",
                    r.instruction,
                    r.loc.file(),
                    r.loc.line()
                );
                self.fail(ErrorKind::Collective, message);
            }
        }
        for &m in &members {
            if matches!(self.st.threads[m as usize], crate::sched::ThreadState::Exited) {
                self.fail(
                    ErrorKind::Collective,
                    format!("thread {m} of this {scope} has exited: the collective can never complete"),
                );
            }
        }
        let r = self.st.rendezvous.entry(scope).or_insert_with(|| crate::cta::Rendezvous {
            instruction,
            loc,
            members: Vec::new(),
            arrived: Vec::new(),
            count: 0,
            inputs: Box::new(()),
            outputs: Box::new(()),
            generation: 0,
        });
        if r.count == 0 {
            r.instruction = instruction;
            r.loc = loc;
            r.arrived = vec![false; members.len()];
            r.inputs = Box::new(vec![None::<In>; members.len()]);
            // `outputs` keeps the previous round's results: a thread of that round may
            // not have read its result yet (this round cannot finish without it).
            r.members = members;
        } else if r.instruction != instruction || r.loc != loc || r.members != members {
            let message = format!(
                "divergent collective: this thread reached `{instruction}` while threads of its {scope} wait at `{}` ({}:{}); \
                 every thread of the {scope} must execute the same collective instructions in the same order",
                r.instruction,
                r.loc.file(),
                r.loc.line()
            );
            self.fail(ErrorKind::Collective, message);
        }
        let Some(pos) = r.members.iter().position(|&m| m == me) else {
            let message = format!("thread {me} is not a member of the collective's {scope}");
            self.fail(ErrorKind::Collective, message)
        };
        if r.arrived[pos] {
            self.fail(ErrorKind::Collective, "thread arrived twice at the same collective".into());
        }
        r.arrived[pos] = true;
        // Same instruction and line as the round's first arrival, hence the same `In`.
        let inputs = r.inputs.downcast_mut::<Vec<Option<In>>>().expect("one instruction's inputs");
        inputs[pos] = Some(input);
        r.count += 1;
        let generation = r.generation;
        if r.count == r.members.len() {
            let members = r.members.clone();
            let inputs: Vec<In> = std::mem::replace(&mut r.inputs, Box::new(()))
                .downcast::<Vec<Option<In>>>()
                .expect("one instruction's inputs")
                .into_iter()
                .map(|i| i.expect("every member arrived"))
                .collect();
            // The members synchronise: each knows what all knew (before `complete`, which
            // may check shared-memory accesses made on the members' behalf).
            if let Some(race) = self.st.race.as_deref_mut() {
                race.join_members(&members);
            }
            let mut outputs = vec![Out::default(); members.len()];
            if let Err((kind, message)) = complete(&mut self, &members, &inputs, &mut outputs) {
                self.fail(kind, message);
            }
            let r = self.st.rendezvous.get_mut(&scope).expect("rendezvous exists");
            r.outputs = Box::new(outputs);
            r.count = 0;
            r.arrived.iter_mut().for_each(|a| *a = false);
            r.generation += 1;
        } else {
            self = self.block(Wait::Collective { scope, generation });
        }
        let outputs = self.st.rendezvous[&scope].outputs.downcast_ref::<Vec<Out>>();
        let out = outputs.expect("the round's outputs")[pos].clone();
        (self, out)
    }
}

/// The threads of warp `w` (all of them: the `.aligned` collectives need the full warp).
pub(crate) fn warp_members(cta: &Cta<'_>, warp: u32) -> Vec<u32> {
    let start = warp * crate::cta::WARP;
    (start..(start + crate::cta::WARP).min(cta.threads())).collect()
}
