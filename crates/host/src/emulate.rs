//! Running a kernel on the CPU through the emulator, with the same inputs, outputs and
//! poisoning as a GPU run.

use std::time::{Duration, Instant};

use kernel::{GemmArgs, Launch};

use crate::error::Result;
use crate::kernels::Kernel;
use crate::problem::{Output, Problem};

/// The output of an emulated launch and what it executed.
#[derive(Debug)]
pub struct EmulatedRun {
    pub c: Output,
    pub stats: emu::Stats,
    pub wall: Duration,
}

/// A kernel body as the emulator runs it.
type Body = fn(&GemmArgs);

/// Runs `kernel` on `problem` under emulation: each of its launches in order, on the same
/// memory (statistics summed over the launches), as on the GPU it was tuned on
/// ([`Kernel::emulated_sms`]).
pub fn run(problem: &Problem, kernel: Kernel) -> Result<EmulatedRun> {
    run_on(problem, kernel, kernel.emulated_sms())
}

/// [`run`] as on a GPU with `sms` SMs: the work decomposition a GPU run of that size
/// uses, so that the two can be compared bit for bit.
pub fn run_on(problem: &Problem, kernel: Kernel, sms: u32) -> Result<EmulatedRun> {
    run_kernel_steps(problem, sms, &kernel.steps(problem.shape, sms, problem.a_format))
}

/// [`run`] of `sm90v2` on its tile kind of key `tile` (`kernel::sm90v2::TILES`) rather than
/// the one the call would pick: each kind under emulation whatever shapes pick it.
pub fn run_sm90v2_tile(problem: &Problem, tile: u32) -> Result<EmulatedRun> {
    let (s, sms) = (problem.shape, Kernel::Sm90v2.emulated_sms());
    let plan = kernel::sm90v2::Plan::on(tile, s.m, s.n, s.k, s.l, sms);
    run_kernel_steps(problem, sms, &Kernel::sm90v2_steps(&plan, problem.a_format))
}

/// [`run_steps`] of a kernel's launches ([`crate::kernels::Step`]s).
fn run_kernel_steps(problem: &Problem, sms: u32, steps: &[crate::kernels::Step]) -> Result<EmulatedRun> {
    let steps: Vec<(Launch, Body)> = steps.iter().map(|s| (s.launch, s.body)).collect();
    run_steps(problem, sms, &steps)
}

/// Workspace every emulated launch gets: the most any kernel, or any of sm90v2's tile
/// kinds, asks for the shape on `sms` SMs.
fn workspace_bytes(problem: &Problem, sms: u32) -> u64 {
    let s = problem.shape;
    let tiles = kernel::sm90v2::TILES.map(|t| kernel::sm90v2::Plan::on(t, s.m, s.n, s.k, s.l, sms).workspace_bytes());
    Kernel::ALL.iter().map(|k| k.workspace_bytes(s, sms)).chain(tiles).max().unwrap_or(0)
}

/// Runs any kernel body (for instance a deliberately broken variant in a test) with the
/// launch geometry `launch`, computed for `sms` SMs (the body gets the same count).
pub fn run_body(problem: &Problem, sms: u32, launch: Launch, body: impl Fn(&GemmArgs) + Sync) -> Result<EmulatedRun> {
    run_body_with(problem, sms, launch, &emu::Options::default(), body)
}

/// [`run_body`] with explicit emulator options (a seeded schedule, race detection off, a
/// synchronisation instruction dropped: see [`crate::faults`]).
pub fn run_body_with(
    problem: &Problem,
    sms: u32,
    launch: Launch,
    options: &emu::Options,
    body: impl Fn(&GemmArgs) + Sync,
) -> Result<EmulatedRun> {
    run_steps_with(problem, sms, &[(launch, body)], options)
}

/// Runs several launches, computed for `sms` SMs, in order on the same memory (a kernel
/// with a prologue, or a test's variant of one).
pub fn run_steps<F: Fn(&GemmArgs) + Sync>(problem: &Problem, sms: u32, steps: &[(Launch, F)]) -> Result<EmulatedRun> {
    run_steps_with(problem, sms, steps, &emu::Options::default())
}

/// [`run_steps`] with explicit emulator options.
pub fn run_steps_with<F: Fn(&GemmArgs) + Sync>(
    problem: &Problem,
    sms: u32,
    steps: &[(Launch, F)],
    options: &emu::Options,
) -> Result<EmulatedRun> {
    let shape = problem.shape;
    let epilogue = &problem.epilogue;
    let memory = emu::GlobalMemory::new();
    let poison: Vec<u8> = (0..shape.c_bytes() / 2).flat_map(|_| epilogue.out.poison().to_le_bytes()).collect();
    let args = GemmArgs {
        a: memory.alloc_from("A", &problem.a),
        b: memory.alloc_from("B", &problem.b),
        sfa: memory.alloc_from("SFA", &problem.sfa),
        sfb: memory.alloc_from("SFB", &problem.sfb),
        c: memory.alloc_from("C", &poison),
        workspace: memory.alloc_from("workspace", &vec![0; workspace_bytes(problem, sms) as usize]),
        m: shape.m,
        n: shape.n,
        k: shape.k,
        l: shape.l,
        // With alpha in memory the by-value argument is NaN: a kernel that ignored the
        // pointer would write NaN everywhere.
        alpha: if epilogue.alpha_in_memory { f32::NAN } else { epilogue.alpha },
        alpha_ptr: if epilogue.alpha_in_memory { memory.alloc_from("alpha", &epilogue.alpha.to_le_bytes()) } else { 0 },
        bias: match &epilogue.bias {
            Some(bias) => memory.alloc_from("bias", &bias.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<u8>>()),
            None => 0,
        },
        out_dtype: epilogue.out.code(),
        a_format: problem.a_format.code(),
        sms,
    };
    let start = Instant::now();
    let mut stats: Option<emu::Stats> = None;
    for (launch, body) in steps {
        let config = emu::LaunchConfig { grid: launch.grid, block: launch.block, dynamic_smem: launch.dynamic_smem };
        let s = emu::launch_with(&memory, config, options, || body(&args))?;
        stats = Some(match stats {
            None => s,
            Some(mut total) => {
                total.ctas += s.ctas;
                total.threads += s.threads;
                for (name, count) in s.instructions {
                    *total.instructions.entry(name).or_default() += count;
                }
                total
            }
        });
    }
    let stats = stats.expect("at least one launch");
    let wall = start.elapsed();
    let mut bytes = vec![0u8; shape.c_bytes() as usize];
    memory.read(args.c, &mut bytes).map_err(crate::Error::Failed)?;
    Ok(EmulatedRun { c: Output::from_le_bytes(epilogue.out, &bytes), stats, wall })
}
