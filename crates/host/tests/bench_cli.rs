//! `host bench` as a user meets it on any machine: bad arguments are refused before any
//! GPU work, a machine without a driver gets the one-line explanation (exit 3, no panic),
//! and the options it documents exist.

use std::process::{Command, Output};

fn host(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_host")).args(args).output().expect("run host")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn bad_bench_arguments_are_refused_before_the_gpu() {
    let o = host(&["bench", "--shape", "128x128x100"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("K = 100 is not a multiple of 16") && !err.contains("panicked"), "{err}");
    let o = host(&["bench", "--shape", "128x128x64", "--iters", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
}

#[test]
fn bench_documents_its_outputs_and_baseline_switch() {
    let o = host(&["bench", "--help"]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(0));
    for option in ["--shape", "--json", "--svg", "--no-baselines", "--iters", "--kernel", "--decode"] {
        assert!(out.contains(option), "bench --help lacks {option}: {out}");
    }
}

/// Without a driver: exit 3 and the driver message, never a panic (cuBLAS is not even
/// looked at). With one: a small run of our kernels prints the report.
#[test]
fn bench_without_a_driver_says_so() {
    let o = host(&["bench", "--shape", "128x128x64", "--iters", "2", "--no-baselines"]);
    let (out, err) = text(&o);
    assert!(!err.contains("panicked"), "{err}");
    if host::device::driver_present() {
        assert!(out.starts_with("bench    "), "{out}{err}");
    } else {
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(err.contains("no CUDA driver found"), "{err}");
    }
}
