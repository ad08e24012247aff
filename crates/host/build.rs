//! Builds the `kernel` crate to PTX for every GPU target and embeds the PTX in the host.
//!
//! For each target a nested cargo compiles `crates/kernel` for `nvptx64-nvidia-cuda`
//! (with `-Zbuild-std=core`: rustup ships no prebuilt core for it) and asks rustc for
//! assembly, which on nvptx64 is PTX. Panics become `trap` (`-Cpanic=immediate-abort`),
//! so the PTX calls nothing outside itself. Each nested build has its own target
//! directory under `target/nvptx/` (sharing the outer one would deadlock on its lock) and
//! is incremental across profiles.
//!
//! The GEMM entries that hand registers between warpgroups get their launch bounds
//! (`.maxntid`, `.minnctapersm`, `.maxnreg`) written into the PTX here.
//!
//! When `ptxas` can be found (`PTXAS`, `PATH`, `CUDA_HOME`/`CUDA_PATH`, or the
//! `nvidia-cuda-nvcc` Python wheel) every PTX is assembled for its architecture; an
//! error fails the build and the `-v` report (registers, spills) is embedded for the
//! tests. `NVFP4_REQUIRE_PTXAS=1` (set by CI) makes a missing ptxas an error.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One PTX build of the kernel crate.
struct Target {
    /// Name used in file names and in the host's table.
    name: &'static str,
    /// `-C target-cpu`, also the ptxas architecture.
    cpu: &'static str,
    /// Extra `-C target-feature`s.
    features: &'static str,
}

const TARGETS: &[Target] = &[
    // The naive kernel for every GPU CUDA 13 supports: Turing (sm_75) and newer (the
    // driver JIT-compiles the PTX upward; CUDA 13 dropped Volta).
    Target { name: "portable", cpu: "sm_75", features: "" },
    // Hopper with its architecture-specific instructions (wgmma, setmaxnreg).
    Target { name: "sm90a", cpu: "sm_90a", features: "" },
    // Blackwell: the default PTX ISA 8.6 rejects `tcgen05.mma.kind::mxf4nvf4`; 8.7 has it.
    Target { name: "sm100a", cpu: "sm_100a", features: "+ptx87" },
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().and_then(Path::parent).expect("host lives in crates/host").to_path_buf();
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target_root = target_dir(&out, &workspace).join("nvptx");

    for dir in ["crates/kernel", "crates/nvfp4", "rust-toolchain.toml", "Cargo.lock"] {
        println!("cargo::rerun-if-changed={}", workspace.join(dir).display());
    }
    for var in ["PTXAS", "NVFP4_REQUIRE_PTXAS", "CUDA_HOME", "CUDA_PATH"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rustc-check-cfg=cfg(ptxas_found)");

    // Build all targets concurrently: each compiles `core`, which dominates the time.
    let builds: Vec<_> = TARGETS
        .iter()
        .map(|t| {
            let dir = target_root.join(t.name);
            let ptx = dir.join("kernel.ptx");
            let child =
                nested_cargo(&workspace, t, &dir, &ptx).spawn().unwrap_or_else(|e| panic!("cannot run cargo: {e}"));
            (t, ptx, child)
        })
        .collect();

    let ptxas = find_ptxas();
    let required = env::var("NVFP4_REQUIRE_PTXAS").is_ok_and(|v| v == "1");
    match &ptxas {
        Some(_) => println!("cargo::rustc-cfg=ptxas_found"),
        None if required => panic!(
            "NVFP4_REQUIRE_PTXAS=1 but ptxas was not found: install it with `pip install nvidia-cuda-nvcc==13.0.88` \
             or point PTXAS at it"
        ),
        None => println!(
            "cargo::warning=ptxas not found: the PTX is embedded unassembled and the ptxas tests are ignored \
             (pip install nvidia-cuda-nvcc==13.0.88, or set PTXAS)"
        ),
    }

    let mut table =
        String::from("/// Every embedded PTX build of the kernel crate.\npub static TARGETS: &[EmbeddedPtx] = &[\n");
    for (target, ptx, child) in builds {
        let output = child.wait_with_output().unwrap_or_else(|e| panic!("cargo for {}: {e}", target.name));
        if !output.status.success() {
            panic!("building the kernel crate for {} failed:\n{}", target.cpu, String::from_utf8_lossy(&output.stderr));
        }
        let embedded = out.join(format!("{}.ptx", target.name));
        let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| panic!("read {}: {e}", ptx.display()));
        std::fs::write(&embedded, launch_bounds(&text)).unwrap_or_else(|e| panic!("write {}: {e}", embedded.display()));
        let report = ptxas.as_ref().map(|p| {
            let report = assemble(p, target, &embedded, &out);
            let path = out.join(format!("{}.ptxas.txt", target.name));
            std::fs::write(&path, report).expect("write the ptxas report");
            path
        });
        let _ = writeln!(
            table,
            "    EmbeddedPtx {{ name: {:?}, arch: {:?}, ptx: include_str!({:?}), ptxas_report: {} }},",
            target.name,
            target.cpu,
            embedded.display().to_string(),
            match report {
                Some(path) => format!("Some(include_str!({:?}))", path.display().to_string()),
                None => "None".into(),
            }
        );
    }
    table.push_str("];\n");
    std::fs::write(out.join("embedded_ptx.rs"), table).expect("write embedded_ptx.rs");
}

/// The outer build's target directory (`.../target`), from `OUT_DIR` =
/// `<target>/<profile>/build/<pkg>-<hash>/out` (or `<target>/<triple>/<profile>/...`).
fn target_dir(out: &Path, workspace: &Path) -> PathBuf {
    if let Ok(dir) = env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    out.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workspace.join("target"))
}

fn nested_cargo(workspace: &Path, target: &Target, dir: &Path, ptx: &Path) -> Command {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    // The outer build's flags and wrappers (clippy, coverage) are for the host, not for PTX.
    for (key, _) in env::vars() {
        if key.starts_with("CARGO_") && key != "CARGO_HOME" || key.starts_with("RUSTC_") || key == "RUSTFLAGS" {
            cmd.env_remove(key);
        }
    }
    cmd.current_dir(workspace)
        .env("RUSTFLAGS", "-Zunstable-options -Cpanic=immediate-abort")
        .args(["rustc", "--quiet", "-p", "kernel", "--release", "--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
        // `.loc` line directives only: sanitizer and profiler reports name kernel source
        // lines, and no DWARF sections (whose labels this ptxas cannot parse) are emitted.
        .args(["--config", "profile.release.debug=\"line-directives-only\""])
        .arg("--target-dir")
        .arg(dir)
        .args(["--", "-C", "codegen-units=1", "-C"])
        .arg(format!("target-cpu={}", target.cpu))
        .arg(format!("--emit=asm={}", ptx.display()));
    if !target.features.is_empty() {
        cmd.args(["-C", &format!("target-feature={}", target.features)]);
    }
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    cmd
}

fn find_ptxas() -> Option<PathBuf> {
    let exe = |p: PathBuf| p.is_file().then_some(p);
    if let Some(p) = env::var_os("PTXAS") {
        return exe(PathBuf::from(p));
    }
    if let Some(p) = env::var_os("PATH").and_then(|path| env::split_paths(&path).find_map(|d| exe(d.join("ptxas")))) {
        return Some(p);
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(p) = env::var_os(var).and_then(|d| exe(PathBuf::from(d).join("bin/ptxas"))) {
            return Some(p);
        }
    }
    if let Some(p) = exe(PathBuf::from("/usr/local/cuda/bin/ptxas")) {
        return Some(p);
    }
    // The PyPI wheel `nvidia-cuda-nvcc` installs it under site-packages/nvidia/cu13/bin.
    let python = Command::new("python3")
        .args(["-c", "import nvidia, os; print(list(nvidia.__path__)[0])"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let root = String::from_utf8_lossy(&python.stdout).trim().to_string();
    ["cu13/bin/ptxas", "cuda_nvcc/bin/ptxas"].iter().find_map(|rel| exe(Path::new(&root).join(rel)))
}

/// Assembles `ptx` for the target's architecture; returns ptxas's `-v` report.
fn assemble(ptxas: &Path, target: &Target, ptx: &Path, out: &Path) -> String {
    let cubin = out.join(format!("{}.cubin", target.name));
    let output: Output = Command::new(ptxas)
        .arg(format!("-arch={}", target.cpu))
        .arg("-v")
        .arg(ptx)
        .arg("-o")
        .arg(&cubin)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
    let report = String::from_utf8_lossy(&output.stderr).into_owned() + &String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        panic!("ptxas rejected the {} PTX ({}):\n{report}", target.name, ptx.display());
    }
    report
}

/// Writes the launch bounds the kernel crate declares ([`kernel::sm90v2::LAUNCH_BOUNDS`],
/// [`kernel::gemv::LAUNCH_BOUNDS`])
/// into the PTX, between an entry's parameter list and its body: Rust has no attribute
/// for PTX's performance-tuning directives. `.maxntid` and `.maxnreg` fix the registers
/// each thread starts with, which `setmaxnreg` then moves between warpgroups.
fn launch_bounds(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 512);
    let mut pending = None;
    for line in ptx.lines() {
        if let Some(name) = line.strip_prefix(".visible .entry ").and_then(|l| l.strip_suffix('(')) {
            let every = kernel::sm90v2::LAUNCH_BOUNDS
                .iter()
                .chain([&kernel::gemv::LAUNCH_BOUNDS, &kernel::skinny::LAUNCH_BOUNDS]);
            pending = every.into_iter().find(|b| b.0 == name);
        }
        if line == "{"
            && let Some((_, threads, ctas, regs)) = pending.take()
        {
            let _ = writeln!(out, ".maxntid {threads}, 1, 1\n.minnctapersm {ctas}\n.maxnreg {regs}");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
