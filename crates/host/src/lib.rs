//! Host side of the NVFP4 GEMM: generate or load inputs, run a kernel on the GPU or under
//! emulation, verify against an exact CPU reference, time, report.

pub mod api;
pub mod baselines;
pub mod bench;
pub mod cli;
pub mod dequant;
pub mod device;
pub mod embedded;
pub mod emulate;
pub mod error;
pub mod faults;
pub mod gemm;
pub mod generate;
pub mod io;
pub mod kernels;
pub mod probes;
pub mod problem;
pub mod reference;
pub mod report;
pub mod stream;
pub mod svg;
pub mod verify;

pub use device::Gpu;
pub use error::{Error, Result};
pub use gemm::Gemm;
pub use kernels::{Kernel, KernelChoice};
pub use problem::Problem;
