//! A strict CPU emulator for the PTX instructions the project's kernels use.
//!
//! Kernels are Rust functions whose hardware operations go through a `ptx` layer; on the
//! host that layer calls the functions of [`ops`]. [`launch`] runs a kernel with one host
//! thread per CTA thread and checks it against the PTX rules as it goes: out-of-bounds
//! accesses, reads of shared memory an asynchronous copy still owns, async-proxy reads of
//! unfenced generic writes, mbarrier misuse, collectives not reached by their whole warp,
//! deadlocks, and data races on shared memory (two accesses that no barrier, mbarrier
//! phase or collective orders: happens-before tracking, whatever order the schedule ran
//! them in). Asynchronous units complete as late as the rules allow, so a missing wait
//! reads stale or poisoned data and fails. [`Options::seed`] runs a launch under a seeded
//! random schedule (random preemption at instruction boundaries), reproducibly.
//!
//! The emulator knows PTX, not NVFP4: nothing here depends on the kernels' data format.
//!
//! # Layers
//!
//! The emulator is three layers over the per-CTA state of `cta.rs` (shared memory,
//! barriers, mbarriers, collectives being assembled, one lock per CTA):
//! - **the scheduler** (`sched/`): the baton that lets one thread of a CTA run at a time,
//!   thread states and what blocked threads wait for, seeded schedules, deadlock detection
//!   and reports. It knows no instruction and no asynchronous unit by name; it reaches the
//!   units only through the generic functions of `units/`.
//! - **the asynchronous units** (`units/`): one module per unit (cp.async copies, bulk
//!   copies, wgmma, tcgen05), each a state type behind the `AsyncUnit` trait: its oldest
//!   lazily observed work and how it completes, its part of a deadlock report, its
//!   end-of-CTA checks, its hooks on thread synchronisation. The CTA holds one state per
//!   registered unit; [`launch`] and the scheduler drive them all generically (the
//!   globally oldest pending work completes first). A new unit is one new module and one
//!   registration line.
//! - **the instructions** ([`ops`]): the public functions the kernels' `ptx` layer calls,
//!   one module per PTX family. They check the rules, join collectives (typed by what
//!   each instruction's threads bring and receive), block through the scheduler and
//!   issue work to the units.
//!
//! Beside them: `memory.rs` (global and shared memory), `race.rs` (the happens-before
//! race detector), `faults.rs` (fault injection), `model/` (the hardware's data layouts and
//! arithmetic, free of emulation state) and `report.rs` (errors).

mod cta;
pub mod faults;
mod launch;
mod memory;
pub mod model;
pub mod ops;
mod race;
mod report;
mod sched;
mod units;

pub use faults::Site;
pub use launch::{
    DYNAMIC_SMEM_BASE, LaunchConfig, MAX_DYNAMIC_SMEM, MAX_THREADS_PER_CTA, Options, Schedule, Stats, launch,
    launch_with,
};
pub use memory::{GlobalMemory, Pod, SHARED_INITIAL_BYTE, UNINITIALISED_BYTE};
pub use model::tensor_map::TensorMap;
pub use report::{EmuError, ErrorKind, Loc};
