//! The `host` command as a user meets it: clear errors with non-zero exit codes for bad
//! input, the safetensors round trip, and the emulator path, on any machine.

use std::path::PathBuf;
use std::process::{Command, Output};

use host::generate::{Distribution, generate};
use host::io;
use host::reference::reference;

fn host(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_host")).args(args).output().expect("run host")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A fresh path in the temp directory.
fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvfp4-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn bad_shapes_are_refused_with_a_reason() {
    for (shape, needle) in [
        ("0x128x64", "M = 0"),
        ("128x0x64", "N = 0"),
        ("128x128", "expected a shape MxNxK or MxNxKxL"),
        ("128xx128", "expected a shape MxNxK or MxNxKxL"),
        ("-1x128x64", "expected a shape MxNxK or MxNxKxL"),
        ("128x128x100", "K = 100 is not a multiple of 16"),
        ("128x128x64x0", "L = 0"),
        ("99999999999x1x64", "M is too large"),
    ] {
        let o = host(&[&format!("--shape={shape}"), "--emulate"]);
        assert_eq!(o.status.code(), Some(2), "{shape}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.starts_with("error: invalid shape"), "{shape}: {err}");
        assert!(err.contains(needle), "{shape}: expected `{needle}` in: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn conflicting_options_are_refused() {
    let o = host(&["--shape", "128x128x64", "--emulate", "--verify", "gpu"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--verify gpu needs a GPU"), "{}", stderr(&o));
    let o = host(&["--shape", "128x128x64", "--inputs", "x.safetensors"]);
    assert_eq!(o.status.code(), Some(2), "clap refuses --shape with --inputs");
    let o = host(&["--kernel", "sm120"]);
    assert_eq!(o.status.code(), Some(2), "no sm120 kernel exists, so clap refuses it");
    assert!(stderr(&o).contains("possible values: auto, naive, sm90, sm90v2, sm100"), "{}", stderr(&o));
}

/// A shape that cannot fit in host memory is refused before anything is allocated (it
/// used to abort with an allocation failure, or meet the out-of-memory killer).
#[test]
fn a_shape_too_large_for_host_memory_is_refused_before_allocating() {
    for args in [&["--shape", "128x7168x16384x100000"][..], &["--shape", "128x7168x16384x100000", "--emulate"]] {
        let o = host(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        assert!(err.contains("MiB of host memory") && err.contains("MiB are available"), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("memory allocation"), "{err}");
    }
}

#[test]
fn bad_input_files_are_refused_with_a_reason() {
    let o = host(&["--inputs", "/nonexistent/in.safetensors", "--emulate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/in.safetensors"), "{}", stderr(&o));

    let garbage = temp("garbage.safetensors");
    std::fs::write(&garbage, b"this is not a safetensors file").unwrap();
    let o = host(&["--inputs", garbage.to_str().unwrap(), "--emulate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("safetensors"), "{}", stderr(&o));
}

#[test]
fn safetensors_in_emulated_run_safetensors_out() {
    let problem = generate("100x72x128x2".parse().unwrap(), Distribution::Wide, 3);
    let inputs = temp("inputs.safetensors");
    let output = temp("output.safetensors");
    io::save_inputs(&inputs, &problem).unwrap();
    let o = host(&[
        "--inputs",
        inputs.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--emulate",
        "--kernel",
        "sm90",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("verify   PASS"), "{}", stdout(&o));
    let (dims, c) = io::load_output(&output).unwrap();
    assert_eq!(dims, [2, 100, 72]);
    let want = reference(&problem);
    assert!(host::verify::compare(problem.shape, &c, &want).bit_exact);
}

#[test]
fn emulated_run_prints_the_report_and_json() {
    let json = temp("report.json");
    let o = host(&["--shape", "128x128x128", "--emulate", "--kernel", "naive", "--json", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for line in
        ["device   CPU emulator", "problem  128x128x128", "kernel   naive", "verify   PASS", "bit-exact", "emulated"]
    {
        assert!(out.contains(line), "missing `{line}` in:\n{out}");
    }
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["kernel"], "naive");
    assert_eq!(report["verification"]["mismatches"], 0);
    assert_eq!(report["emulated"], true);
}

#[test]
fn selftest_under_the_emulator_passes() {
    let o = host(&["selftest", "--emulate"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    // naive, sm90, sm90v2 and sm100 on 8 shapes x 2 draws, and on 4 of them (the first
    // three and the odd 100x200x320) through the 3 epilogue variants: 4 x (16 + 12); W4A16
    // on sm90v2, fp16 A and bf16 A: 8 x 2 draws + 4 x 1 variant each.
    assert!(out.contains("152 of 152 cases passed"), "{out}");
    for dtype in ["fp16", "bf16"] {
        // The A column: kernel, shape, dist, A, epilogue...
        let w4a16 =
            out.lines().filter(|l| l.starts_with("sm90v2") && l.split_whitespace().nth(3) == Some(dtype)).count();
        assert_eq!(w4a16, 20, "{dtype}: {out}");
    }
    assert!(out.contains("alpha 0.375, bias, bf16 out") && out.contains("alpha -2.5 (in GPU memory)"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
}

/// Without a CUDA driver a GPU run says so and what still works; with one, it runs.
/// Either way the branch this machine takes is checked, never skipped.
#[test]
fn gpu_run_without_a_driver_explains_what_still_works() {
    let o = host(&["--shape", "128x128x64", "--iters", "1"]);
    if host::device::driver_present() {
        assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains("verify   PASS"), "{}", stdout(&o));
    } else {
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("no CUDA driver found"), "{err}");
        assert!(err.contains("--emulate"), "{err}");
        let o = host(&["info"]);
        assert_eq!(o.status.code(), Some(3));
        assert!(stdout(&o).contains("sm90a"), "info lists the embedded PTX first: {}", stdout(&o));
    }
}

#[test]
fn selftest_probes_under_the_emulator_prints_the_table_and_passes() {
    let o = host(&["selftest", "--probes", "--emulate"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("gpu vs expected") && out.contains("emulator vs expected"), "{out}");
    for p in host::probes::PROBES {
        assert!(
            out.lines().any(|l| l.starts_with(p.name) && (l.contains("PASS") || l.contains("skipped"))),
            "{}: {out}",
            p.name
        );
    }
    assert!(out.contains(" 0 failed"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn w4a16_mode_runs_on_sm90v2_and_is_refused_elsewhere_with_a_reason() {
    let o = host(&["--shape", "64x72x192x2", "--mode", "w4a16", "--kernel", "sm90v2", "--emulate"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("A fp16 (w4a16)") && out.contains("verify   PASS") && out.contains("bit-exact"), "{out}");
    // `--kernel auto` (the default) picks a kernel that takes the mode: sm90v2.
    let o = host(&["--shape", "64x72x192x2", "--mode", "w4a16-bf16", "--emulate"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("A bf16 (w4a16)") && out.contains("verify   PASS") && out.contains("bit-exact"), "{out}");
    assert!(out.contains("kernel   sm90v2"), "{out}");
    for (kernel, mode) in [("naive", "w4a16"), ("sm90", "w4a16-bf16"), ("sm100", "w4a16")] {
        let o = host(&["--shape", "64x72x192", "--mode", mode, "--kernel", kernel, "--emulate"]);
        assert_eq!(o.status.code(), Some(2), "{kernel}: {}", stdout(&o));
        let err = stderr(&o);
        assert!(err.contains("--mode w4a16 and w4a16-bf16") && err.contains("run on sm90v2"), "{kernel}: {err}");
    }
}
