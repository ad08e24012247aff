//! The PTX of every kernel target, embedded at build time by `build.rs`.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::error::{CudaContext as _, Error, Result};

/// One PTX build of the kernel crate.
#[derive(Clone, Copy, Debug)]
pub struct EmbeddedPtx {
    /// `portable`, `sm90a` or `sm100a`.
    pub name: &'static str,
    /// The architecture it was compiled for (`sm_70`, `sm_90a`, `sm_100a`).
    pub arch: &'static str,
    /// The PTX text.
    pub ptx: &'static str,
    /// ptxas's `-v` report when ptxas was available at build time.
    pub ptxas_report: Option<&'static str>,
}

include!(concat!(env!("OUT_DIR"), "/embedded_ptx.rs"));

/// The build named `name`.
pub fn target(name: &str) -> Option<&'static EmbeddedPtx> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Loads the build named `name` into `ctx` as a module.
pub fn load_module(ctx: &Arc<CudaContext>, name: &str) -> Result<Arc<CudaModule>> {
    let ptx = target(name).ok_or_else(|| Error::Failed(format!("no embedded PTX named {name}")))?;
    ctx.load_module(Ptx::from_src(ptx.ptx)).context(format!("loading the {name} PTX"))
}
