//! The benchmark baseline's dequantizer (`kernel::dequant`): run from its own Rust source
//! under the emulator, it must equal the CPU dequantization bit for bit (every e2m1 · e4m3
//! product is exact in fp16), on both input distributions, with rows that are not a
//! multiple of 128, several batches, and every element written. Its PTX must be the
//! vectorised kernel the benchmark times.

use host::dequant::{CANONICAL_NAN, bit_differences, dequantize, emulated};
use host::embedded::target;
use host::generate::{Distribution, generate};
use host::verify::POISON;

fn check(shape: &str, dist: Distribution) {
    let p = generate(shape.parse().unwrap(), dist, 5);
    let s = p.shape;
    for (name, packed, scales, rows) in [("A", &p.a, &p.sfa, s.m), ("B", &p.b, &p.sfb, s.n)] {
        let want = dequantize(packed, scales, rows, s.k, s.l);
        let got = emulated(packed, scales, rows, s.k, s.l).unwrap_or_else(|e| panic!("{shape} {name}: {e}"));
        assert_eq!(got.len(), want.len());
        assert!(!got.iter().any(|v| v.to_bits() == POISON.to_bits()), "{shape} {dist} {name}: unwritten values");
        let (differing, first) = bit_differences(&got, &want);
        assert_eq!(differing, 0, "{shape} {dist} {name}: first difference at {first:?}");
        // bit_differences lets any two NaNs match; generated scales are never NaN.
        assert!(!want.iter().any(|v| v.is_nan()), "{shape} {dist} {name}");
    }
}

#[test]
fn emulated_dequantization_equals_the_cpu_bit_for_bit() {
    // One full row tile, rows past a tile (130, 200: padded scale rows), several batches,
    // K with more blocks than one CTA covers (K / 16 = 160 > 128 threads), tiny shapes.
    for shape in ["128x136x256", "130x200x64x2", "1x1x64", "64x3x2560"] {
        for dist in Distribution::ALL {
            check(shape, dist);
        }
    }
}

#[test]
fn a_nan_scale_gives_the_canonical_nan_on_both_sides() {
    let p = generate("128x128x64".parse().unwrap(), Distribution::GpuMode, 9);
    let mut sfa = p.sfa.clone();
    sfa[0] = 0x7F; // row 0, scale block 0 of the blocked layout
    let got = emulated(&p.a, &sfa, 128, 64, 1).unwrap();
    let want = dequantize(&p.a, &sfa, 128, 64, 1);
    for i in 0..16 {
        assert_eq!(got[i].to_bits(), CANONICAL_NAN, "value {i}");
        assert_eq!(want[i].to_bits(), CANONICAL_NAN, "value {i}");
    }
    assert!(!got[16].is_nan());
    assert_eq!(bit_differences(&got, &want), (0, None));
}

#[test]
fn the_dequantizer_ptx_is_vectorised_and_portable() {
    let ptx = target("portable").unwrap().ptx;
    let start = ptx.find(".entry nvfp4_dequant_fp16").expect("dequant entry point");
    let end = ptx[start + 1..].find(".entry ").map_or(ptx.len(), |e| start + 1 + e); // the next kernel
    let body = &ptx[start..end];
    for instruction in ["ld.global.nc.u64", "ld.global.nc.u8", "cvt.rn.f16.f32", "st.global.v4.b32"] {
        assert!(body.contains(instruction), "dequant PTX lacks `{instruction}`");
    }
    assert!(!body.contains("cvt.rn.f16x2.f32"), "needs sm_80; the portable PTX targets sm_75");
}
