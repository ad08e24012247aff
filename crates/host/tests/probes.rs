//! The instruction probes under the emulator: each one's output equals the expected value
//! computed in plain Rust from the PTX ISA's definitions (`host::probes`). On a GPU,
//! `host selftest --probes` (and the ignored test in `gpu.rs`) also checks the hardware
//! against both.

use host::probes::{self, PROBES, Side};

/// Runs probe `name` under the emulator and compares with its expected value; on a
/// difference, fails with the probe table (which names the first differing words).
fn emulated_equals_expected(name: &str) {
    let p = probes::probe(name).unwrap_or_else(|| panic!("no probe {name}"));
    match probes::run_emulated(p) {
        Ok(got) if got == (p.expected)(&(p.input)()) => {}
        Ok(_) => {
            panic!("{name}: the emulator differs from the expected value\n{}", probes::table(&[probes::check(p, None)]))
        }
        Err(e) => panic!("{name}: {e:?}"),
    }
}

#[test]
fn cvt() {
    emulated_equals_expected("cvt");
}

#[test]
fn cp_async() {
    emulated_equals_expected("cp_async");
}

#[test]
fn warp() {
    emulated_equals_expected("warp");
}

#[test]
fn bulk() {
    emulated_equals_expected("bulk");
}

#[test]
fn tma() {
    emulated_equals_expected("tma");
}

#[test]
fn wgmma() {
    emulated_equals_expected("wgmma");
}

#[test]
fn tcgen05_cp() {
    emulated_equals_expected("tcgen05_cp");
}

#[test]
fn tcgen05_mma() {
    emulated_equals_expected("tcgen05_mma");
}

#[test]
fn every_probe_has_a_test_here() {
    let names: Vec<&str> = PROBES.iter().map(|p| p.name).collect();
    assert_eq!(names, ["cvt", "cp_async", "warp", "bulk", "tma", "wgmma", "tcgen05_cp", "tcgen05_mma"]);
}

#[test]
fn a_wrong_value_fails_and_names_the_first_differences() {
    // The cvt probe against an expectation of all zeros: the table must say FAIL and name
    // the words.
    let wrong = probes::Probe { expected: |_| vec![0; host::probes::probe("cvt").unwrap().output_bytes], ..PROBES[0] };
    let r = probes::check(&wrong, None);
    assert!(!r.passed);
    assert!(matches!(r.emulator, Side::Ran { differing_bytes: 1.. }), "{:?}", r.emulator);
    let table = probes::table(&[r]);
    assert!(table.contains("FAIL"), "{table}");
    assert!(table.contains("cvt.rn.f16x2.e4m3x2 of bytes lo 0x01, hi 0xfe"), "{table}");
}

#[test]
fn a_missing_emulator_model_is_reported_as_skipped_not_failed() {
    // A model that does not exist yet panics with `unimplemented!`: the table says so and
    // the probe does not fail (on a GPU its hardware side is still checked).
    fn body(_: &kernel::probes::ProbeArgs) {
        unimplemented!("tcgen06.teleport")
    }
    let missing = probes::Probe { body, ..PROBES[0] };
    let r = probes::check(&missing, None);
    match &r.emulator {
        Side::Skipped { why } => assert_eq!(why, "no emulator model of tcgen06.teleport yet"),
        other => panic!("{other:?}"),
    }
    assert!(r.passed);
    assert!(probes::table(&[r]).contains("skipped"));
}
