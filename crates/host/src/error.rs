//! Every failure a user can meet, with a message that says what to do about it.
//!
//! Exit codes: 1 = the kernel produced a wrong result (or a selftest case failed),
//! 2 = the input was refused (shape, file, arguments), 3 = this machine cannot do it
//! (no CUDA driver, no GPU, a kernel the GPU cannot run, not enough GPU or host memory).

use nvfp4::ShapeError;

use crate::io::IoError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid shape `{text}`: {source}")]
    Shape { text: String, source: ShapeError },

    #[error(transparent)]
    Io(#[from] IoError),

    #[error(
        "no CUDA driver found (libcuda could not be loaded), so no GPU kernel can run here. \
         What still works: `--emulate` runs every kernel on the CPU, `--verify cpu` checks it, \
         and `cargo test` runs the whole test suite. GPU runs need an NVIDIA driver for CUDA 13 or later."
    )]
    NoDriver,

    #[error("the CUDA driver reports no usable GPU ({0}); `--emulate` runs the kernels on the CPU instead")]
    NoGpu(String),

    #[error(
        "kernel `{kernel}` needs compute capability {need_major}.{need_minor} ({why}), \
         but GPU {device} `{name}` has {have_major}.{have_minor}; {hint}"
    )]
    Unsupported {
        kernel: &'static str,
        why: &'static str,
        need_major: u32,
        need_minor: u32,
        device: usize,
        name: String,
        have_major: u32,
        have_minor: u32,
        hint: String,
    },

    #[error(
        "shape {shape} needs {needed_mib:.1} MiB of GPU memory ({what}), but only {free_mib:.1} MiB of the \
         GPU's {total_mib:.1} MiB are free; try a smaller shape or fewer batches"
    )]
    OutOfMemory { shape: nvfp4::Shape, what: String, needed_mib: f64, free_mib: f64, total_mib: f64 },

    #[error(
        "shape {shape} needs {needed_mib:.1} MiB of host memory ({what}), but only {available_mib:.1} MiB \
         are available; try a smaller shape or fewer batches"
    )]
    HostOutOfMemory { shape: nvfp4::Shape, what: String, needed_mib: f64, available_mib: f64 },

    #[error("{0}")]
    Usage(String),

    #[error("CUDA error while {context}: {source}")]
    Cuda { context: String, source: cudarc::driver::DriverError },

    #[error("the emulator stopped the kernel: {0}")]
    Emulator(#[from] emu::EmuError),

    #[error("{0}")]
    Failed(String),

    /// A library call's argument a kernel would misread (see [`crate::api`]).
    #[error("invalid argument: {0}")]
    Invalid(String),
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Failed(_) | Error::Emulator(_) => 1,
            Error::Shape { .. } | Error::Io(_) | Error::Usage(_) | Error::Invalid(_) => 2,
            Error::NoDriver
            | Error::NoGpu(_)
            | Error::Unsupported { .. }
            | Error::OutOfMemory { .. }
            | Error::HostOutOfMemory { .. }
            | Error::Cuda { .. } => 3,
        }
    }
}

/// Attaches what the program was doing to a CUDA driver error (`.context("...")` on a
/// cudarc result, as the crate and its examples use it).
pub trait CudaContext<T> {
    fn context(self, what: impl Into<String>) -> Result<T, Error>;
}

impl<T> CudaContext<T> for Result<T, cudarc::driver::DriverError> {
    fn context(self, what: impl Into<String>) -> Result<T, Error> {
        self.map_err(|source| Error::Cuda { context: what.into(), source })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
