//! sm90v2's one-launch mma.sync kernel (`kernel::skinny`: M <= 16, NVFP4, fp16 or bf16
//! activations, K a multiple of 1024) under emulation, against the exact reference, and
//! the calls that pick it.

mod common;

use common::{SMS, entries, problem};
use host::generate::Distribution;
use host::{Kernel, Problem};
use nvfp4::operand::AFormat;

fn check_problem(p: &Problem, dist: Distribution, sms: u32, what: &str) {
    common::check_problem(p, dist, sms, kernel::skinny::ENTRY, what);
}

fn check(shape: &str, sms: u32) {
    common::check(shape, sms, 5, kernel::skinny::ENTRY);
}

/// M = 5 (one n8 half) and 16 (two); a group of one set and sets past N (64 and 77 rows:
/// one tile row, one set per CTA); two rounds (300 rows on 4 SMs: 24 sets, 6 groups per
/// CTA) over three phases; L = 2; a CTA whose groups straddle two tile rows (520 rows on
/// 8 SMs: 20 sets per CTA).
#[test]
fn the_skinny_kernel_matches_the_reference_under_emulation() {
    for (shape, sms) in
        [("5x64x1024", SMS), ("16x77x1024", SMS), ("16x300x3072", 4), ("9x130x2048x2", 8), ("12x520x1024", 8)]
    {
        check(shape, sms);
    }
}

/// W4A16: fp16 and bf16 activations (the values only put in pair order; bf16 weights and
/// bf16 mmas), on both distributions: one row (one n8 half), 16 rows over two rounds and
/// three phases, L = 2 with rows past N, and the first epilogue variant.
#[test]
fn the_skinny_kernel_takes_16_bit_activations() {
    for format in [AFormat::F16, AFormat::Bf16] {
        for (shape, sms) in [("1x64x1024", SMS), ("16x300x3072", 4), ("9x130x2048x2", 8)] {
            for dist in Distribution::ALL {
                let p = host::generate::generate_w4a16(shape.parse().unwrap(), dist, 7, format);
                check_problem(&p, dist, sms, &format!("{shape} {format:?} {dist} on {sms} SMs"));
            }
        }
        let mut p = host::generate::generate_w4a16("11x70x1024x2".parse().unwrap(), Distribution::GpuMode, 8, format);
        p.epilogue = host::cli::epilogue_variants(p.shape.n, 3).remove(0);
        check_problem(&p, Distribution::GpuMode, 8, &format!("11x70x1024x2 {format:?} with an epilogue"));
    }
}

/// Every epilogue variant (alpha as an argument and in memory, a bias, bf16 out).
#[test]
fn the_skinny_kernel_applies_the_epilogue() {
    for (i, epilogue) in host::cli::epilogue_variants(70, 3).into_iter().enumerate() {
        let p = Problem { epilogue, ..problem("11x70x1024x2", Distribution::GpuMode, 3) };
        check_problem(&p, Distribution::GpuMode, 8, &format!("variant {i}"));
    }
}

/// Calls the GEMV declines with at most 16 activation rows, K a multiple of 1024 and at
/// most two groups of 16 rows per warp run the skinny kernel alone, whatever A's format
/// (in W4A16 from M = 1); 17 rows, K % 1024 != 0 and too many rows per SM run on the
/// decode tiles.
#[test]
fn decode_calls_pick_the_skinny_kernel() {
    for shape in ["16x7168x16384", "16x4096x7168", "5x7168x2048", "8x4096x2048x2", "4x7168x16384", "1x7168x65536"] {
        for format in [AFormat::Nvfp4, AFormat::F16, AFormat::Bf16] {
            assert_eq!(entries(shape, format), [kernel::skinny::ENTRY], "{shape} {format:?}");
        }
    }
    assert_eq!(entries("1x7168x16384", AFormat::Nvfp4), [kernel::gemv::ENTRY], "the GEMV keeps M <= 4");
    for format in [AFormat::F16, AFormat::Bf16] {
        assert_eq!(entries("1x7168x16384", format), [kernel::skinny::ENTRY], "W4A16 from M = 1");
    }
    // 17 rows, K % 1024 = 512, 33 sets per CTA (3 groups per warp).
    for shape in ["17x7168x2048", "16x7168x2560", "16x33792x1024"] {
        for format in [AFormat::Nvfp4, AFormat::F16, AFormat::Bf16] {
            assert_ne!(entries(shape, format), [kernel::skinny::ENTRY], "{shape} {format:?}");
        }
    }
    let launch = |shape: &str| Kernel::Sm90v2.main_step(shape.parse().unwrap(), SMS, AFormat::Nvfp4).launch;
    assert_eq!(launch("16x7168x16384").grid, [SMS, 1, 1]);
    assert_eq!(launch("16x4096x2048x2").grid, [66, 2, 1]);
    assert_eq!(launch("16x77x1024").grid, [32, 1, 1]);
    assert_eq!(launch("16x77x1024").dynamic_smem, kernel::skinny::SMEM_BYTES);
}
