//! Helpers shared by the tests of sm90v2's one-launch decode kernels (tests/gemv.rs,
//! tests/skinny.rs): a call run under emulation on a given SM count, checked against the
//! exact reference.

use host::emulate;
use host::generate::{Distribution, generate};
use host::reference::reference;
use host::verify::{compare, unwritten};
use host::{Kernel, Problem};

/// What emulation assumes: an H100 SXM's SMs.
pub const SMS: u32 = host::kernels::H100_SXM_SMS;

/// The entry points sm90v2 launches for a call of `shape` with A in `format`, on [`SMS`] SMs.
pub fn entries(shape: &str, format: nvfp4::operand::AFormat) -> Vec<&'static str> {
    Kernel::Sm90v2.steps(shape.parse().unwrap(), SMS, format).iter().map(|s| s.entry).collect()
}

pub fn problem(shape: &str, dist: Distribution, seed: u64) -> Problem {
    generate(shape.parse().unwrap(), dist, seed)
}

/// Runs `p` as on a GPU of `sms` SMs, checks that sm90v2 launches `entry` alone, and checks
/// the result: every element written, within tolerance, and bit-exact on the benchmark's
/// distribution.
pub fn check_problem(p: &Problem, dist: Distribution, sms: u32, entry: &str, what: &str) {
    let steps = Kernel::Sm90v2.steps(p.shape, sms, p.a_format);
    assert_eq!(steps.iter().map(|s| s.entry).collect::<Vec<_>>(), [entry], "{what}");
    let run = emulate::run_on(p, Kernel::Sm90v2, sms).unwrap_or_else(|e| panic!("{what}: {e}"));
    let c = compare(p.shape, &run.c, &reference(p));
    assert_eq!(unwritten(&run.c), 0, "{what}: elements left unwritten");
    assert!(c.passed(), "{what}: {c}");
    assert!(c.bit_exact || dist != Distribution::GpuMode, "{what}: not bit-exact: {c}");
}

/// [`check_problem`] on every input distribution (seed `seed`).
pub fn check(shape: &str, sms: u32, seed: u64, entry: &str) {
    for dist in Distribution::ALL {
        check_problem(&problem(shape, dist, seed), dist, sms, entry, &format!("{shape} {dist} on {sms} SMs"));
    }
}
