//! The `host` command line: run one problem, `info`, `selftest`, `bench`.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};
use nvfp4::Shape;
use nvfp4::epilogue::OutDtype;

use crate::device::{Gpu, driver_present};
use crate::embedded;
use crate::emulate;
use crate::error::{Error, Result};
use crate::gemm::Gemm;
use crate::generate::{Distribution, generate, generate_w4a16};
use crate::io;
use crate::kernels::{Kernel, KernelChoice};
use crate::problem::{AFormat, Epilogue, Output, Problem};
use crate::reference::reference;
use crate::report::{RunReport, Speed, Verification, write_json};
use crate::verify::{compare, unwritten};

#[derive(Debug, Parser)]
#[command(
    name = "host",
    version,
    about = "NVFP4 block-scaled GEMM (C = A·Bᵀ, e2m1 values, e4m3 scales per 16, fp16 out): run a Rust kernel, verify it, time it",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The GPU, its driver, and which kernels can run on it.
    Info(DeviceArg),
    /// Every available kernel on the correctness shapes plus odd ones, both distributions.
    Selftest(SelftestArgs),
    /// Time our kernels (each verified first) and the cuBLAS baselines (fp16, FP8, dequant +
    /// fp16) on the benchmark shapes, against limits measured in the same run.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
struct DeviceArg {
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// How the result is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum VerifyMode {
    /// Against the exact CPU reference (parallel; seconds for the benchmark shapes).
    Cpu,
    /// Against the naive GPU kernel (for shapes too large for the CPU).
    Gpu,
    None,
}

/// What A holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// NVFP4: e2m1 values with an e4m3 scale per 16 (SFA), like B.
    Nvfp4,
    /// W4A16: fp16 activations [L, M, K] times the NVFP4 weights (kernels that take them:
    /// sm90v2).
    W4a16,
    /// W4A16 with bf16 activations.
    #[value(name = "w4a16-bf16")]
    W4a16Bf16,
}

impl Mode {
    pub fn a_format(self) -> AFormat {
        match self {
            Mode::Nvfp4 => AFormat::Nvfp4,
            Mode::W4a16 => AFormat::F16,
            Mode::W4a16Bf16 => AFormat::Bf16,
        }
    }

    /// Draws this mode's problem (W4A16: A as exact fp16 or bf16 activations).
    pub fn generate(self, shape: Shape, dist: Distribution, seed: u64) -> Problem {
        match self {
            Mode::Nvfp4 => generate(shape, dist, seed),
            Mode::W4a16 | Mode::W4a16Bf16 => generate_w4a16(shape, dist, seed, self.a_format()),
        }
    }
}

/// A clear refusal when `kernel` cannot run `a_format` (instead of a launch error).
fn check_mode(kernel: Kernel, a_format: AFormat) -> Result<()> {
    if !kernel.takes(a_format) {
        return Err(Error::Usage(format!(
            "--mode w4a16 and w4a16-bf16 (16-bit activations) run on {}; {kernel} takes NVFP4 activations only",
            Kernel::w4a16_kernels()
        )));
    }
    Ok(())
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Problem shape MxNxK or MxNxKxL (K a multiple of 16).
    #[arg(long, default_value = "128x7168x16384", conflicts_with = "inputs")]
    shape: String,
    /// Seed of the input generator.
    #[arg(long, default_value_t = 1, conflicts_with = "inputs")]
    seed: u64,
    /// Input distribution: `gpumode` (as the benchmark draws) or `wide` (scales over all
    /// finite e4m3 values).
    #[arg(long, default_value = "gpumode", conflicts_with = "inputs")]
    dist: Distribution,
    #[arg(long, value_enum, default_value = "auto")]
    kernel: KernelChoice,
    /// What A holds: NVFP4 (with SFA), or fp16 or bf16 activations (W4A16).
    #[arg(long, value_enum, default_value = "nvfp4", conflicts_with = "inputs")]
    mode: Mode,
    /// Timed runs (the median is reported).
    #[arg(long, default_value_t = 20)]
    iters: usize,
    #[arg(long, value_enum, default_value = "cpu")]
    verify: VerifyMode,
    /// Also write the report as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Take A, B, SFA, SFB from a safetensors file (tensors `a`, `b`, `sfa`, `sfb`).
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// Write C to a safetensors file (tensor `c`, F16, [L, M, N]).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Run the kernel on the CPU emulator instead of a GPU.
    #[arg(long)]
    emulate: bool,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    #[command(flatten)]
    epilogue: EpilogueArgs,
}

/// C = round(alpha * A·Bᵀ + bias) to fp16 or bf16.
#[derive(Debug, Args)]
struct EpilogueArgs {
    /// The fp32 scale applied to A·Bᵀ before the rounding (NVFP4's product of the two
    /// global scales).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    alpha: f32,
    /// Pass alpha to the kernel in GPU memory (as a CUDA graph would) instead of by value.
    #[arg(long)]
    alpha_in_memory: bool,
    /// Add a bias vector ([N], C's type; drawn from the seed: multiples of 1/8 in [-8, 8]).
    #[arg(long)]
    bias: bool,
    /// C's element type.
    #[arg(long, value_enum, default_value = "f16")]
    out_dtype: OutArg,
}

/// C's element type on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OutArg {
    F16,
    Bf16,
}

impl OutArg {
    fn dtype(self) -> OutDtype {
        match self {
            OutArg::F16 => OutDtype::F16,
            OutArg::Bf16 => OutDtype::Bf16,
        }
    }
}

impl EpilogueArgs {
    /// The epilogue these flags ask for, after checking alpha is finite.
    fn epilogue(&self, n: u32, seed: u64) -> Result<Epilogue> {
        if !self.alpha.is_finite() {
            return Err(Error::Usage(format!("--alpha must be a finite number, got {}", self.alpha)));
        }
        let out = self.out_dtype.dtype();
        Ok(Epilogue {
            alpha: self.alpha,
            alpha_in_memory: self.alpha_in_memory,
            bias: self.bias.then(|| crate::generate::bias(n, out, seed)),
            out,
        })
    }
}

#[derive(Debug, Args)]
struct SelftestArgs {
    /// Run the kernels under the CPU emulator (on small shapes) instead of the GPU.
    #[arg(long)]
    emulate: bool,
    /// Run each kernel on the GPU and under emulation and compare the two outputs.
    #[arg(long, conflicts_with = "emulate")]
    compare_emulator: bool,
    /// Run the instruction probes instead (one tiny kernel per instruction family the
    /// emulator models) on the GPU and under emulation, each against its expected value;
    /// with --emulate, the emulator side only.
    #[arg(long, conflicts_with_all = ["compare_emulator", "full", "kernel"])]
    probes: bool,
    /// Under --emulate: the full list (the spec's correctness shapes and the odd ones,
    /// as on a GPU) instead of the small shapes. Minutes per large shape.
    #[arg(long, requires = "emulate")]
    full: bool,
    /// Only this kernel (default: every kernel the GPU runs; under --emulate, all).
    #[arg(long, value_enum)]
    kernel: Option<Kernel>,
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Also write the results as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Shapes to time (default: the three benchmark shapes and 2304x4608x7168).
    #[arg(long, value_delimiter = ',')]
    shape: Vec<String>,
    /// Only this kernel of ours (default: every kernel this GPU runs).
    #[arg(long, value_enum)]
    kernel: Option<Kernel>,
    #[arg(long, default_value_t = 50)]
    iters: usize,
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Also write the whole report (every sample, every check, the limits) as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also draw the results as an SVG bar chart (e.g. docs/bench-h100.svg).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Time only our kernels: no cuBLAS / cuBLASLt baselines (the copy limit is still
    /// measured; the fp16 GEMM limit needs cuBLAS).
    #[arg(long)]
    no_baselines: bool,
    /// Also time the decode shapes, M = 1 and 16 with the N and K of the three benchmark
    /// shapes (1x7168x16384, 16x7168x16384, ...), where reading the weights is the floor.
    #[arg(long)]
    decode: bool,
    /// Modes to time: NVFP4 A, and W4A16 (fp16 or bf16 A) on the kernels that take it.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "nvfp4,w4a16,w4a16-bf16")]
    mode: Vec<Mode>,
}

/// Parses a shape argument into a `Shape` or an error naming the text.
pub fn parse_shape(text: &str) -> Result<Shape> {
    text.parse::<Shape>().map_err(|source| Error::Shape { text: text.to_string(), source })
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let outcome = match cli.command {
        None => run(&cli.run),
        Some(Command::Info(d)) => info(d.device),
        Some(Command::Selftest(a)) => selftest(&a),
        Some(Command::Bench(a)) => bench(&a),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

fn describe_inputs(args: &RunArgs, epilogue: &Epilogue) -> String {
    let inputs = match &args.inputs {
        Some(p) => format!("from {}", p.display()),
        None if args.mode != Mode::Nvfp4 => {
            format!("dist {}, seed {}, A {} (w4a16)", args.dist, args.seed, a_dtype_name(args.mode.a_format()))
        }
        None => format!("dist {}, seed {}", args.dist, args.seed),
    };
    if epilogue.is_identity() && !epilogue.alpha_in_memory {
        inputs
    } else {
        format!("{inputs}; {}", epilogue.describe())
    }
}

fn run(args: &RunArgs) -> Result<i32> {
    let mut problem = match &args.inputs {
        Some(path) => io::load_inputs(path)?,
        None => {
            let shape = parse_shape(&args.shape)?;
            crate::generate::check_host_memory(shape, args.emulate)?;
            args.mode.generate(shape, args.dist, args.seed)
        }
    };
    problem.epilogue = args.epilogue.epilogue(problem.shape.n, args.seed)?;
    let shape = problem.shape;
    let (report, c) = if args.emulate {
        if args.verify == VerifyMode::Gpu {
            return Err(Error::Usage("--verify gpu needs a GPU; under --emulate use --verify cpu".into()));
        }
        let kernel = args.kernel.resolve_for(None, problem.a_format);
        check_mode(kernel, problem.a_format)?;
        let run = emulate::run(&problem, kernel)?;
        let verification =
            (args.verify == VerifyMode::Cpu).then(|| check("cpu", &problem, &run.c, &reference(&problem)));
        let report = RunReport {
            device: None,
            emulated: true,
            inputs: describe_inputs(args, &problem.epilogue),
            kernel,
            verification,
            timing: None,
            speed: None,
            instructions: Some(run.stats.instructions.clone()),
            emulation_seconds: Some(run.wall.as_secs_f64()),
            ..base_report(shape, kernel, kernel.emulated_sms(), problem.a_format)
        };
        (report, run.c)
    } else {
        let gpu = Gpu::open(args.device)?;
        let kernel = args.kernel.resolve_for(Some(gpu.info.compute_capability), problem.a_format);
        check_mode(kernel, problem.a_format)?;
        if args.verify == VerifyMode::Gpu && (kernel == Kernel::Naive || problem.a_format.is_16bit()) {
            return Err(Error::Usage(
                "--verify gpu compares with the naive kernel, which takes NVFP4 A only and is not checked against \
                 itself: use --verify cpu"
                    .into(),
            ));
        }
        let gemm = Gemm::new(&gpu, kernel)?;
        let mut device_problem = gemm.upload(&problem)?;
        let c = gemm.run(&mut device_problem)?;
        let verification = match args.verify {
            VerifyMode::Cpu => Some(check("cpu", &problem, &c, &reference(&problem))),
            VerifyMode::Gpu => {
                let naive = Gemm::new(&gpu, Kernel::Naive)?;
                let want = naive.run(&mut device_problem)?;
                Some(check("gpu", &problem, &c, &want))
            }
            VerifyMode::None => None,
        };
        let timing = (args.iters > 0).then(|| gemm.time(&mut device_problem, args.iters)).transpose()?;
        let speed = timing.as_ref().map(|t| Speed::new(shape, kernel, &gpu.info, t.median_us));
        let report = RunReport {
            device: Some(gpu.info.clone()),
            inputs: describe_inputs(args, &problem.epilogue),
            verification,
            timing,
            speed,
            ..base_report(shape, kernel, gpu.info.multiprocessors, problem.a_format)
        };
        (report, c)
    };
    print!("{}", report.text());
    if let Some(path) = &args.output {
        io::save_output(path, shape, &c)?;
        let dtype = if c.dtype == OutDtype::Bf16 { "BF16" } else { "F16" };
        println!(
            "output   C written to {} (tensor `c`, {dtype}, [{}, {}, {}])",
            path.display(),
            shape.l,
            shape.m,
            shape.n
        );
    }
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(match &report.verification {
        Some(v) if !v.passed => 1,
        _ => 0,
    })
}

/// The report's fields every run has, for `kernel` on a GPU with `sms` SMs and A in `format`.
fn base_report(shape: Shape, kernel: Kernel, sms: u32, format: nvfp4::operand::AFormat) -> RunReport {
    RunReport {
        device: None,
        emulated: false,
        shape: shape.to_string(),
        m: shape.m,
        n: shape.n,
        k: shape.k,
        l: shape.l,
        inputs: String::new(),
        kernel,
        launch: launch_text(kernel, shape, sms, format),
        gflop: shape.flops() / 1e9,
        bytes_read: shape.bytes_read(),
        verification: None,
        timing: None,
        speed: None,
        instructions: None,
        emulation_seconds: None,
    }
}

fn launch_text(kernel: Kernel, shape: Shape, sms: u32, format: nvfp4::operand::AFormat) -> String {
    let step = kernel.main_step(shape, sms, format);
    let l = step.launch;
    format!(
        "{}: grid {}x{}x{} for {sms} SMs, {} threads per CTA, {} KiB shared memory",
        step.entry,
        l.grid[0],
        l.grid[1],
        l.grid[2],
        l.block.iter().product::<u32>(),
        l.dynamic_smem / 1024
    )
}

/// Loads each kernel on the GPU once (module load and, for portable PTX, the driver's JIT
/// compile), for commands that run it on many problems.
fn load_kernels<'g>(gpu: &'g Gpu, kernels: &[Kernel]) -> Result<Vec<Gemm<'g>>> {
    kernels.iter().map(|&k| Gemm::new(gpu, k)).collect()
}

fn check(against: &'static str, problem: &Problem, got: &Output, want: &Output) -> Verification {
    Verification::new(against, &compare(problem.shape, got, want), unwritten(got), got.dtype)
}

fn info(device: usize) -> Result<i32> {
    println!("host {} — embedded PTX:", env!("CARGO_PKG_VERSION"));
    for t in embedded::TARGETS {
        let assembled = if t.ptxas_report.is_some() {
            "assembled by ptxas at build time"
        } else {
            "not assembled (no ptxas at build time)"
        };
        println!("  {:<9} {:<8} {:>7} bytes, {}", t.name, t.arch, t.ptx.len(), assembled);
    }
    if !driver_present() {
        return Err(Error::NoDriver);
    }
    let gpu = Gpu::open(device)?;
    let d = &gpu.info;
    let (free, total) = gpu.memory()?;
    println!("device {}: {}", d.ordinal, d.name);
    println!(
        "  compute capability {}.{}, {} SMs at up to {:.0} MHz",
        d.compute_capability.0, d.compute_capability.1, d.multiprocessors, d.sm_clock_mhz
    );
    println!(
        "  memory {:.1} GiB ({:.1} GiB free), {}-bit at {:.0} MHz = {:.0} GB/s peak, L2 {} MiB, {} KiB shared memory per CTA",
        total as f64 / (1u64 << 30) as f64,
        free as f64 / (1u64 << 30) as f64,
        d.memory_bus_bits,
        d.memory_clock_mhz,
        d.peak_bandwidth() / 1e9,
        d.l2_bytes >> 20,
        d.max_shared_per_block / 1024
    );
    println!("  driver supports CUDA {}.{}", d.driver_cuda_version.0, d.driver_cuda_version.1);
    println!("kernels:");
    for k in Kernel::ALL {
        let (_, why) = k.arch_rule();
        let verdict =
            if k.runs_on(d.compute_capability) { "runs here".to_string() } else { format!("cannot run here: {why}") };
        println!("  {:<6} {} — {}", k.name(), verdict, k.summary());
    }
    println!("auto picks: {}", KernelChoice::Auto.resolve(Some(d.compute_capability)));
    Ok(0)
}

/// One selftest case.
#[derive(Clone, Debug, serde::Serialize)]
struct CaseResult {
    kernel: Kernel,
    shape: String,
    dist: String,
    /// `nvfp4` or `fp16` (W4A16).
    activations: String,
    /// `identity` or what the epilogue does (`alpha 0.375, bias, bf16 out`).
    epilogue: String,
    passed: bool,
    verification: Verification,
    seconds: f64,
}

/// The spec's correctness shapes (all L = 1).
pub const CORRECTNESS_SHAPES: [&str; 10] = [
    "128x256x256",
    "128x1536x7168",
    "128x3072x1536",
    "256x7168x256",
    "256x7168x2048",
    "2304x4608x7168",
    "384x7168x2304",
    "512x512x7168",
    "512x4096x512",
    "512x1536x7168",
];

/// Shapes that break tile-multiple assumptions: M and N not multiples of 128, L > 1.
/// (33x520x4096: sm90v2's thin 64-row tiles with split K; 4x1000x2080x2: its GEMV with
/// a last warp load of one lane per row; 13x1000x3072x2: its mma.sync kernel, two n8
/// halves, rows past N; on 132 SMs, 40x7168x16384 and 200x9216x4096 run stream-K, on 28
/// medium tiles, at most half a wave, and on 72 wide ones, more than half, with rows past
/// M.)
pub const ODD_SHAPES: [&str; 10] = [
    "1x1x64",
    "100x200x320",
    "129x257x128x3",
    "300x1000x1024",
    "255x77x64x2",
    "33x520x4096",
    "4x1000x2080x2",
    "13x1000x3072x2",
    "40x7168x16384",
    "200x9216x4096",
];

/// The first shapes of a selftest list that also run the [`epilogue_variants`] (and every
/// odd shape does).
const EPILOGUE_SHAPES: usize = 3;

/// Small shapes the emulator runs in seconds (correctness shapes scaled down, plus the
/// odd ones; 3x96x1056 is sm90v2's GEMV with a last warp load of one lane, 9x96x1024 its
/// mma.sync kernel).
pub const EMULATOR_SHAPES: [&str; 8] =
    ["128x256x256", "256x128x128", "1x1x64", "100x200x320", "129x136x128x3", "64x72x192x2", "3x96x1056", "9x96x1024"];

/// The epilogues every kernel is checked with besides the identity: bf16 with alpha and a
/// bias, fp16 with a negative alpha read from GPU memory, and bf16 alone.
pub fn epilogue_variants(n: u32, seed: u64) -> Vec<Epilogue> {
    vec![
        Epilogue {
            alpha: 0.375,
            alpha_in_memory: false,
            bias: Some(crate::generate::bias(n, OutDtype::Bf16, seed)),
            out: OutDtype::Bf16,
        },
        Epilogue { alpha: -2.5, alpha_in_memory: true, bias: None, out: OutDtype::F16 },
        Epilogue { out: OutDtype::Bf16, ..Epilogue::IDENTITY },
    ]
}

/// The problems of one selftest shape: in every mode (NVFP4 A, W4A16's fp16 or bf16 A), both
/// distributions with the identity epilogue; with `variants`, the benchmark's distribution
/// through each [`epilogue_variants`] (NVFP4) and through the first one (W4A16).
fn selftest_problems(shape: Shape, seed: u64, variants: bool) -> Vec<(Distribution, Problem)> {
    let mut problems = Vec::new();
    for (m, mode) in [Mode::Nvfp4, Mode::W4a16, Mode::W4a16Bf16].into_iter().enumerate() {
        let first = problems.len();
        for (i, dist) in [Distribution::GpuMode, Distribution::Wide].into_iter().enumerate() {
            problems.push((dist, mode.generate(shape, dist, seed + (2 * m + i) as u64)));
        }
        if variants {
            let base = problems[first].1.clone();
            let count = if mode == Mode::Nvfp4 { usize::MAX } else { 1 };
            for epilogue in epilogue_variants(shape.n, seed).into_iter().take(count) {
                problems.push((Distribution::GpuMode, Problem { epilogue, ..base.clone() }));
            }
        }
    }
    problems
}

/// Whether `kernel` runs `problem` (W4A16 problems run on the kernels that take fp16 A).
fn runs(kernel: Kernel, problem: &Problem) -> bool {
    kernel.takes(problem.a_format)
}

/// The selftest column naming A's format.
fn activations_name(problem: &Problem) -> &'static str {
    a_dtype_name(problem.a_format)
}

/// A's element type: "nvfp4", "fp16" or "bf16".
fn a_dtype_name(format: AFormat) -> &'static str {
    match format {
        AFormat::Nvfp4 => "nvfp4",
        AFormat::F16 => "fp16",
        AFormat::Bf16 => "bf16",
    }
}

/// Short text for a table column: `identity` or the epilogue's description.
fn epilogue_name(e: &Epilogue) -> String {
    if e.is_identity() && !e.alpha_in_memory { "identity".into() } else { e.describe() }
}

fn selftest(args: &SelftestArgs) -> Result<i32> {
    if args.probes {
        let gpu = if args.emulate { None } else { Some(Gpu::open(args.device)?) };
        let (results, code) = crate::probes::selftest(gpu.as_ref());
        if let Some(path) = &args.json {
            write_json(path, &results)?;
        }
        return Ok(code);
    }
    if args.compare_emulator {
        return compare_emulator(args);
    }
    let gpu = if args.emulate { None } else { Some(Gpu::open(args.device)?) };
    let kernels: Vec<Kernel> = match (&gpu, args.kernel) {
        (Some(g), Some(k)) => {
            k.check_device(&g.info)?;
            vec![k]
        }
        (Some(g), None) => Kernel::ALL.into_iter().filter(|k| k.runs_on(g.info.compute_capability)).collect(),
        (None, Some(k)) => vec![k],
        (None, None) => Kernel::ALL.to_vec(),
    };
    let shapes: Vec<&str> = if args.emulate && !args.full {
        EMULATOR_SHAPES.to_vec()
    } else {
        CORRECTNESS_SHAPES.iter().chain(ODD_SHAPES.iter()).copied().collect()
    };
    match &gpu {
        Some(g) => println!(
            "selftest on {} (sm_{}{}): kernels {:?}",
            g.info.name, g.info.compute_capability.0, g.info.compute_capability.1, kernels
        ),
        None => println!("selftest under the CPU emulator: kernels {kernels:?}"),
    }
    println!(
        "{:<7} {:<16} {:<8} {:<6} {:<36} {:<5} {:>10} {:>10} {:>6} {:>9}",
        "kernel", "shape", "dist", "A", "epilogue", "ok", "mismatch", "unwritten", "ulps", "seconds"
    );
    let gemms = match &gpu {
        Some(g) => load_kernels(g, &kernels)?,
        None => Vec::new(),
    };
    let mut results = Vec::new();
    for (s, shape_text) in shapes.iter().enumerate() {
        let shape = parse_shape(shape_text)?;
        // The epilogue variants on the small and odd shapes (each needs its own reference).
        let variants = s < EPILOGUE_SHAPES || ODD_SHAPES.contains(shape_text);
        for (dist, problem) in selftest_problems(shape, 1000, variants) {
            if !kernels.iter().any(|&k| runs(k, &problem)) {
                continue;
            }
            let want = reference(&problem);
            let mut device_problem = gemms.first().map(|g| g.upload(&problem)).transpose()?;
            for (k, &kernel) in kernels.iter().enumerate() {
                if !runs(kernel, &problem) {
                    continue;
                }
                let start = Instant::now();
                let got = match &mut device_problem {
                    Some(d) => gemms[k].run(d)?,
                    None => emulate::run(&problem, kernel)?.c,
                };
                let verification = check("cpu", &problem, &got, &want);
                let r = CaseResult {
                    kernel,
                    shape: shape.to_string(),
                    dist: dist.to_string(),
                    activations: activations_name(&problem).into(),
                    epilogue: epilogue_name(&problem.epilogue),
                    passed: verification.passed,
                    verification,
                    seconds: start.elapsed().as_secs_f64(),
                };
                println!(
                    "{:<7} {:<16} {:<8} {:<6} {:<36} {:<5} {:>10} {:>10} {:>6} {:>9.2}",
                    r.kernel.name(),
                    r.shape,
                    r.dist,
                    r.activations,
                    r.epilogue,
                    if r.passed { "PASS" } else { "FAIL" },
                    r.verification.mismatches + r.verification.nan_mismatches,
                    r.verification.unwritten,
                    r.verification.max_ulps,
                    r.seconds
                );
                results.push(r);
            }
        }
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    println!("{} of {} cases passed", results.len() - failed, results.len());
    if let Some(path) = &args.json {
        write_json(path, &results)?;
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

/// One GPU-vs-emulator comparison.
#[derive(Clone, Debug, serde::Serialize)]
struct EmulatorComparison {
    kernel: Kernel,
    shape: String,
    dist: String,
    /// `nvfp4` or `fp16` (W4A16).
    activations: String,
    epilogue: String,
    /// GPU output bit-identical to the emulator's.
    bit_identical: bool,
    /// Elements whose fp16 bits differ, and the worst distance in fp16 ulps.
    differing: u64,
    max_ulps: u32,
    gpu_vs_reference: Verification,
    emulator_vs_reference: Verification,
}

fn compare_emulator(args: &SelftestArgs) -> Result<i32> {
    let gpu = Gpu::open(args.device)?;
    let kernels: Vec<Kernel> = match args.kernel {
        Some(k) => {
            k.check_device(&gpu.info)?;
            vec![k]
        }
        None => Kernel::ALL.into_iter().filter(|k| k.runs_on(gpu.info.compute_capability)).collect(),
    };
    println!("GPU ({}) vs emulator, same kernel source, same inputs", gpu.info.name);
    println!(
        "{:<7} {:<16} {:<8} {:<6} {:<36} {:>13} {:>9} {:>6} {:>14} {:>14}",
        "kernel", "shape", "dist", "A", "epilogue", "bit-identical", "differing", "ulps", "gpu vs ref", "emu vs ref"
    );
    let gemms = load_kernels(&gpu, &kernels)?;
    let mut results = Vec::new();
    let mut ok = true;
    for shape_text in EMULATOR_SHAPES {
        let shape = parse_shape(shape_text)?;
        for (dist, problem) in selftest_problems(shape, 2000, true) {
            if !kernels.iter().any(|&k| runs(k, &problem)) {
                continue;
            }
            let want = reference(&problem);
            let mut device_problem = gemms[0].upload(&problem)?;
            for (gemm, &kernel) in gemms.iter().zip(&kernels) {
                if !runs(kernel, &problem) {
                    continue;
                }
                let on_gpu = gemm.run(&mut device_problem)?;
                // As on this GPU: its SM count decides the split K, and so the sum order.
                let emulated = emulate::run_on(&problem, kernel, gpu.info.multiprocessors)?.c;
                let between = compare(shape, &on_gpu, &emulated);
                let differing = on_gpu.bits.iter().zip(&emulated.bits).filter(|(a, b)| a != b).count() as u64;
                let r = EmulatorComparison {
                    kernel,
                    shape: shape.to_string(),
                    dist: dist.to_string(),
                    activations: activations_name(&problem).into(),
                    epilogue: epilogue_name(&problem.epilogue),
                    bit_identical: differing == 0,
                    differing,
                    max_ulps: between.max_ulps,
                    gpu_vs_reference: check("cpu", &problem, &on_gpu, &want),
                    emulator_vs_reference: check("cpu", &problem, &emulated, &want),
                };
                // gpumode data: every partial sum is exact, so the two must agree bit for
                // bit and equal the reference; wide data: at most 1 ulp apart.
                let expected = match dist {
                    Distribution::GpuMode => {
                        r.bit_identical && r.gpu_vs_reference.bit_exact && r.emulator_vs_reference.bit_exact
                    }
                    Distribution::Wide => {
                        r.max_ulps <= 1 && r.gpu_vs_reference.passed && r.emulator_vs_reference.passed
                    }
                };
                ok &= expected;
                let verdict =
                    |v: &Verification| format!("{} {}ulp", if v.passed { "pass" } else { "FAIL" }, v.max_ulps);
                println!(
                    "{:<7} {:<16} {:<8} {:<6} {:<36} {:>13} {:>9} {:>6} {:>14} {:>14}{}",
                    kernel.name(),
                    r.shape,
                    r.dist,
                    r.activations,
                    r.epilogue,
                    if r.bit_identical { "yes" } else { "no" },
                    r.differing,
                    r.max_ulps,
                    verdict(&r.gpu_vs_reference),
                    verdict(&r.emulator_vs_reference),
                    if expected { "" } else { "   <- unexpected" }
                );
                results.push(r);
            }
        }
    }
    println!(
        "{}",
        if ok { "emulator fidelity: as expected on every case" } else { "emulator fidelity: UNEXPECTED differences" }
    );
    if let Some(path) = &args.json {
        write_json(path, &results)?;
    }
    Ok(if ok { 0 } else { 1 })
}

/// The GPU MODE benchmark shapes and the large correctness shape.
pub const BENCH_SHAPES: [&str; 4] = ["128x7168x16384", "128x4096x7168", "128x7168x2048", "2304x4608x7168"];

fn bench(args: &BenchArgs) -> Result<i32> {
    let texts: Vec<String> =
        if args.shape.is_empty() { BENCH_SHAPES.iter().map(|s| s.to_string()).collect() } else { args.shape.clone() };
    let mut shapes = texts.iter().map(|t| parse_shape(t)).collect::<Result<Vec<_>>>()?;
    if args.decode {
        for shape in crate::bench::decode_shapes() {
            if !shapes.contains(&shape) {
                shapes.push(shape);
            }
        }
    }
    if args.iters == 0 {
        return Err(Error::Usage("--iters must be at least 1".into()));
    }
    let options = crate::bench::Options {
        shapes,
        kernels: args.kernel.into_iter().collect(),
        iters: args.iters,
        device: args.device,
        baselines: !args.no_baselines,
        modes: args.mode.iter().map(|m| m.a_format()).collect(),
    };
    let (report, bad) = crate::bench::run(&options)?;
    print!("{}", report.text());
    if let Some(path) = &args.json {
        write_json(path, &report)?;
        println!("json     {}", path.display());
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, crate::svg::chart(&report))
            .map_err(|e| Error::Usage(format!("cannot write {}: {e}", path.display())))?;
        println!("svg      {}", path.display());
    }
    if bad {
        eprintln!("bench: something disagreed with the reference (see the check column): exit code 1");
    }
    Ok(if bad { 1 } else { 0 })
}
