//! The embedded PTX: every target built, the right entry points and instructions in each,
//! and (where ptxas was available at build time; CI requires it) assembled with no
//! spills, no stack and no serialized wgmma.

use host::embedded::{TARGETS, target};

#[test]
fn every_target_is_embedded_for_its_architecture() {
    let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    assert_eq!(names, ["portable", "sm90a", "sm100a"]);
    for t in TARGETS {
        assert!(t.ptx.contains(&format!(".target {}", t.arch)), "{} PTX does not target {}", t.name, t.arch);
        assert!(t.ptx.contains(".address_size 64"), "{}", t.name);
    }
    // tcgen05's block-scaled FP4 MMA needs PTX ISA 8.7 (rustc's default for sm_100a is 8.6).
    assert!(target("sm100a").unwrap().ptx.contains(".version 8.7"));
}

#[test]
fn each_ptx_has_its_entry_points() {
    let entries = |name: &str| -> Vec<String> {
        target(name)
            .unwrap()
            .ptx
            .lines()
            .filter_map(|l| l.trim().strip_prefix(".visible .entry ").map(|e| e.trim_end_matches('(').to_string()))
            // The instruction probes are checked in `each_ptx_has_its_probes`.
            .filter(|e| !e.starts_with("probe_"))
            .collect()
    };
    // `nvfp4_dequant_fp16` is the benchmark baseline's dequantizer (kernel::dequant),
    // `nvfp4_stream_read` its plain read of a decode call's bytes (kernel::stream).
    assert_eq!(entries("portable"), ["nvfp4_dequant_fp16", "nvfp4_gemm_naive", "nvfp4_stream_read"]);
    assert_eq!(
        entries("sm90a"),
        [
            "nvfp4_dequant_fp16",
            "nvfp4_gemm_naive",
            "nvfp4_gemm_sm90",
            "nvfp4_gemm_sm90v2",
            "nvfp4_gemm_sm90v2_bf16",
            "nvfp4_gemm_sm90v2_decode",
            "nvfp4_gemm_sm90v2_medium",
            "nvfp4_gemm_sm90v2_narrow",
            "nvfp4_gemm_sm90v2_thin",
            "nvfp4_gemm_sm90v2_thin_bf16",
            "nvfp4_gemm_sm90v2_thin_medium",
            "nvfp4_gemm_sm90v2_thin_medium_bf16",
            "nvfp4_gemm_sm90v2_wide",
            "nvfp4_gemm_sm90v2_wide_bf16",
            "nvfp4_gemv_sm90",
            "nvfp4_skinny_sm90",
            "nvfp4_sm90v2_decode_prepare",
            "nvfp4_sm90v2_decode_reduce",
            "nvfp4_sm90v2_medium_prepare",
            "nvfp4_sm90v2_medium_reduce",
            "nvfp4_sm90v2_narrow_prepare",
            "nvfp4_sm90v2_narrow_reduce",
            "nvfp4_sm90v2_prepare",
            "nvfp4_sm90v2_reduce",
            "nvfp4_sm90v2_thin_medium_prepare",
            "nvfp4_sm90v2_thin_medium_reduce",
            "nvfp4_sm90v2_thin_prepare",
            "nvfp4_sm90v2_thin_reduce",
            "nvfp4_sm90v2_wide_prepare",
            "nvfp4_sm90v2_wide_reduce",
            "nvfp4_stream_read"
        ]
    );
    assert_eq!(entries("sm100a"), ["nvfp4_dequant_fp16", "nvfp4_gemm_naive", "nvfp4_gemm_sm100", "nvfp4_stream_read"]);
}

#[test]
fn each_ptx_has_its_probes() {
    for t in TARGETS {
        let mut probes: Vec<&str> = t
            .ptx
            .lines()
            .filter_map(|l| l.trim().strip_prefix(".visible .entry probe_").map(|e| e.trim_end_matches('(')))
            .collect();
        probes.sort_unstable();
        let want: Vec<String> =
            host::probes::entries_in(t.name).iter().map(|e| e.trim_start_matches("probe_").to_string()).collect();
        assert_eq!(probes, want, "{}", t.name);
    }
    assert_eq!(host::probes::entries_in("portable"), ["probe_warp"]);
    assert_eq!(
        host::probes::entries_in("sm90a"),
        ["probe_bulk", "probe_cp_async", "probe_cvt", "probe_tma", "probe_warp", "probe_wgmma"]
    );
    assert_eq!(
        host::probes::entries_in("sm100a"),
        [
            "probe_bulk",
            "probe_cp_async",
            "probe_cvt",
            "probe_tcgen05_cp",
            "probe_tcgen05_mma",
            "probe_tma",
            "probe_warp"
        ]
    );
}

#[test]
fn probes_use_the_instructions_they_probe() {
    for (name, instructions) in [
        (
            "sm90a",
            &[
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64",
                "mbarrier.test_wait.parity.shared::cta.b64",
                "cp.async.ca.shared.global",
                "cp.async.mbarrier.arrive.noinc.shared::cta.b64",
                "cvt.rn.f16x2.f32",
                "cvt.rn.f16.f32",
                "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
            ][..],
        ),
        (
            "sm100a",
            &[
                "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
                "tcgen05.cp.cta_group::1.32x128b.warpx4",
                "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X",
                "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
                "tcgen05.ld.sync.aligned.32x32b.x32.b32",
                "tcgen05.wait::ld.sync.aligned",
                "tcgen05.dealloc.cta_group::1.sync.aligned.b32",
                "cp.async.bulk.tensor.2d",
            ][..],
        ),
    ] {
        let ptx = target(name).unwrap().ptx;
        for instruction in instructions {
            assert!(ptx.contains(instruction), "{name} PTX lacks `{instruction}`");
        }
    }
    // The RS form: A as four registers in braces.
    let sm90 = target("sm90a").unwrap().ptx;
    assert!(
        sm90.lines().any(|l| l.contains("m64n64k16.f32.f16.f16") && l.contains("}, {%r")),
        "no wgmma RS (A from registers) in the sm90a PTX"
    );
}

#[test]
fn sm90_uses_the_hopper_instructions_it_is_written_with() {
    let ptx = target("sm90a").unwrap().ptx;
    for instruction in [
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned 0",
        "cp.async.cg.shared.global",
        "cp.async.wait_group 2",
        "fence.proxy.async.shared::cta",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "cvt.rn.f16x2.e4m3x2",
        "mul.rn.f16x2",
        "shfl.sync.idx.b32",
    ] {
        assert!(ptx.contains(instruction), "sm90 PTX lacks `{instruction}`");
    }
}

/// sm90v2's GEMV multiplies with `dp4a` on bytes that `prmt` looks up: one body per M =
/// 1..4, its loop one load slot of two weight rows long, 32 `dp4a` per slot and activation
/// row (the positive and the negative codes of two blocks of 16 in each row) and 32
/// `prmt` per slot; its weights come through `cp.async` (the ring and the scales' stage),
/// no tensor core, no mbarrier.
#[test]
fn the_gemv_uses_byte_dot_products() {
    let ptx = target("sm90a").unwrap().ptx;
    let body = &ptx[ptx.find(".entry nvfp4_gemv_sm90(").expect("the GEMV entry")..];
    let body = &body[..body[1..].find(".entry").map_or(body.len(), |e| e + 1)];
    let count = |op: &str| body.matches(op).count();
    assert_eq!(count("dp4a.s32.s32"), 32 * (1 + 2 + 3 + 4));
    assert!(count("prmt.b32") >= 4 * 32, "two lookups per 4 codes");
    assert!(count("cp.async.cg.shared.global") >= 2, "the ring's copies and the stage's");
    assert_eq!(count("wgmma") + count("mbarrier"), 0);
}

#[test]
fn sm90v2_uses_the_hopper_instructions_it_is_written_with() {
    let ptx = target("sm90a").unwrap().ptx;
    // An entry's body: from its `.entry` to the next one (or the end).
    let entry = |name: &str| -> &str {
        let body = &ptx[ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("{name} entry"))..];
        &body[..body[1..].find(".entry").map_or(body.len(), |e| e + 1)]
    };
    use kernel::sm90v2::{Decode, Medium, Narrow, Prefill, Rows, Thin, ThinMedium, Wide};
    // (entry, wgmma N, tile key)
    for (name, n, tile) in [
        ("nvfp4_gemm_sm90v2", 128, Prefill::TILE),
        ("nvfp4_gemm_sm90v2_medium", 64, Medium::TILE),
        // Narrow tiles: one m64n64 wgmma for both 32-row halves of the image.
        ("nvfp4_gemm_sm90v2_narrow", 64, Narrow::TILE),
        // Thin tiles: one m64n128 wgmma for both 64-row halves, the two warpgroups on
        // alternate stages.
        ("nvfp4_gemm_sm90v2_thin", 128, Thin::TILE),
        ("nvfp4_gemm_sm90v2_thin_medium", 64, ThinMedium::TILE),
        ("nvfp4_gemm_sm90v2_decode", 16, Decode::TILE),
        // Wide tiles: one m64n256 wgmma for both 128-row halves of the image.
        ("nvfp4_gemm_sm90v2_wide", 256, Wide::TILE),
    ] {
        // fp16 operands, and bf16 for bf16 activations (W4A16): both in one entry, or
        // where the tile kind has an entry per type, each in its own (`_bf16`); prefill
        // and thin tiles have both in one and bf16 alone in a second.
        let wgmma = |ty: &str| format!("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty}");
        let bf16_alone = (format!("{name}_bf16"), vec!["bf16"], "f16");
        let bf16_entry = kernel::sm90v2::entries_of(tile, nvfp4::operand::AFormat::Bf16)[1];
        let entries = if kernel::sm90v2::entry_per_type(tile) {
            vec![(name.to_string(), vec!["f16"], "bf16"), bf16_alone]
        } else if bf16_entry != name {
            assert_eq!(bf16_entry, bf16_alone.0);
            vec![(name.to_string(), vec!["f16", "bf16"], ""), bf16_alone]
        } else {
            vec![(name.to_string(), vec!["f16", "bf16"], "")]
        };
        for (name, types, absent) in entries {
            let body = entry(&name);
            for ty in types {
                assert!(body.contains(&wgmma(ty)), "{name} lacks `{}`", wgmma(ty));
                // The weights times their scales.
                assert!(body.contains(&format!("mul.rn.{ty}x2")), "{name}: the weights' {ty} scaling");
            }
            assert!(absent.is_empty() || !body.contains(&wgmma(absent)), "{name} has `{}`", wgmma(absent));
            gemm_instructions(&name, tile, body);
        }
        assert!(entry(bf16_entry).contains("cvt.rn.bf16x2.f32"), "{bf16_entry}: the bf16 scales");
    }
    // The reduce loads the partials with weak loads (several in flight; the GEMM's writes are
    // visible after `griddepcontrol.wait`): prefill, medium and wide tiles four splits of
    // each of a thread's (up to) two quads at a time, decode tiles all 16 at once.
    for (prepare, reduce, loads) in [
        ("nvfp4_sm90v2_prepare", "nvfp4_sm90v2_reduce", 8),
        ("nvfp4_sm90v2_medium_prepare", "nvfp4_sm90v2_medium_reduce", 8),
        ("nvfp4_sm90v2_narrow_prepare", "nvfp4_sm90v2_narrow_reduce", 8),
        ("nvfp4_sm90v2_thin_prepare", "nvfp4_sm90v2_thin_reduce", 8),
        ("nvfp4_sm90v2_thin_medium_prepare", "nvfp4_sm90v2_thin_medium_reduce", 8),
        ("nvfp4_sm90v2_wide_prepare", "nvfp4_sm90v2_wide_reduce", 8),
        ("nvfp4_sm90v2_decode_prepare", "nvfp4_sm90v2_decode_reduce", 16),
    ] {
        let staged = prepare == "nvfp4_sm90v2_wide_prepare";
        let (prepare, reduce) = (entry(prepare), entry(reduce));
        assert!(prepare.contains("cvt.rn.f16x2.e4m3x2"));
        // On wide tiles the prologue converts into a shared-memory copy of the image, then
        // writes it out in whole 16-byte chunks; elsewhere straight into global memory.
        for instruction in ["st.shared.b32", "ld.shared.v4.b32", "st.global.v4.b32"] {
            assert_eq!(prepare.contains(instruction), staged, "{instruction}");
        }
        assert_eq!(prepare.contains("st.global.b32"), !staged);
        // Programmatic dependent launch: the prologue lets the GEMM be scheduled early,
        // the reduce waits for the GEMM before reading its partials.
        assert!(prepare.contains("griddepcontrol.launch_dependents"));
        assert_eq!(reduce.matches("ld.global.v4.b32").count(), loads, "weak partial loads");
        assert!(!reduce.contains("ld.global.cg") && reduce.contains("griddepcontrol.wait"));
    }
}

/// What every sm90v2 GEMM entry (one per tile kind, of key `tile`) is written with.
fn gemm_instructions(name: &str, tile: u32, body: &str) {
    for instruction in [
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        // IN_FLIGHT = 3 groups left in flight per step, drained once per stage pair.
        "wgmma.wait_group.sync.aligned 3",
        "wgmma.wait_group.sync.aligned 0",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "cvt.rn.f16x2.e4m3x2",
        // Raw weights and scales in 16-byte chunks into the stage's slot by the producer
        // warpgroup, each thread's copies announced on the stage's `full` barrier once a
        // wait proved them landed (the tile's `producer_lag` newer groups in flight: below).
        "cp.async.cg.shared.global",
        "mbarrier.arrive.release.cta.shared::cta.b64",
        // (The producer gives its registers to the consumers: below.)
        // Split-K partials, and whole tiles' C in 16-byte chunks from a shared-memory copy.
        "st.global.v4.b32",
        "st.shared.b16",
        "ld.shared.v4.b32",
    ] {
        assert!(body.contains(instruction), "{name} PTX lacks `{instruction}`");
    }
    for (op, regs) in [("dec", kernel::sm90v2::producer_regs(tile)), ("inc", kernel::sm90v2::consumer_regs(tile))] {
        let setmaxnreg = format!("setmaxnreg.{op}.sync.aligned.u32 {regs};");
        assert!(body.contains(&setmaxnreg), "{name} PTX lacks `{setmaxnreg}`");
    }
    let lag = format!("cp.async.wait_group {};", kernel::sm90v2::producer_lag(tile));
    assert!(body.contains(&lag), "{name} PTX lacks `{lag}`");
    let rs = body.lines().filter(|l| l.contains("wgmma.mma_async") && l.contains("}, {%r")).count();
    assert_eq!(rs, body.matches("wgmma.mma_async").count(), "every wgmma of {name} takes A from registers");
    // No shared-memory staging of fp16 operands: the prologue did the activations, the
    // weights go to registers.
    assert!(!body.contains("fence.proxy.async"), "{name} writes no generic shared memory for wgmma");
    // Programmatic dependent launch: the GEMM waits for the prologue before reading its
    // images, and does not let the reduce be scheduled before it completes (measured
    // slower: the reduce's CTAs then wait beside the GEMM's).
    assert!(body.contains("griddepcontrol.wait") && !body.contains("griddepcontrol.launch_dependents"));
}

#[test]
fn sm100_uses_the_blackwell_instructions_it_is_written_with() {
    let ptx = target("sm100a").unwrap().ptx;
    for instruction in [
        "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
        "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned",
        "tcgen05.cp.cta_group::1.32x128b.warpx4",
        "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X",
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
        "tcgen05.ld.sync.aligned.32x32b.x32.b32",
        "tcgen05.wait::ld.sync.aligned",
        "tcgen05.fence::before_thread_sync",
        "tcgen05.fence::after_thread_sync",
        "tcgen05.dealloc.cta_group::1.sync.aligned.b32",
        "cp.async.cg.shared.global",
        "cp.async.wait_group 4",
        "fence.proxy.async.shared::cta",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "st.global.v4.b32",
        // The split-K fix-up.
        "fence.acq_rel.gpu",
        "atom.acq_rel.gpu.global.add.u32",
        "ld.global.cg.v4.b32",
    ] {
        assert!(ptx.contains(instruction), "sm100 PTX lacks `{instruction}`");
    }
    // One cta_group for every tcgen05 instruction (ptxas rejects a mix).
    assert!(!ptx.contains("cta_group::2"));
}

#[test]
fn no_kernel_uses_local_memory() {
    for t in TARGETS {
        assert!(!t.ptx.contains(".local"), "{} PTX uses local memory (a register array indexed at run time?)", t.name);
        assert!(!t.ptx.contains(".extern .func"), "{} PTX calls a function outside itself", t.name);
    }
}

#[test]
#[cfg_attr(
    not(ptxas_found),
    ignore = "ptxas was not found at build time: pip install nvidia-cuda-nvcc==13.0.88 (CI sets NVFP4_REQUIRE_PTXAS=1)"
)]
fn ptxas_assembles_every_kernel_without_spills() {
    for t in TARGETS {
        let report = t.ptxas_report.unwrap_or_else(|| panic!("no ptxas report for {}", t.name));
        let entries = t.ptx.matches(".visible .entry ").count();
        let compiled = report.matches("Compiling entry function").count();
        assert_eq!(compiled, entries, "{}: ptxas compiled {compiled} of {entries} entries:\n{report}", t.name);
        let properties: Vec<&str> = report.lines().filter(|l| l.contains("bytes stack frame")).collect();
        assert_eq!(properties.len(), entries, "{report}");
        for line in properties {
            assert!(
                line.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"),
                "{}: {line}\n{report}",
                t.name
            );
        }
        // C75xx "Potential Performance Loss" (serialized wgmma, ignored setmaxnreg...).
        assert!(!report.contains("Potential Performance Loss"), "{}:\n{report}", t.name);
    }
}

/// The GEMM entries whose warpgroups trade registers carry the launch bounds the kernel
/// declares (`sm90v2::LAUNCH_BOUNDS`, written in by the build script), and ptxas kept
/// their launch registers within them: one CTA per SM, and two decode CTAs (see
/// `sm90v2::splits`) of 384 threads at up to 85 registers each.
#[test]
#[cfg_attr(
    not(ptxas_found),
    ignore = "ptxas was not found at build time: pip install nvidia-cuda-nvcc==13.0.88 (CI sets NVFP4_REQUIRE_PTXAS=1)"
)]
fn sm90v2_gemm_entries_and_the_gemv_carry_their_launch_bounds() {
    let t = TARGETS.iter().find(|t| t.name == "sm90a").expect("the sm90a target");
    let report = t.ptxas_report.expect("a ptxas report");
    for (entry, threads, ctas, regs) in
        kernel::sm90v2::LAUNCH_BOUNDS.into_iter().chain([kernel::gemv::LAUNCH_BOUNDS, kernel::skinny::LAUNCH_BOUNDS])
    {
        let body =
            t.ptx.split(&format!(".visible .entry {entry}(")).nth(1).unwrap_or_else(|| panic!("no entry {entry}"));
        let head = &body[..body.find('{').expect("a body")];
        for directive in
            [format!(".maxntid {threads}, 1, 1"), format!(".minnctapersm {ctas}"), format!(".maxnreg {regs}")]
        {
            assert!(head.contains(&directive), "{entry}: no `{directive}` in\n{head}");
        }
        let compiled = report.split(&format!("Compiling entry function '{entry}'")).nth(1).expect("compiled");
        let used = compiled.split("Used ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse::<u32>().ok());
        let used = used.unwrap_or_else(|| panic!("no register count for {entry}"));
        assert!(used <= regs, "{entry}: {used} registers at launch, bound {regs}");
        assert!(ctas * threads * used <= 65536, "{entry}: {ctas} CTAs of {threads} threads x {used} registers");
    }
}
