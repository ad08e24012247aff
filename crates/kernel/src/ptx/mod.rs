//! The `ptx` layer: one function per PTX instruction form the kernels use.
//!
//! Each function has two bodies. On `nvptx64` it is an `asm!` block with the exact PTX
//! shown in its doc comment; on the host it calls the CPU model in the `emu` crate, so the
//! same kernel source runs on a GPU and under emulation. Kernels never write `asm!`
//! themselves. Wrappers are `#[inline(always)]` (the PTX is emitted crate by crate, so
//! nothing may stay a call) and, on the host, `#[track_caller]`, so the emulator's
//! reports name the kernel's source line.
//!
//! Families, one module each, named after the PTX ISA chapters they come from.

pub mod barrier;
pub mod bulk;
pub mod cp_async;
pub mod cvt;
pub mod fence;
pub mod griddep;
pub mod integer;
pub mod mbarrier;
pub mod memory;
pub mod special;
pub mod tcgen05;
pub mod warp;
pub mod wgmma;

/// A 32-bit shared-window address (what `cvta.to.shared` yields and what shared-memory
/// instructions and matrix descriptors take).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(transparent)]
pub struct SmemAddr(pub u32);

impl SmemAddr {
    /// The address `bytes` further on.
    #[inline(always)]
    pub const fn offset(self, bytes: u32) -> SmemAddr {
        SmemAddr(self.0 + bytes)
    }
}

/// Declares the dynamic shared memory once per module: `.extern .shared .align 1024 .b8
/// DYN_SMEM[]`. (A `.shared` declaration inside a function's `asm!` is rejected by ptxas.)
#[cfg(target_arch = "nvptx64")]
core::arch::global_asm!(".extern .shared .align 1024 .b8 DYN_SMEM[];");

/// Generates the comma-separated operand list `{0}, {1}, ...` of an `asm!` template.
#[cfg(target_arch = "nvptx64")]
macro_rules! operand_list {
    ($first:literal $($rest:literal)*) => {
        concat!("{", stringify!($first), "}", $(", {", stringify!($rest), "}"),*)
    };
}
#[cfg(target_arch = "nvptx64")]
pub(crate) use operand_list;
