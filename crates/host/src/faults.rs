//! Fault injection: drop each synchronisation instruction of a kernel in turn and check
//! that the emulator notices.
//!
//! A kernel body runs once as written on a small problem (it must match the reference
//! bit for bit); that run lists every call site of a droppable instruction it executed
//! (fences, waits, arrives, commits, barriers: [`emu::faults::DROPPABLE`]). Then, for
//! each site, the kernel runs again with every execution of that instruction at that
//! site turned into a no-op, and the outcome is classified: the emulator reported a
//! broken rule, the kernel finished with a wrong C, or neither (the drop went unnoticed).
//! A synchronisation instruction that can be removed without either is redundant in the
//! kernel, or is one the emulator does not check: both deserve a close look.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use half::f16;
use kernel::{GemmArgs, Launch};
use nvfp4::Shape;

use crate::emulate;
use crate::error::{Error, Result};
use crate::problem::Problem;
use crate::reference::reference;
use crate::verify::{compare, unwritten};

/// What dropping one site did.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The emulator stopped the kernel with a report.
    Reported(emu::EmuError),
    /// The kernel ran to the end without a report, but C differs from the reference in
    /// `mismatches` elements (bit for bit; `unwritten` of them still hold the poison).
    WrongOutput { mismatches: u64, unwritten: u64 },
    /// The kernel ran to the end and C is still bit-exact: the drop went unnoticed.
    Undetected,
}

impl Outcome {
    /// Whether the drop was noticed (a report or a wrong output).
    pub fn detected(&self) -> bool {
        !matches!(self, Outcome::Undetected)
    }
}

impl fmt::Display for Outcome {
    /// One line: the report's kind and the first line of its message, or the count of
    /// wrong elements.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Reported(e) => {
                let first = e.message.lines().next().unwrap_or_default();
                let at = e.location.map(|l| format!(" at {}:{}", file_name(l.file()), l.line())).unwrap_or_default();
                write!(f, "report {:?}{at}: {first}", e.kind)
            }
            Outcome::WrongOutput { mismatches, unwritten } => {
                write!(f, "wrong output: {mismatches} elements differ ({unwritten} unwritten)")
            }
            Outcome::Undetected => f.write_str("UNDETECTED"),
        }
    }
}

/// One dropped site and what happened.
#[derive(Clone, Debug)]
pub struct Trial {
    pub site: emu::Site,
    /// Executions of the site in the clean run (all threads, all CTAs).
    pub executions: u64,
    pub outcome: Outcome,
    pub wall: Duration,
}

impl Trial {
    /// The kernel source line of the site, trimmed (empty when the file cannot be read).
    pub fn source(&self) -> String {
        source_line(self.site.loc).unwrap_or_default()
    }
}

/// Every droppable site of one kernel on one problem, each dropped in turn.
#[derive(Clone, Debug)]
pub struct Campaign {
    pub kernel: String,
    pub shape: Shape,
    /// Wall time of the clean run.
    pub clean_wall: Duration,
    pub trials: Vec<Trial>,
}

impl Campaign {
    /// The trials whose drop went unnoticed.
    pub fn undetected(&self) -> impl Iterator<Item = &Trial> {
        self.trials.iter().filter(|t| !t.outcome.detected())
    }
}

impl fmt::Display for Campaign {
    /// A table, one site per line: where, the source line, the instruction, how often
    /// the clean run executed it, and the outcome of dropping it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: Duration = self.trials.iter().map(|t| t.wall).sum();
        writeln!(
            f,
            "{} on {}: {} droppable sites; clean run {:.2} s, {} faulty runs {:.2} s",
            self.kernel,
            self.shape,
            self.trials.len(),
            self.clean_wall.as_secs_f64(),
            self.trials.len(),
            total.as_secs_f64()
        )?;
        let rows: Vec<[String; 5]> = self
            .trials
            .iter()
            .map(|t| {
                let mut source = t.source();
                if source.chars().count() > 48 {
                    source = source.chars().take(47).collect::<String>() + "…";
                }
                [
                    format!("{}:{}", file_name(t.site.loc.file()), t.site.loc.line()),
                    source,
                    t.site.instruction.to_string(),
                    t.executions.to_string(),
                    t.outcome.to_string(),
                ]
            })
            .collect();
        let header = ["site", "source", "instruction", "runs", "outcome when dropped"].map(String::from);
        let widths: Vec<usize> =
            (0..4).map(|c| rows.iter().chain([&header]).map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        for row in [&header].into_iter().chain(&rows) {
            let [site, source, instruction, runs, outcome] = row;
            writeln!(
                f,
                "  {site:<w0$}  {source:<w1$}  {instruction:<w2$}  {runs:>w3$}  {outcome}",
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3]
            )?;
        }
        Ok(())
    }
}

/// Runs `body` (launched as `launch`) on `problem` as written, then once per droppable
/// site it executed with that site dropped. `kernel` names it in the table.
///
/// Fails if the clean run is not bit-exact against the reference (`problem` should come
/// from [`Distribution::GpuMode`](crate::generate::Distribution), where every partial
/// sum is exact), or if it executed a synchronisation instruction the emulator cannot
/// drop (see [`emu::faults::looks_like_sync`]): a fault campaign must not miss one.
pub fn campaign(kernel: &str, problem: &Problem, launch: Launch, body: impl Fn(&GemmArgs) + Sync) -> Result<Campaign> {
    let want = reference(problem);
    let clean = emulate::run_body(problem, launch, &body)?;
    let c = compare(problem.shape, &clean.c, &want);
    if !c.bit_exact {
        return Err(Error::Failed(format!("{kernel} on {}: the clean run is not bit-exact: {c}", problem.shape)));
    }
    let missing: Vec<&str> = clean
        .stats
        .instructions
        .keys()
        .copied()
        .filter(|i| emu::faults::looks_like_sync(i) && !emu::faults::is_droppable(i))
        .collect();
    if !missing.is_empty() {
        return Err(Error::Failed(format!(
            "{kernel} executed synchronisation instructions fault injection cannot drop: {missing:?}; \
             make them droppable (emu::faults explains how)"
        )));
    }
    let mut trials = Vec::new();
    for (&site, &executions) in &clean.stats.sites {
        let options = emu::Options { drop: Some(site), ..emu::Options::default() };
        let start = Instant::now();
        let outcome = match emulate::run_body_with(problem, launch, &options, &body) {
            Err(Error::Emulator(e)) => Outcome::Reported(e),
            Err(other) => return Err(other),
            Ok(run) => match differing(&run.c, &want) {
                0 => Outcome::Undetected,
                mismatches => Outcome::WrongOutput { mismatches, unwritten: unwritten(&run.c) },
            },
        };
        trials.push(Trial { site, executions, outcome, wall: start.elapsed() });
    }
    Ok(Campaign { kernel: kernel.to_string(), shape: problem.shape, clean_wall: clean.wall, trials })
}

/// Elements that are not bit-identical (+0 and -0 equal, any two NaNs equal: the
/// equality under which the clean run was bit-exact).
fn differing(got: &[f16], want: &[f16]) -> u64 {
    got.iter()
        .zip(want)
        .filter(|(g, w)| g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan()) && !(**g == f16::ZERO && **w == f16::ZERO))
        .count() as u64
}

/// `crates/kernel/src/sm90.rs` → `sm90.rs`.
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The trimmed source text at `loc`, read from the workspace the host was built in.
pub fn source_line(loc: emu::Loc) -> Option<String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(workspace.join(loc.file())).ok()?;
    text.lines().nth(loc.line() as usize - 1).map(|l| l.trim().to_string())
}
