//! Fault injection: every fence, wait, arrive, commit and barrier of each tensor-core
//! kernel is dropped in turn, and each drop must be caught under emulation, by a report
//! or by a wrong output. This is the proof that the emulator, the only judge of kernels
//! no machine here can run, notices missing synchronisation.
//!
//! Run with `--nocapture` to see each kernel's table (site, instruction, outcome), and
//! with `FAULTS_DETAIL=1` as well for every report in full.
//!
//! A kernel is one [`Case`]; adding one is one more `#[test]` at the bottom, e.g.
//!
//! ```ignore
//! #[test]
//! fn sm100_every_dropped_synchronisation_is_caught() {
//!     check(Case {
//!         name: "sm100",
//!         shape: "...", // tails in M and N, every ring wrapped at least twice
//!         launch: kernel::sm100::launch,
//!         body: kernel::sm100::gemm::<kernel::sm100::Correct>,
//!         allowed: &[],
//!     });
//! }
//! ```
//!
//! The campaign fails first if the kernel executes a synchronisation instruction that
//! cannot be dropped (a mnemonic with `fence`, `wait`, `arrive`, `commit`, `bar.` in it
//! that is not in `emu::faults::DROPPABLE`): its op must opt in (see `emu::faults`).

use host::faults::{Campaign, Outcome, Trial, campaign};
use host::generate::{Distribution, generate};
use kernel::{GemmArgs, Launch};

/// A site whose drop may go unnoticed, and why that is correct.
struct Allowed {
    /// The mnemonic, as in the table.
    instruction: &'static str,
    /// A piece of the site's source line that identifies it.
    source: &'static str,
    /// Why the kernel is still correct without it (checked by a reader, so be precise).
    #[allow(dead_code)]
    reason: &'static str,
}

/// One kernel and the problem its faults are injected on.
struct Case {
    name: &'static str,
    /// Small, but every pipeline ring must wrap at least twice and M and N must have
    /// tails, so that every site runs in every role it has.
    shape: &'static str,
    launch: fn(u32, u32, u32) -> Launch,
    body: fn(&GemmArgs),
    /// Sites whose drop goes unnoticed on purpose (empty unless explained).
    allowed: &'static [Allowed],
}

fn check(case: Case) {
    let problem = generate(case.shape.parse().unwrap(), Distribution::GpuMode, 11);
    let s = problem.shape;
    let start = std::time::Instant::now();
    let result = campaign(case.name, &problem, (case.launch)(s.m, s.n, s.l), case.body)
        .unwrap_or_else(|e| panic!("{} on {}: {e}", case.name, case.shape));
    println!("{result}");
    if std::env::var_os("FAULTS_DETAIL").is_some() {
        for t in &result.trials {
            for (schedule, outcome) in &t.outcomes {
                match outcome {
                    Outcome::Reported(e) => println!("{} [{schedule:?}]:\n  {e}\n", t.site),
                    other => println!("{} [{schedule:?}]:\n  {other}\n", t.site),
                }
            }
        }
    }
    println!("  ({:.2} s in all)", start.elapsed().as_secs_f64());
    assert!(!result.trials.is_empty(), "{}: the clean run executed no droppable instruction", case.name);
    verdict(&case, &result);
}

fn verdict(case: &Case, result: &Campaign) {
    let allowed = |t: &Trial| {
        case.allowed.iter().position(|a| a.instruction == t.site.instruction && t.source().contains(a.source))
    };
    let unexplained: Vec<String> =
        result.undetected().filter(|t| allowed(t).is_none()).map(|t| format!("{} ({})", t.site, t.source())).collect();
    assert!(
        unexplained.is_empty(),
        "{}: dropping these sites went unnoticed (neither a report nor a wrong output): {unexplained:#?}\n\
         Either the emulator misses a rule (fix it, with a detector test) or the instruction is redundant \
         (explain why in the case's allow-list).",
        case.name
    );
    // An allow-list entry must still name an undetected site: stale excuses are errors.
    for (i, a) in case.allowed.iter().enumerate() {
        assert!(
            result.undetected().any(|t| allowed(t) == Some(i)),
            "{}: allow-list entry `{}` / {:?} matches no undetected site (remove it)",
            case.name,
            a.instruction,
            a.source
        );
    }
}

#[test]
fn sm90_every_dropped_synchronisation_is_caught() {
    // 2 x 2 tiles with M and N tails, 10 k-steps: the fp16 ring (4 stages) wraps twice
    // and a half, the raw cp.async ring (3 slots) three times.
    check(Case {
        name: "sm90",
        shape: "192x200x640",
        launch: kernel::sm90::launch,
        body: kernel::sm90::gemm::<kernel::sm90::Correct>,
        allowed: &[Allowed {
            instruction: "fence.mbarrier_init.release.cluster",
            source: "fence::mbarrier_init()",
            reason: "PTX ISA: fence.mbarrier_init orders prior mbarrier.init operations of the thread \
                     before later operations of the *async proxy* or of other CTAs of the *cluster* on \
                     those barriers. In sm90 neither exists: the cluster is one CTA, and every operation \
                     on its mbarriers is a generic-proxy mbarrier.arrive or try_wait by a CTA thread (no \
                     bulk/TMA copy signals complete_tx, nothing commits to them). For generic-proxy users \
                     inside the CTA, the bar.sync right after the inits orders them before every other \
                     thread's first use (dropping that bar.sync is caught: `no mbarrier was initialised`). \
                     The emulator demands the fence exactly where PTX does: before an async-proxy \
                     complete_tx on the barrier (ops/bulk.rs), as a kernel with bulk copies has.",
        }],
    });
}
