//! What the emulator's test files share: one-CTA launches, report assertions, the source
//! line a report must blame, and the special registers the tiny test kernels use.
// Each test file uses a different subset.
#![allow(dead_code)]

use std::panic::Location;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use emu::ops::special;
use emu::{EmuError, ErrorKind, GlobalMemory, LaunchConfig};

/// One CTA of `threads` threads with `smem` bytes of dynamic shared memory.
pub fn one_cta(threads: u32, smem: u32) -> LaunchConfig {
    LaunchConfig { grid: [1, 1, 1], block: [threads, 1, 1], dynamic_smem: smem }
}

/// Launches one CTA and returns its report; fails the test if the launch succeeds.
#[track_caller]
pub fn report(gm: &GlobalMemory, threads: u32, smem: u32, kernel: impl Fn() + Sync) -> EmuError {
    report_of(gm, one_cta(threads, smem), kernel)
}

/// Launches `config` and returns its report; fails the test if the launch succeeds.
#[track_caller]
pub fn report_of(gm: &GlobalMemory, config: LaunchConfig, kernel: impl Fn() + Sync) -> EmuError {
    match emu::launch(gm, config, kernel) {
        Ok(stats) => panic!("the launch succeeded ({stats:?}), but a report was expected"),
        Err(e) => e,
    }
}

/// Asserts the report's kind and that its message contains every one of `needles`.
#[track_caller]
pub fn expect(e: &EmuError, kind: ErrorKind, needles: &[&str]) {
    assert_eq!(e.kind, kind, "wrong kind of report: {e}");
    for needle in needles {
        assert!(e.message.contains(needle), "the message lacks {needle:?}: {e}");
    }
}

/// The source line of the instruction a report must blame, recorded by the kernel.
#[derive(Default)]
pub struct Line {
    line: AtomicU32,
    file: OnceLock<&'static str>,
}

impl Line {
    /// Records that the instruction to blame is on the next source line.
    #[track_caller]
    pub fn next(&self) {
        let caller = Location::caller();
        let _ = self.file.set(caller.file());
        self.line.store(caller.line() + 1, Ordering::Relaxed);
    }

    /// `file:line`, as reports quote source locations in messages.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file.get().copied().unwrap_or("?"), self.line.load(Ordering::Relaxed))
    }

    /// Asserts the report's location is the recorded line.
    #[track_caller]
    pub fn assert_blamed(&self, e: &EmuError) {
        let loc = e.location.unwrap_or_else(|| panic!("the report has no location: {e}"));
        assert_eq!(format!("{}:{}", loc.file(), loc.line()), self.at(), "wrong location in: {e}");
    }
}

/// The calling thread's linear index (the tests' CTAs are one-dimensional).
pub fn tid() -> u32 {
    special::tid()[0]
}

/// The shared-window address of dynamic shared memory.
pub fn smem() -> u32 {
    special::dynamic_smem_base()
}
