//! Programmatic dependent launch (PTX ISA 9.7.13.13 `griddepcontrol`).
//!
//! On the GPU a launch made with programmatic stream serialization may start while the
//! launch before it still runs: `griddepcontrol.launch_dependents` lets the next launch's
//! CTAs be scheduled early, and `griddepcontrol.wait` blocks until the previous launch has
//! completed and its memory is visible. The emulator runs launches one after the other,
//! so by the time a launch runs the previous one has completed: `wait` has nothing to wait
//! for and `launch_dependents` nothing to release. Both only count. (What this does not
//! model: a launch reading the previous launch's output before its `wait`; the kernel
//! places its waits before every such read, see `sm90v2`.)

use super::count;

/// `griddepcontrol.wait;`
#[track_caller]
pub fn wait() {
    count("griddepcontrol.wait");
}

/// `griddepcontrol.launch_dependents;`
#[track_caller]
pub fn launch_dependents() {
    count("griddepcontrol.launch_dependents");
}
