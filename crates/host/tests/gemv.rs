//! sm90v2's CUDA-core GEMV (`kernel::gemv`: M <= 4, NVFP4 activations) under emulation,
//! against the exact reference, and the calls that pick it.

mod common;

use common::{SMS, entries, problem};
use host::generate::Distribution;
use host::{Kernel, Problem};
use nvfp4::operand::AFormat;

fn check_problem(p: &Problem, dist: Distribution, sms: u32, what: &str) {
    common::check_problem(p, dist, sms, kernel::gemv::ENTRY, what);
}

fn check(shape: &str, sms: u32) {
    common::check(shape, sms, 11, kernel::gemv::ENTRY);
}

/// Two blocks (K = 32, N = 1); N tails (rows of the last tile row's sets skipped); K =
/// 1056 (66 scale blocks: a second warp load of one lane) with three activation rows; L =
/// 2 with four rows; two passes of 40 sets per CTA (600 rows: 160 sets on 2 SMs, passes
/// of at most 64 by the partials); six passes of at most 11 sets by the scales' stage (K =
/// 32768: 512 scale tiles of 16 bytes per set); every CTA a few sets (132 SMs).
#[test]
fn the_gemv_matches_the_reference_under_emulation() {
    for (shape, sms) in [
        ("1x1x32", SMS),
        ("1x77x64", SMS),
        ("3x40x1056", 4),
        ("4x24x4096x2", 8),
        ("2x600x512", 2),
        ("1x130x32768", 1),
        ("1x260x1024", SMS),
    ] {
        check(shape, sms);
    }
}

/// Every epilogue variant (alpha as an argument and in memory, a bias, bf16 out).
#[test]
fn the_gemv_applies_the_epilogue() {
    for (i, epilogue) in host::cli::epilogue_variants(70, 3).into_iter().enumerate() {
        let p = Problem { epilogue, ..problem("2x70x1056x2", Distribution::GpuMode, 3) };
        check_problem(&p, Distribution::GpuMode, 8, &format!("variant {i}"));
    }
}

/// NVFP4 calls with at most 4 activation rows, 2^28 products and K a multiple of 32 run the
/// GEMV alone (one launch, no workspace read); 16-bit activations, 5 rows, more products,
/// K % 32 = 16 or activations too large for shared memory do not (the skinny kernel or the
/// decode tiles take them, see tests/skinny.rs).
#[test]
fn decode_calls_with_nvfp4_activations_pick_the_gemv() {
    // W4A16 calls never do: the skinny kernel takes them where K % 1024 = 0 and its rounds
    // allow (2x7168x2048x3: 44 CTAs per batch, three groups per warp), else decode tiles.
    let decode = "nvfp4_gemm_sm90v2_decode";
    for (shape, w4a16) in [
        ("1x7168x16384", kernel::skinny::ENTRY),
        ("2x7168x16384", kernel::skinny::ENTRY),
        ("4x4096x7168", kernel::skinny::ENTRY),
        ("2x7168x2048x3", decode),
        ("1x1x32", decode),
    ] {
        assert_eq!(entries(shape, AFormat::Nvfp4), [kernel::gemv::ENTRY], "{shape}");
        let main = Kernel::Sm90v2.main_step(shape.parse().unwrap(), SMS, AFormat::Bf16).entry;
        assert_eq!(main, w4a16, "{shape}");
    }
    // Too many rows, too many products, too much to hold, K % 32 = 16.
    for shape in ["5x64x1024", "3x7168x16384", "4x7168x16384", "1x7168x65536", "4x1024x65536", "1x77x1040"] {
        assert_ne!(entries(shape, AFormat::Nvfp4), [kernel::gemv::ENTRY], "{shape}");
    }
    assert_eq!(entries("1x77x1040", AFormat::Nvfp4)[1], "nvfp4_gemm_sm90v2_decode");
    // One CTA per SM, shared out over the batches, at most one per set of 4 rows (77 rows:
    // one tile row, 32 sets).
    let launch = |shape: &str| Kernel::Sm90v2.main_step(shape.parse().unwrap(), SMS, AFormat::Nvfp4).launch;
    assert_eq!(launch("1x7168x16384").grid, [SMS, 1, 1]);
    assert_eq!(launch("1x7168x4096x3").grid, [44, 3, 1]);
    assert_eq!(launch("1x77x64").grid, [32, 1, 1]);
    assert!(launch("4x1024x16384").dynamic_smem <= kernel::gemv::SMEM_LIMIT);
}

/// The parts per row balance the warps: on 1x7168x16384 a CTA's 28 pairs of rows of 16
/// warp loads in 4 parts give each of 16 warps 7 units of 4 load slots, where whole pairs
/// would give 12 warps 32 slots and 4 warps 16; on 1x7168x2048 (2 loads per row) whole
/// pairs.
#[test]
fn parts_give_the_busiest_warp_the_fewest_loads() {
    assert_eq!(kernel::gemv::parts(28, 16), 4);
    assert_eq!(kernel::gemv::parts(28, 2), 1);
    assert_eq!(kernel::gemv::parts(1, 16), 8, "one pair: its loads over 8 warps");
    assert_eq!(kernel::gemv::parts(64, 1), 1, "one load per row: nothing to split");
}
