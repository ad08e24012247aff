//! Deterministic random inputs: the benchmark's distribution and a wide one that finds bugs.
//!
//! # Distributions
//!
//! Both distributions draw every byte of `a` and `b` uniformly from `0..=255`, so every
//! e2m1 code occurs in both nibbles, `-0` (code 8) included. They differ in the scales:
//!
//! - [`Distribution::GpuMode`] is exactly what the GPU MODE `nvfp4_gemm` benchmark draws:
//!   the integers 0, 1, 2, 3 converted to e4m3. Four values, all with an empty mantissa
//!   and exponents 0 and 1 only, and a quarter of the blocks scaled by zero.
//! - [`Distribution::Wide`] draws every finite non-negative e4m3 code `0x00..=0x7E`, zero
//!   and the subnormals included, in both SFA and SFB, so scale products span
//!   2^-18 ..= 448^2. The benchmark's draw cannot expose a kernel that drops or misplaces
//!   mantissa bits (its scales have none), mishandles subnormal or large scales, or gets
//!   the exponent bias wrong by a constant that 0..=3 happen to hide; this one does. It
//!   never draws a NaN scale (0x7F), so a NaN in an output is always a bug.
//!
//!   The draw is banded by row. Drawing every scale uniformly over the 127 codes would
//!   be wider still, but useless: the few blocks whose scale product is near 448^2
//!   dominate each sum and C overflows; at K = 16384, 99.5% of C is +-Inf (measured),
//!   and an infinity that meets the reference's infinity hides every other error. So each
//!   row draws a base exponent field `e` uniformly from 0..=12 and each of its scales the
//!   field `e + (0..4)` and the mantissa uniformly (field 15 has mantissas 0..=6 only;
//!   0x7F is NaN). Every code still occurs, but within a row the scales span at most a
//!   factor of 2^5, so every block's term shows in C at fp16 precision, and 70% (K =
//!   16384) to 90% (K = 64) of C is finite; the rest is +-Inf from rows of large scales
//!   meeting each other, which checks that a kernel rounds overflow to Inf rather than
//!   saturating at 65504.
//!
//! # Determinism and parallelism
//!
//! The output is a pure function of `(shape, distribution, seed)`, whatever the number of
//! threads. Each tensor is cut into fixed chunks of [`CHUNK`] bytes (of the plain,
//! row-major byte stream: packed `a`/`b`, or `[L][rows][K/16]` scales before they are
//! blocked); every chunk gets its own generator, seeded from `(seed, tensor, chunk index)`,
//! so chunks are filled in parallel in any order. The distribution does not enter the
//! seeding: for one seed, both distributions produce the same `a` and `b` and differ only
//! in the scales.
//!
//! The generator is SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
//! generators", OOPSLA 2014): a Weyl sequence (add a 64-bit odd constant) passed through a
//! bijective mixing function. It passes BigCrush, costs a few cycles per 8 bytes, and its
//! mixing function doubles as the hash that derives independent chunk seeds. This is test
//! data, not cryptography.

use std::fmt;
use std::str::FromStr;

use nvfp4::epilogue::OutDtype;
use nvfp4::{Shape, e4m3, layout};
use rayon::prelude::*;

use crate::problem::{AFormat, Epilogue, Problem};

/// Bytes per independently seeded chunk. Part of the definition of the generated data:
/// changing it changes every input drawn from a given seed.
pub const CHUNK: usize = 1 << 16;

/// How the scale factors are drawn (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Distribution {
    /// The benchmark's draw: scales are e4m3(0), e4m3(1), e4m3(2) or e4m3(3).
    GpuMode,
    /// Scales uniform over every finite non-negative e4m3 code `0x00..=0x7E`.
    Wide,
}

impl Distribution {
    /// Every distribution, in the order their names are listed.
    pub const ALL: [Distribution; 2] = [Distribution::GpuMode, Distribution::Wide];

    /// The name [`FromStr`] accepts and [`Display`](fmt::Display) prints.
    pub const fn name(self) -> &'static str {
        match self {
            Distribution::GpuMode => "gpumode",
            Distribution::Wide => "wide",
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A distribution name that is none of the known ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownDistribution(pub String);

impl fmt::Display for UnknownDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown input distribution `{}`: expected `gpumode` (the benchmark's scales \
             0..=3) or `wide` (every finite e4m3 scale)",
            self.0
        )
    }
}

impl std::error::Error for UnknownDistribution {}

impl FromStr for Distribution {
    type Err = UnknownDistribution;

    /// `"gpumode"` or `"wide"`, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Distribution::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownDistribution(s.to_owned()))
    }
}

/// Draws a problem of `shape`: `a`, `b` uniform bytes, scales as `dist` says, blocked.
/// Host bytes a run of `shape` holds at once, and what they are: the inputs, the exact
/// reference, the kernel's output and its poison pattern, and under emulation the emulated
/// device's copies of all of them (plus the largest kernel workspace).
pub fn host_bytes_needed(shape: Shape, emulated: bool) -> (u64, String) {
    let inputs = shape.a_bytes() + shape.b_bytes() + shape.sfa_bytes() + shape.sfb_bytes();
    let outputs = 3 * shape.c_bytes();
    let device = if emulated {
        let workspace =
            crate::Kernel::ALL.iter().map(|k| k.workspace_bytes(shape, k.emulated_sms())).max().unwrap_or(0);
        inputs + shape.c_bytes() + workspace
    } else {
        0
    };
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let mut what = format!("{:.1} MiB of inputs, {:.1} MiB of outputs", mib(inputs), mib(outputs));
    if emulated {
        what += &format!(", {:.1} MiB of emulated device memory", mib(device));
    }
    (inputs + outputs + device, what)
}

/// The host memory available to this process now (`MemAvailable` of /proc/meminfo), or
/// `None` where the system does not say.
pub fn available_host_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuses, before anything is allocated, a shape whose run would not fit in host memory
/// (instead of an allocation abort or the out-of-memory killer).
pub fn check_host_memory(shape: Shape, emulated: bool) -> crate::Result<()> {
    let (needed, what) = host_bytes_needed(shape, emulated);
    let Some(available) = available_host_bytes() else { return Ok(()) };
    if needed > available {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        return Err(crate::Error::HostOutOfMemory {
            shape,
            what,
            needed_mib: mib(needed),
            available_mib: mib(available),
        });
    }
    Ok(())
}

/// Draws a problem. It allocates the inputs (see [`host_bytes_needed`]); callers that take
/// shapes from users check them first with [`check_host_memory`].
pub fn generate(shape: Shape, dist: Distribution, seed: u64) -> Problem {
    let sf_cols = shape.sf_cols();
    // Byte counts of a validated shape fit in memory sizes (the host is 64-bit).
    let mut a = vec![0u8; shape.a_bytes() as usize];
    let mut b = vec![0u8; shape.b_bytes() as usize];
    fill_bytes(&mut a, seed, Tensor::A);
    fill_bytes(&mut b, seed, Tensor::B);
    let sfa = blocked_scales(shape.m, sf_cols, shape.l, dist, seed, [Tensor::Sfa, Tensor::SfaBands]);
    let sfb = blocked_scales(shape.n, sf_cols, shape.l, dist, seed, [Tensor::Sfb, Tensor::SfbBands]);
    Problem { shape, a, a_format: AFormat::Nvfp4, b, sfa, sfb, epilogue: Epilogue::IDENTITY }
}

/// Draws a W4A16 problem: B and SFB as [`generate`] draws them, A as 16-bit activations
/// `[L][M][K]` in `format` (fp16 or bf16: the same values), multiples of 1/4 in [-2, 2],
/// so that every product with a weight and every partial sum of the benchmark shapes is
/// exact in fp32 (a kernel that accumulates in fp32 then matches the exact reference bit
/// for bit).
///
/// Panics if `format` is not a 16-bit format.
pub fn generate_w4a16(shape: Shape, dist: Distribution, seed: u64, format: AFormat) -> Problem {
    assert!(format.is_16bit(), "W4A16 activations are fp16 or bf16, not {format:?}");
    const QUARTERS: u64 = 17; // -8/4 ..= 8/4
    let mut p = generate(shape, dist, seed);
    let values = shape.l as usize * shape.m as usize * shape.k as usize;
    let mut a = vec![0u8; values * 2];
    a.par_chunks_mut(2 * CHUNK).enumerate().for_each(|(chunk, bytes)| {
        let mut rng = SplitMix64::for_stream(seed, Tensor::A16, chunk);
        for value in bytes.chunks_exact_mut(2) {
            let v = ((rng.next_u64() % QUARTERS) as f32 - (QUARTERS / 2) as f32) / 4.0;
            let bits = match format {
                AFormat::Bf16 => half::bf16::from_f32(v).to_bits(),
                _ => half::f16::from_f32(v).to_bits(),
            };
            value.copy_from_slice(&bits.to_le_bytes());
        }
    });
    p.a = a;
    p.a_format = format;
    p.sfa = Vec::new();
    p
}

/// Draws a bias vector of `n` values in `out`'s type: multiples of 1/8 in [-8, 8], exact in
/// fp16 and bf16 (so the bias itself adds no rounding of its own).
pub fn bias(n: u32, out: OutDtype, seed: u64) -> Vec<u16> {
    const EIGHTHS: u64 = 129; // -64/8 ..= 64/8
    let mut rng = SplitMix64::for_stream(seed, Tensor::Bias, 0);
    (0..n)
        .map(|_| {
            let value = ((rng.next_u64() % EIGHTHS) as f32 - (EIGHTHS / 2) as f32) / 8.0;
            match out {
                OutDtype::F16 => half::f16::from_f32(value).to_bits(),
                OutDtype::Bf16 => half::bf16::from_f32(value).to_bits(),
            }
        })
        .collect()
}

/// Which tensor a stream of draws belongs to; its discriminant is mixed into the seeds.
#[derive(Clone, Copy)]
enum Tensor {
    A = 0,
    B = 1,
    Sfa = 2,
    Sfb = 3,
    /// The wide distribution's per-row base exponents of SFA (one stream per row).
    SfaBands = 4,
    /// The same for SFB.
    SfbBands = 5,
    /// The epilogue's bias.
    Bias = 6,
    /// W4A16's fp16 activations.
    A16 = 7,
}

/// Exponent fields one row's scales span in the wide distribution (a power of two: the
/// field offset is the top bits of a draw).
const WIDE_BAND: u64 = 4;
const _: () = assert!(WIDE_BAND.is_power_of_two() && WIDE_BAND > 1 && WIDE_BAND <= 16);

/// Fills `out` with uniform bytes, chunk by chunk in parallel.
fn fill_bytes(out: &mut [u8], seed: u64, tensor: Tensor) {
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, bytes)| {
        let mut rng = SplitMix64::for_stream(seed, tensor, chunk);
        for word in bytes.chunks_mut(8) {
            let draw = rng.next_u64().to_le_bytes();
            word.copy_from_slice(&draw[..word.len()]);
        }
    });
}

/// Draws `l` batches of plain `[rows][sf_cols]` scales and returns them blocked.
/// `[tensor, bands]` name the streams of the scales and of their wide-distribution row bands.
fn blocked_scales(
    rows: u32,
    sf_cols: u32,
    l: u32,
    dist: Distribution,
    seed: u64,
    [tensor, bands]: [Tensor; 2],
) -> Vec<u8> {
    let mut plain = vec![0u8; rows as usize * sf_cols as usize * l as usize];
    // The four codes of the benchmark's scales, in the order 0, 1, 2, 3.
    let gpumode = [0.0, 1.0, 2.0, 3.0].map(e4m3::encode);
    // A row's lowest exponent field, uniform in 0..=16 - WIDE_BAND (the row counts over
    // all batches).
    let band_base = |row: usize| {
        let draw = SplitMix64::for_stream(seed, bands, row).next_u64();
        ((draw >> 32) * (17 - WIDE_BAND)) >> 32
    };
    plain.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, codes)| {
        let mut rng = SplitMix64::for_stream(seed, tensor, chunk);
        // The band of the row being drawn, cached: rows are contiguous.
        let mut band = (usize::MAX, 0);
        for (i, code) in codes.iter_mut().enumerate() {
            let draw = rng.next_u64();
            *code = match dist {
                Distribution::GpuMode => gpumode[(draw >> 62) as usize],
                Distribution::Wide => {
                    let row = (chunk * CHUNK + i) / sf_cols as usize;
                    if band.0 != row {
                        band = (row, band_base(row));
                    }
                    let field = band.1 + (draw >> (64 - WIDE_BAND.trailing_zeros()));
                    // Field 15 with mantissa 7 is NaN: field 15 takes mantissas 0..=6.
                    let mantissas = if field == 15 { 7 } else { 8 };
                    let mantissa = ((draw & 0xFFFF_FFFF) * mantissas) >> 32;
                    (field << 3 | mantissa) as u8
                }
            };
        }
    });
    let mut blocked = vec![0u8; (u64::from(l) * layout::batch_bytes(rows, sf_cols)) as usize];
    layout::to_blocked(&plain, rows, sf_cols, l, &mut blocked);
    blocked
}

/// SplitMix64: a 64-bit Weyl sequence whose states are passed through [`mix64`].
#[derive(Clone, Debug)]
struct SplitMix64 {
    state: u64,
}

/// The Weyl increment of SplitMix64: 2^64 / golden ratio, rounded to odd.
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function (Stafford's "Mix13" variant of the MurmurHash3
/// finalizer): a bijection on u64 with full avalanche.
const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// The generator of stream `index` of `tensor` (a chunk, or a row for the bands): its
    /// start state hashes (seed, tensor, index) with chained [`mix64`] calls, so
    /// neighbouring indices and seeds get unrelated streams.
    fn for_stream(seed: u64, tensor: Tensor, index: usize) -> Self {
        let mut state = mix64(seed.wrapping_add(GOLDEN_GAMMA));
        state = mix64(state ^ tensor as u64);
        state = mix64(state ^ index as u64);
        SplitMix64 { state }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(m: u32, n: u32, k: u32, l: u32) -> Shape {
        Shape::new(m, n, k, l).expect("test shape is valid")
    }

    /// The plain `[L][rows][K/16]` scales of a blocked tensor.
    fn plain(blocked: &[u8], rows: u32, sf_cols: u32, l: u32) -> Vec<u8> {
        let mut plain = vec![0u8; (rows * sf_cols * l) as usize];
        layout::from_blocked(blocked, rows, sf_cols, l, &mut plain);
        plain
    }

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // First outputs of the reference implementation seeded with 0
        // (https://prng.di.unimi.it/splitmix64.c).
        let mut rng = SplitMix64 { state: 0 };
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn names_round_trip_and_errors_list_both() {
        for d in Distribution::ALL {
            assert_eq!(d.to_string().parse::<Distribution>(), Ok(d));
        }
        assert_eq!("GpuMode".parse(), Ok(Distribution::GpuMode));
        let err = "uniform".parse::<Distribution>().unwrap_err().to_string();
        assert!(err.contains("`uniform`") && err.contains("`gpumode`") && err.contains("`wide`"));
    }

    #[test]
    fn sizes_match_the_shape() {
        let s = shape(200, 130, 192, 3);
        let p = generate(s, Distribution::Wide, 1);
        assert_eq!(p.shape, s);
        assert_eq!(p.a.len() as u64, s.a_bytes());
        assert_eq!(p.b.len() as u64, s.b_bytes());
        assert_eq!(p.sfa.len() as u64, s.sfa_bytes());
        assert_eq!(p.sfb.len() as u64, s.sfb_bytes());
    }

    #[test]
    fn deterministic_whatever_the_thread_count() {
        let s = shape(256, 384, 1024, 2);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("thread pool")
            .install(|| generate(s, Distribution::Wide, 7));
        let many = rayon::ThreadPoolBuilder::new()
            .num_threads(5)
            .build()
            .expect("thread pool")
            .install(|| generate(s, Distribution::Wide, 7));
        assert_eq!((one.a, one.b, one.sfa, one.sfb), (many.a, many.b, many.sfa, many.sfb));
    }

    #[test]
    fn seeds_and_tensors_give_different_streams() {
        let s = shape(128, 128, 256, 1);
        let p = generate(s, Distribution::GpuMode, 1);
        let q = generate(s, Distribution::GpuMode, 2);
        assert_ne!(p.a, q.a);
        assert_ne!(p.a, p.b, "a and b must not share a stream");
        // The distribution only changes the scales.
        let w = generate(s, Distribution::Wide, 1);
        assert_eq!((&p.a, &p.b), (&w.a, &w.b));
        assert_ne!(p.sfa, w.sfa);
    }

    #[test]
    fn operand_bytes_cover_every_value() {
        let p = generate(shape(128, 128, 1024, 1), Distribution::GpuMode, 3);
        let mut seen = [0u32; 256];
        for &byte in &p.a {
            seen[byte as usize] += 1;
        }
        // 65536 bytes over 256 values: 256 expected each; all present, none wildly off.
        assert!(seen.iter().all(|&c| (150..400).contains(&c)), "{seen:?}");
    }

    #[test]
    fn gpumode_scales_are_0_to_3_and_padding_is_zero() {
        let (m, n, k) = (130, 70, 512);
        let p = generate(shape(m, n, k, 2), Distribution::GpuMode, 11);
        let codes = [0.0, 1.0, 2.0, 3.0].map(e4m3::encode);
        let mut seen = [false; 4];
        for (blocked, rows) in [(&p.sfa, m), (&p.sfb, n)] {
            let plain = plain(blocked, rows, k / 16, 2);
            for &code in &plain {
                let i = codes.iter().position(|&c| c == code).expect("a gpumode scale");
                seen[i] = true;
            }
            // Blocked = the plain scales + zero padding: the non-zero counts must agree.
            let nonzero = |bytes: &[u8]| bytes.iter().filter(|&&c| c != 0).count();
            assert_eq!(nonzero(blocked), nonzero(&plain));
        }
        assert_eq!(seen, [true; 4]);
    }

    #[test]
    fn wide_scales_cover_every_finite_non_negative_code_in_row_bands() {
        let (m, n, k) = (256, 300, 2048);
        let p = generate(shape(m, n, k, 1), Distribution::Wide, 5);
        for (blocked, rows) in [(&p.sfa, m), (&p.sfb, n)] {
            let plain = plain(blocked, rows, k / 16, 1);
            let mut seen = [0u32; 256];
            for &code in &plain {
                seen[code as usize] += 1;
            }
            // About 80 draws of each code of the rarest fields (0 and 15).
            assert!(seen[..0x7F].iter().all(|&c| c > 20), "{seen:?}");
            assert!(seen[0x7F..].iter().all(|&c| c == 0), "NaN or negative scale drawn");
            for row in plain.chunks_exact((k / 16) as usize) {
                let fields = row.iter().map(|&code| code >> 3);
                let (lo, hi) = (fields.clone().min(), fields.max());
                assert!(hi.zip(lo).is_some_and(|(hi, lo)| hi - lo < WIDE_BAND as u8), "{row:?}");
            }
        }
    }
}
