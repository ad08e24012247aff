//! Fault injection: drop each synchronisation instruction of a kernel in turn and check
//! that the emulator notices.
//!
//! A kernel body runs as written on a small problem (it must match the reference bit for
//! bit); that run lists every call site of a droppable instruction it executed (fences,
//! waits, arrives, commits, barriers: [`emu::faults::DROPPABLE`]). Then, for each site,
//! the kernel runs again with every execution of that instruction at that site turned
//! into a no-op, and the outcome is classified: the emulator reported a broken rule, the
//! kernel finished with a wrong C, or neither (the drop went unnoticed). Every run is
//! done under each thread [`Schedule`](emu::Schedule): a missing wait that one order of
//! the threads hides, the other exposes; a drop counts as caught when any schedule
//! catches it.
//! A synchronisation instruction that can be removed without either is redundant in the
//! kernel, or is one the emulator does not check: both deserve a close look.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use kernel::{GemmArgs, Launch};
use nvfp4::Shape;

use crate::emulate;
use crate::error::{Error, Result};
use crate::problem::{Output, Problem};
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
            Outcome::Reported(e) if e.kind == emu::ErrorKind::Deadlock => {
                // "every live thread is blocked:" then one line per group of threads:
                // "  threads 0-127 wait at `...` ... at crates/kernel/src/sm90.rs:377".
                let groups: Vec<String> = e
                    .message
                    .lines()
                    .filter_map(|l| {
                        let threads = l.trim().strip_prefix("threads ")?.split(" wait at ").next()?;
                        let at = l.rsplit(" at ").next()?;
                        Some(format!("{threads} at {}", file_name(at)))
                    })
                    .collect();
                write!(f, "report Deadlock: threads {}", groups.join("; "))
            }
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
    /// Executions of the site in the clean round-robin run (all threads, all CTAs).
    pub executions: u64,
    /// The outcome under each schedule, in the order of [`emu::Schedule::ALL`].
    pub outcomes: Vec<(emu::Schedule, Outcome)>,
    /// Wall time of all its runs.
    pub wall: Duration,
}

impl Trial {
    /// Whether some schedule caught the drop.
    pub fn detected(&self) -> bool {
        self.outcomes.iter().any(|(_, o)| o.detected())
    }

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
    /// Wall time of the clean runs (one per schedule).
    pub clean_wall: Duration,
    pub trials: Vec<Trial>,
}

impl Campaign {
    /// The trials whose drop went unnoticed.
    pub fn undetected(&self) -> impl Iterator<Item = &Trial> {
        self.trials.iter().filter(|t| !t.detected())
    }
}

impl fmt::Display for Campaign {
    /// A table, one site per line: where, the source line, the instruction, how often
    /// the clean run executed it, and the outcome of dropping it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: Duration = self.trials.iter().map(|t| t.wall).sum();
        writeln!(
            f,
            "{} on {}: {} droppable sites; clean runs {:.2} s, {} faulty runs {:.2} s",
            self.kernel,
            self.shape,
            self.trials.len(),
            self.clean_wall.as_secs_f64(),
            self.trials.iter().map(|t| t.outcomes.len()).sum::<usize>(),
            total.as_secs_f64()
        )?;
        let cell = |o: &Outcome| {
            let text = o.to_string();
            match text.char_indices().nth(OUTCOME_CHARS) {
                Some((i, _)) => format!("{}…", &text[..i]),
                None => text,
            }
        };
        let rows: Vec<[String; 6]> = self
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
                    t.outcomes.first().map(|(_, o)| cell(o)).unwrap_or_default(),
                    t.outcomes.get(1).map(|(_, o)| cell(o)).unwrap_or_default(),
                ]
            })
            .collect();
        let header = [
            "site",
            "source",
            "instruction",
            "execs",
            "dropped, round-robin schedule",
            "dropped, highest-first schedule",
        ]
        .map(String::from);
        let widths: Vec<usize> =
            (0..5).map(|c| rows.iter().chain([&header]).map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        for row in [&header].into_iter().chain(&rows) {
            let [site, source, instruction, runs, round_robin, highest_first] = row;
            writeln!(
                f,
                "  {site:<w0$}  {source:<w1$}  {instruction:<w2$}  {runs:>w3$}  {round_robin:<w4$}  {highest_first}",
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3],
                w4 = widths[4]
            )?;
        }
        Ok(())
    }
}

/// Runs `body` (launched as `launch`, computed for `sms` SMs) on `problem` as written, then once per droppable
/// site it executed with that site dropped; each run once per [`emu::Schedule`].
/// `kernel` names it in the table.
///
/// Fails if the clean run is not bit-exact against the reference (`problem` should come
/// from [`Distribution::GpuMode`](crate::generate::Distribution), where every partial
/// sum is exact), or if it executed a synchronisation instruction the emulator cannot
/// drop (see [`emu::faults::looks_like_sync`]): a fault campaign must not miss one.
pub fn campaign(
    kernel: &str,
    problem: &Problem,
    sms: u32,
    launch: Launch,
    body: impl Fn(&GemmArgs) + Sync,
) -> Result<Campaign> {
    let want = reference(problem);
    let mut clean_wall = Duration::ZERO;
    let mut cleans = Vec::new();
    for schedule in emu::Schedule::ALL {
        let options = emu::Options { schedule, ..emu::Options::default() };
        let clean = emulate::run_body_with(problem, sms, launch, &options, &body)?;
        let c = compare(problem.shape, &clean.c, &want);
        if !c.bit_exact {
            return Err(Error::Failed(format!(
                "{kernel} on {} ({schedule:?} schedule): the clean run is not bit-exact: {c}",
                problem.shape
            )));
        }
        clean_wall += clean.wall;
        cleans.push(clean);
    }
    let clean = &cleans[0];
    if let Some(other) = cleans.iter().find(|c| c.stats.sites.keys().ne(clean.stats.sites.keys())) {
        return Err(Error::Failed(format!(
            "{kernel}: the schedules executed different sites: {:?} vs {:?}",
            clean.stats.sites.keys().collect::<Vec<_>>(),
            other.stats.sites.keys().collect::<Vec<_>>()
        )));
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
        let start = Instant::now();
        let mut outcomes = Vec::new();
        for schedule in emu::Schedule::ALL {
            let options = emu::Options { drop: Some(site), schedule, ..emu::Options::default() };
            let outcome = match emulate::run_body_with(problem, sms, launch, &options, &body) {
                // The emulator failed to drop the site: a bug to fix there, not a catch.
                Err(Error::Emulator(e)) if e.message.starts_with(emu::faults::UNHONOURED_DROP) => {
                    return Err(Error::Failed(format!("{kernel}: dropping {site}: {e}")));
                }
                Err(Error::Emulator(e)) => Outcome::Reported(e),
                Err(other) => return Err(other),
                Ok(run) => match differing(&run.c, &want) {
                    0 => Outcome::Undetected,
                    mismatches => Outcome::WrongOutput { mismatches, unwritten: unwritten(&run.c) },
                },
            };
            outcomes.push((schedule, outcome));
        }
        trials.push(Trial { site, executions, outcomes, wall: start.elapsed() });
    }
    Ok(Campaign { kernel: kernel.to_string(), shape: problem.shape, clean_wall, trials })
}

/// Characters of an outcome in the table.
const OUTCOME_CHARS: usize = 76;

/// Elements that are not bit-identical (+0 and -0 equal, any two NaNs equal: the
/// equality under which the clean run was bit-exact).
fn differing(got: &Output, want: &Output) -> u64 {
    (0..got.len())
        .filter(|&i| {
            let (g, w) = (got.value(i), want.value(i));
            got.bits[i] != want.bits[i] && !(g.is_nan() && w.is_nan()) && !(g == 0.0 && w == 0.0)
        })
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
