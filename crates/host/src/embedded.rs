//! The PTX of every kernel target, embedded at build time by `build.rs`.

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
