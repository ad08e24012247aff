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
//! fn sm120_every_dropped_synchronisation_is_caught() {
//!     check(Case {
//!         name: "sm120",
//!         sms: 188,
//!         // Tails in M and N, every ring wrapped at least twice (force a small grid if
//!         // the kernel is persistent); several runs when paths differ (e.g. split-K).
//!         runs: &[Run { shape: "...", launch: |s| kernel::sm120::launch(s.m, s.n, s.k, s.l, 188) }],
//!         body: kernel::sm120::gemm::<kernel::sm120::Correct>,
//!         allowed: &[],
//!     });
//! }
//! ```
//!
//! The campaign fails first if the kernel executes a synchronisation instruction that
//! cannot be dropped (a mnemonic with `fence`, `wait`, `arrive`, `commit`, `bar.` in it
//! that is not in `emu::faults::DROPPABLE`): its op must opt in (see `emu::faults`).

use std::collections::BTreeMap;

use host::kernels::B200_SMS;

use host::faults::{Outcome, campaign};
use host::generate::{Distribution, generate};
use kernel::{GemmArgs, Launch};
use nvfp4::Shape;

/// A site whose drop may go unnoticed, and why.
struct Allowed {
    /// The mnemonic, as in the table.
    instruction: &'static str,
    /// A piece of the site's source line that identifies it...
    source: &'static str,
    /// ...and which of the sites with this instruction and source it is, in source order
    /// (0 unless the same line appears several times).
    nth: usize,
    why: Why,
}

/// Why a drop may go unnoticed: two different statements, kept apart.
enum Why {
    /// The kernel is correct without the instruction: the reason, precise enough for a
    /// reader to check.
    Redundant(&'static str),
    /// The instruction is needed, but the emulator has no rule that notices it missing: a
    /// known gap, with what a rule would take.
    NotModelled(&'static str),
}

impl Why {
    /// (label, reason) for the output.
    fn text(&self) -> (&'static str, &'static str) {
        match *self {
            Why::Redundant(r) => ("redundant", r),
            Why::NotModelled(r) => ("NOT MODELLED, a known emulator gap", r),
        }
    }
}

/// One kernel and the problems its faults are injected on.
struct Case {
    name: &'static str,
    /// The SM count the launches are computed for (the kernel gets the same).
    sms: u32,
    /// One or more problems; a drop counts as caught when any of them catches it.
    runs: &'static [Run],
    body: fn(&GemmArgs),
    /// Sites whose drop goes unnoticed on purpose (empty unless explained).
    allowed: &'static [Allowed],
}

/// One problem of a case.
struct Run {
    /// Small, but every pipeline ring must wrap at least twice and M and N must have
    /// tails, so that every site runs in every role it has.
    shape: &'static str,
    /// The launch geometry for a shape (the kernel's own, or one that makes each CTA
    /// walk more work so that its rings wrap).
    launch: fn(Shape) -> Launch,
}

/// A site over all the runs of a case.
struct Merged {
    site: emu::Site,
    source: String,
    detected: bool,
}

fn check(case: Case) {
    let start = std::time::Instant::now();
    let mut merged: BTreeMap<emu::Site, Merged> = BTreeMap::new();
    for run in case.runs {
        let problem = generate(run.shape.parse().unwrap(), Distribution::GpuMode, 11);
        let result = campaign(case.name, &problem, case.sms, (run.launch)(problem.shape), case.body)
            .unwrap_or_else(|e| panic!("{} on {}: {e}", case.name, run.shape));
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
        assert!(!result.trials.is_empty(), "{} on {}: no droppable instruction ran", case.name, run.shape);
        for t in &result.trials {
            let m =
                merged.entry(t.site).or_insert_with(|| Merged { site: t.site, source: t.source(), detected: false });
            m.detected |= t.detected();
        }
    }
    println!("  ({:.2} s in all)", start.elapsed().as_secs_f64());
    verdict(&case, &merged.into_values().collect::<Vec<_>>());
}

fn verdict(case: &Case, sites: &[Merged]) {
    // The site each allow-list entry names (sites are in source order).
    let named: Vec<Option<&Merged>> = case
        .allowed
        .iter()
        .map(|a| {
            let mut matching =
                sites.iter().filter(|m| m.site.instruction == a.instruction && m.source.contains(a.source));
            matching.nth(a.nth)
        })
        .collect();
    for (a, m) in case.allowed.iter().zip(&named) {
        if let Some(m) = m.filter(|m| !m.detected) {
            let (label, reason) = a.why.text();
            println!("  undetected, allowed as {label}: {} ({}):\n    {reason}", m.site, m.source);
        }
    }
    let unexplained: Vec<String> = sites
        .iter()
        .filter(|m| !m.detected && !named.iter().any(|n| n.is_some_and(|n| n.site == m.site)))
        .map(|m| format!("{} ({})", m.site, m.source))
        .collect();
    assert!(
        unexplained.is_empty(),
        "{}: dropping these sites went unnoticed (neither a report nor a wrong output): {unexplained:#?}\n\
         Either the emulator misses a rule (fix it, with a detector test) or the instruction is redundant \
         (explain why in the case's allow-list).",
        case.name
    );
    // An allow-list entry must still name an undetected site: stale excuses are errors.
    for (a, m) in case.allowed.iter().zip(&named) {
        assert!(
            m.is_some_and(|m| !m.detected),
            "{}: allow-list entry `{}` / {:?} #{} names no undetected site (remove it)",
            case.name,
            a.instruction,
            a.source,
            a.nth
        );
    }
}

#[test]
fn sm90_every_dropped_synchronisation_is_caught() {
    // 2 x 2 tiles with M and N tails, 10 k-steps: the fp16 ring (4 stages) wraps twice
    // and a half, the raw cp.async ring (3 slots) three times.
    check(Case {
        name: "sm90",
        sms: host::kernels::H100_SXM_SMS,
        runs: &[Run { shape: "192x200x640", launch: |s| kernel::sm90::launch(s.m, s.n, s.l) }],
        body: kernel::sm90::gemm::<kernel::sm90::Correct>,
        allowed: &[Allowed {
            instruction: "fence.mbarrier_init.release.cluster",
            source: "fence::mbarrier_init()",
            nth: 0,
            why: Why::Redundant(
                "PTX ISA: fence.mbarrier_init orders prior mbarrier.init operations of the thread \
                     before later operations of the *async proxy* or of other CTAs of the *cluster* on \
                     those barriers. In sm90 neither exists: the cluster is one CTA, and every operation \
                     on its mbarriers is a generic-proxy mbarrier.arrive or try_wait by a CTA thread (no \
                     bulk/TMA copy signals complete_tx, nothing commits to them). For generic-proxy users \
                     inside the CTA, the bar.sync right after the inits orders them before every other \
                     thread's first use (dropping that bar.sync is caught: `no mbarrier was initialised`). \
                     The emulator demands the fence exactly where PTX does: before an async-proxy \
                     arrival on the barrier (a bulk copy's complete_tx in ops/bulk.rs, a tcgen05.commit \
                     in ops/tcgen05.rs), which sm90 has none of.",
            ),
        }],
    });
}

#[test]
fn sm100_every_dropped_synchronisation_is_caught() {
    const GPU_FENCE: &str = "split-K: the GPU-scope fences of the fix-up handshake (before the count: this \
                             thread's partial stores before the counter's atomic, as other CTAs see them; \
                             after it, in the last CTA: the other CTAs' partials before they are read). The \
                             emulator's global memory is sequentially consistent, so no drop of them can be \
                             observed; a rule needs a weak-memory (or happens-before) model of global memory \
                             across CTAs.";
    check(Case {
        name: "sm100",
        sms: B200_SMS,
        runs: &[
            // 2 x 5 tiles with M and N tails, 3 K stages each (the last one partial), run by
            // 2 persistent CTAs of 5 tiles each: the stage ring (6 slots) wraps twice and a
            // half, both tensor-memory accumulators go round two and a half times.
            Run {
                shape: "200x300x576",
                launch: |s| kernel::Launch { grid: [2, 1, 1], ..kernel::sm100::launch(s.m, s.n, s.k, s.l, B200_SMS) },
            },
            // K split in 2 (3 tiles x 2 splits of 4 stages), all 6 units run by one
            // persistent CTA: the rings wrap and the split-K fix-up's fences, named
            // barriers and counter run.
            Run {
                shape: "100x130x2048",
                launch: |s| {
                    assert_eq!(kernel::sm100::splits(s.m, s.n, s.k, s.l, B200_SMS), 2, "the shape must split K");
                    kernel::Launch { grid: [1, 1, 1], ..kernel::sm100::launch(s.m, s.n, s.k, s.l, B200_SMS) }
                },
            },
        ],
        body: kernel::sm100::gemm::<kernel::sm100::Correct>,
        allowed: &[
            Allowed {
                instruction: "fence.mbarrier_init.release.cluster",
                source: "fence::mbarrier_init()",
                nth: 0,
                why: Why::Redundant(
                    "the only async-proxy arrivals on these barriers are tcgen05.commits (the emulator \
                     checks their init is published: ops/tcgen05.rs). Thread 0, which initialised every \
                     barrier, is also producer thread 0: it executes fence.proxy.async, which publishes \
                     its inits to the async proxy as well, before its first arrive on `full`, and every \
                     commit comes from an MMA issued after waiting for a `full` phase that needs that \
                     arrive. (No other CTA of a cluster uses them: the cluster is one CTA.)",
                ),
            },
            Allowed {
                instruction: "tcgen05.fence::before_thread_sync",
                source: "tcgen05::fence_before_thread_sync()",
                nth: 0,
                why: Why::NotModelled(
                    "setup: orders the MMA warp's tcgen05.alloc, which writes the tensor-memory address \
                     to shared memory, before the CTA barrier after which every thread loads that address \
                     (the alloc → before_thread_sync → bar.sync → after_thread_sync pattern of the design \
                     notes, section 6). The emulator has no rule for the alloc's ordering. One was tried \
                     (a synchronisation by a thread whose alloc has no before_thread_sync since is \
                     reported, as for an unfenced tcgen05.ld) and reverted: PTX says the fence orders \
                     prior *asynchronous* tcgen05 operations and does not say whether alloc is one, and \
                     the emulator's own tcgen05 tests set up without this fence. The tcgen05 model's \
                     owner should settle the reading (PTX text or a B200 probe) and add the rule.",
                ),
            },
            Allowed {
                instruction: "tcgen05.fence::after_thread_sync",
                source: "tcgen05::fence_after_thread_sync()",
                nth: 0,
                why: Why::Redundant(
                    "setup: after the CTA barrier no thread issues a tcgen05 operation before another \
                     mbarrier wait followed by its own after_thread_sync (the MMA thread waits on `full` \
                     then fences before its first cp/mma; the epilogue waits on `tmem_full` then fences \
                     before its first ld; the producers issue none; the MMA warp's dealloc has its own \
                     fence after the final barrier). A later after_thread_sync orders the thread's later \
                     tcgen05 operations after every earlier synchronisation of that thread, this \
                     barrier included.",
                ),
            },
            Allowed {
                instruction: "tcgen05.fence::before_thread_sync",
                source: "tcgen05::fence_before_thread_sync()",
                nth: 1,
                why: Why::Redundant(
                    "teardown: every thread's last tcgen05 operation is already followed by a \
                     before_thread_sync before it reaches the final barrier: the epilogue's loads by the \
                     fence before its last `tmem_empty` arrive, the MMA thread's cp/mma by its last \
                     tcgen05.commit (which implies the fence); the producers issue none. A fence orders \
                     the earlier operations before every later synchronisation, this barrier included. \
                     (Kept in the kernel as the documented teardown pattern; the emulator does check the \
                     dealloc against unfenced loads and in-flight operations.)",
                ),
            },
            Allowed {
                instruction: "tcgen05.fence::after_thread_sync",
                source: "tcgen05::fence_after_thread_sync()",
                nth: 2,
                why: Why::Redundant(
                    "the MMA thread's fence after waiting on `tmem_empty`: before its next tcgen05 \
                     operation it always waits on `full` and fences again (every tile, and every split \
                     of one, has at least one K stage), and that later fence orders the operation after \
                     both waits.",
                ),
            },
            Allowed {
                instruction: "fence.acq_rel.gpu",
                source: "fence::acq_rel_gpu()",
                nth: 0,
                why: Why::NotModelled(GPU_FENCE),
            },
            Allowed {
                instruction: "fence.acq_rel.gpu",
                source: "fence::acq_rel_gpu()",
                nth: 1,
                why: Why::NotModelled(GPU_FENCE),
            },
        ],
    });
}
