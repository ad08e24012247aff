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
