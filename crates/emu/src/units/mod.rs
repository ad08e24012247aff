//! The asynchronous-units layer: work that an instruction issues and that completes later
//! (cp.async copies, bulk copies, wgmma, tcgen05).
//!
//! Each unit is one module here: its state type, how its oldest piece of lazily observed
//! work completes, its part of a deadlock report and its end-of-CTA checks, all behind the
//! [`AsyncUnit`] trait. The CTA keeps one state per registered unit in [`Units`] and knows
//! none of them by name; the scheduler (`cta.rs`) reaches them only through the generic
//! functions below ([`complete_one_lazy`], [`mbarrier_in_flight`], ...), and the
//! instructions (`ops/*`) through [`Units::get`] / [`Units::get_mut`] with the unit's type.
//!
//! Adding a unit: a new module with a state type that implements [`AsyncUnit`], and one
//! line `module::StateType` in the `register!` list below. Registration order is the order of end-of-CTA checks and of the
//! pieces of an mbarrier's deadlock description.

use std::any::{Any, TypeId};
use std::marker::PhantomData;

use crate::cta::{Cta, CtaState};
use crate::report::{EmuError, ErrorKind, Loc};

/// One asynchronous unit: the state a CTA keeps for it, and the hooks through which the
/// scheduler and the launch drive it without knowing what it is. Every hook but `new` has
/// a default for units that lack the behaviour.
pub(crate) trait AsyncUnit: Any + Send + Sized {
    /// The unit's state at the start of a CTA of `threads` threads.
    fn new(threads: usize) -> Self;

    /// The oldest piece of work that only an mbarrier observes (so that it completes when
    /// no thread can run without it): its sequence number (`CtaState::next_sequence`,
    /// shared by all units, which makes "oldest" global) and the thread that holds it.
    fn oldest_pending(&self) -> Option<(u64, u32)> {
        None
    }

    /// Completes the piece of work `oldest_pending` named (held by `thread`), with
    /// everything it enables (the mbarrier arrivals that waited for it).
    fn complete_oldest(_cta: &Cta<'_>, _st: &mut CtaState, _thread: u32) -> Result<(), EmuError> {
        Ok(())
    }

    /// For deadlock reports: what this unit still owes the mbarrier at `addr` (e.g.
    /// "N bytes of bulk copies"), or `None` when it never signals mbarriers.
    fn mbarrier_in_flight(&self, _addr: u32) -> Option<String> {
        None
    }

    /// For deadlock reports: a note on work that can never be observed, if any.
    fn deadlock_note(&self) -> Option<String> {
        None
    }

    /// Checks once every thread of the CTA has exited (work never waited for, resources
    /// never freed); may complete work the hardware would still finish.
    fn end_of_cta(_st: &mut CtaState) -> Result<(), EmuError> {
        Ok(())
    }

    /// Whether `thread` may signal other threads now (an arrive or `bar.sync`).
    fn check_before_sync(&self, _thread: u32) -> Result<(), (ErrorKind, String)> {
        Ok(())
    }

    /// `thread` completed a synchronisation (`instruction` at `loc`).
    fn synchronised(&mut self, _thread: u32, _instruction: &'static str, _loc: Loc) {}

    /// Whether a thread blocked on this unit with `Wait::Unit { arg, .. }` may go on.
    fn wait_satisfied(&self, _arg: u32) -> bool {
        true
    }

    /// For deadlock reports: what a thread blocked with `arg` waits for (after the
    /// instruction's name).
    fn describe_wait(&self, _arg: u32) -> String {
        String::new()
    }
}

/// Declares each unit's module and registers its state type in [`UNITS`], in order.
macro_rules! register {
    ($($module:ident::$unit:ident),* $(,)?) => {
        $(pub(crate) mod $module;)*
        /// The registered units, in registration order.
        static UNITS: &[&dyn Registered] = &[$(&Registration::<$module::$unit>(PhantomData)),*];
    };
}

// One line per unit, `module::StateType`. The order is that of the end-of-CTA checks and of
// the pieces of an mbarrier's deadlock description (bulk, cp.async, tcgen05).
register! {
    wgmma::WarpgroupMmas,
    bulk::BulkCopies,
    cp_async::CpAsyncCopies,
    tcgen05::Tcgen05Unit,
}

/// [`AsyncUnit`] with its type erased, so that the registered units form one list.
trait Registered: Sync {
    fn unit_type(&self) -> TypeId;
    fn create(&self, threads: usize) -> Box<dyn Any + Send>;
    fn oldest_pending(&self, unit: &dyn Any) -> Option<(u64, u32)>;
    fn complete_oldest(&self, cta: &Cta<'_>, st: &mut CtaState, thread: u32) -> Result<(), EmuError>;
    fn mbarrier_in_flight(&self, unit: &dyn Any, addr: u32) -> Option<String>;
    fn deadlock_note(&self, unit: &dyn Any) -> Option<String>;
    fn end_of_cta(&self, st: &mut CtaState) -> Result<(), EmuError>;
    fn check_before_sync(&self, unit: &dyn Any, thread: u32) -> Result<(), (ErrorKind, String)>;
    fn synchronised(&self, unit: &mut dyn Any, thread: u32, instruction: &'static str, loc: Loc);
    fn wait_satisfied(&self, unit: &dyn Any, arg: u32) -> bool;
    fn describe_wait(&self, unit: &dyn Any, arg: u32) -> String;
}

struct Registration<U>(PhantomData<fn() -> U>);

fn cast<U: AsyncUnit>(unit: &dyn Any) -> &U {
    unit.downcast_ref().expect("units are stored in registration order")
}

impl<U: AsyncUnit> Registered for Registration<U> {
    fn unit_type(&self) -> TypeId {
        TypeId::of::<U>()
    }
    fn create(&self, threads: usize) -> Box<dyn Any + Send> {
        Box::new(U::new(threads))
    }
    fn oldest_pending(&self, unit: &dyn Any) -> Option<(u64, u32)> {
        cast::<U>(unit).oldest_pending()
    }
    fn complete_oldest(&self, cta: &Cta<'_>, st: &mut CtaState, thread: u32) -> Result<(), EmuError> {
        U::complete_oldest(cta, st, thread)
    }
    fn mbarrier_in_flight(&self, unit: &dyn Any, addr: u32) -> Option<String> {
        cast::<U>(unit).mbarrier_in_flight(addr)
    }
    fn deadlock_note(&self, unit: &dyn Any) -> Option<String> {
        cast::<U>(unit).deadlock_note()
    }
    fn end_of_cta(&self, st: &mut CtaState) -> Result<(), EmuError> {
        U::end_of_cta(st)
    }
    fn check_before_sync(&self, unit: &dyn Any, thread: u32) -> Result<(), (ErrorKind, String)> {
        cast::<U>(unit).check_before_sync(thread)
    }
    fn synchronised(&self, unit: &mut dyn Any, thread: u32, instruction: &'static str, loc: Loc) {
        unit.downcast_mut::<U>().expect("registration order").synchronised(thread, instruction, loc)
    }
    fn wait_satisfied(&self, unit: &dyn Any, arg: u32) -> bool {
        cast::<U>(unit).wait_satisfied(arg)
    }
    fn describe_wait(&self, unit: &dyn Any, arg: u32) -> String {
        cast::<U>(unit).describe_wait(arg)
    }
}

/// A registered unit, as a thread's wait names it (its index in [`UNITS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UnitId(usize);

/// The id of unit `U`, for `Wait::Unit`.
pub(crate) fn id<U: AsyncUnit>() -> UnitId {
    UnitId(
        UNITS.iter().position(|r| r.unit_type() == TypeId::of::<U>()).expect("the unit is registered in units::UNITS"),
    )
}

/// Whether a wait on unit `unit` with `arg` is satisfied now.
pub(crate) fn wait_satisfied(st: &CtaState, unit: UnitId, arg: u32) -> bool {
    UNITS[unit.0].wait_satisfied(&*st.units.0[unit.0], arg)
}

/// What a wait on unit `unit` with `arg` waits for, for deadlock reports.
pub(crate) fn describe_wait(st: &CtaState, unit: UnitId, arg: u32) -> String {
    UNITS[unit.0].describe_wait(&*st.units.0[unit.0], arg)
}

/// One CTA's state of every registered unit (in [`UNITS`] order).
pub(crate) struct Units(Vec<Box<dyn Any + Send>>);

impl Units {
    pub fn new(threads: usize) -> Units {
        Units(UNITS.iter().map(|u| u.create(threads)).collect())
    }

    /// The state of unit `U`.
    pub fn get<U: AsyncUnit>(&self) -> &U {
        self.0.iter().find_map(|u| u.downcast_ref()).expect("the unit is registered in units::UNITS")
    }

    /// The state of unit `U`, mutably.
    pub fn get_mut<U: AsyncUnit>(&mut self) -> &mut U {
        self.0.iter_mut().find_map(|u| u.downcast_mut()).expect("the unit is registered in units::UNITS")
    }
}

/// Completes the globally oldest piece of asynchronous work that only an mbarrier
/// observes, whichever unit holds it. Returns false when there is none (so a CTA whose
/// threads are all blocked is deadlocked).
pub(crate) fn complete_one_lazy(cta: &Cta<'_>, st: &mut CtaState) -> Result<bool, EmuError> {
    let oldest = UNITS
        .iter()
        .zip(&st.units.0)
        .filter_map(|(r, u)| r.oldest_pending(&**u).map(|(sequence, thread)| (sequence, thread, *r)))
        .min_by_key(|&(sequence, ..)| sequence);
    match oldest {
        None => Ok(false),
        Some((_, thread, unit)) => unit.complete_oldest(cta, st, thread).map(|()| true),
    }
}

/// What every unit still owes the mbarrier at `addr`, for deadlock reports.
pub(crate) fn mbarrier_in_flight(st: &CtaState, addr: u32) -> Vec<String> {
    UNITS.iter().zip(&st.units.0).filter_map(|(r, u)| r.mbarrier_in_flight(&**u, addr)).collect()
}

/// The units' notes for deadlock reports.
pub(crate) fn deadlock_notes(st: &CtaState) -> Vec<String> {
    UNITS.iter().zip(&st.units.0).filter_map(|(r, u)| r.deadlock_note(&**u)).collect()
}

/// Every unit's end-of-CTA checks, in registration order; the first failure is returned.
pub(crate) fn end_of_cta(st: &mut CtaState) -> Result<(), EmuError> {
    UNITS.iter().try_for_each(|r| r.end_of_cta(st))
}

/// Whether `thread` may signal other threads now, as far as every unit is concerned.
pub(crate) fn check_before_sync(st: &CtaState, thread: u32) -> Result<(), (ErrorKind, String)> {
    UNITS.iter().zip(&st.units.0).try_for_each(|(r, u)| r.check_before_sync(&**u, thread))
}

/// Tells every unit that `thread` completed a synchronisation.
pub(crate) fn synchronised(st: &mut CtaState, thread: u32, instruction: &'static str, loc: Loc) {
    UNITS.iter().zip(&mut st.units.0).for_each(|(r, u)| r.synchronised(&mut **u, thread, instruction, loc));
}
