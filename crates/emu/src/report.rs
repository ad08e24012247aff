//! What the emulator reports when a kernel breaks a rule: which thread, which
//! instruction, where in the kernel source, and what went wrong.

use std::fmt;
use std::panic::Location;

/// A source location inside the kernel (captured with `#[track_caller]` through the
/// kernel's `ptx` layer).
pub type Loc = &'static Location<'static>;

/// The class of a failure, so tests can assert on what was detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A shared, global or tensor-map access outside its allocation, or misaligned.
    OutOfBounds,
    /// A generic read or write of shared memory that an asynchronous copy still owns.
    AsyncOwned,
    /// A generic write of shared memory an in-flight asynchronous reader (wgmma) will read.
    InFlightRead,
    /// The async proxy read shared memory written through the generic proxy with no
    /// `fence.proxy.async` in the writing thread in between.
    MissingProxyFence,
    /// mbarrier misuse: uninitialised, too many arrivals, transaction bytes that never
    /// balance, a phase left incomplete at exit.
    Mbarrier,
    /// Named-barrier misuse (thread counts that disagree).
    Barrier,
    /// Every live thread is blocked.
    Deadlock,
    /// A warp- or warpgroup-collective instruction not reached by all its threads, or
    /// reached with operands that must be uniform but are not.
    Collective,
    /// wgmma misuse: a descriptor that leaves shared memory or cannot be decoded,
    /// accumulators touched while in flight, a missing `wgmma.fence`.
    Wgmma,
    /// tcgen05 misuse: a descriptor that cannot be decoded, tensor memory used outside an
    /// allocation or while a pending operation owns it, a lane quarter the warp may not
    /// access, a missing tcgen05 fence, an allocation leaked at exit, unequal scale replicas.
    Tcgen05,
    /// An operand the emulator does not model or the PTX ISA forbids.
    Unsupported,
    /// Two accesses of one shared-memory byte, at least one a write, by different
    /// threads, with no synchronisation ordering them (the message names both lines).
    DataRace,
    /// The kernel's Rust code panicked.
    Panic,
    /// The launch configuration itself is invalid.
    Launch,
}

/// One failure, with where it happened.
#[derive(Clone, Debug)]
pub struct EmuError {
    pub kind: ErrorKind,
    /// CTA index (x, y, z).
    pub cta: [u32; 3],
    /// Linear thread index inside the CTA, when one thread is to blame.
    pub thread: Option<u32>,
    /// The PTX instruction, e.g. `"wgmma.mma_async"`.
    pub instruction: &'static str,
    /// The kernel source line that issued it, when known.
    pub location: Option<Loc>,
    pub message: String,
}

impl EmuError {
    pub(crate) fn new(kind: ErrorKind, instruction: &'static str, message: String) -> EmuError {
        EmuError { kind, cta: [0; 3], thread: None, instruction, location: None, message }
    }
    pub(crate) fn at(mut self, thread: u32, location: Loc) -> EmuError {
        self.thread = Some(thread);
        self.location = Some(location);
        self
    }
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [x, y, z] = self.cta;
        write!(f, "emulator: {:?} in CTA ({x},{y},{z})", self.kind)?;
        if let Some(t) = self.thread {
            write!(f, ", thread {t} (warp {}, lane {})", t / 32, t % 32)?;
        }
        write!(f, ", `{}`", self.instruction)?;
        if let Some(loc) = self.location {
            write!(f, " at {}:{}", loc.file(), loc.line())?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for EmuError {}
