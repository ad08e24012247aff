//! Blackwell tcgen05 under emulation: the descriptor decoders against the published worked
//! values, hand-checked instruction cases (alloc, cp, mma, ld), and every tcgen05 rule the
//! emulator enforces, provoked on purpose.
//!
//! The expected values are computed here from the PTX ISA's definitions (e2m1 codes, e4m3
//! scales, the SW128 and blocked-scale layouts), independently of the emulator's model.

use emu::model::tcgen05::{ScaleFormat, Swizzle, decode_idesc, decode_smem_desc};
use emu::ops::tcgen05::{self as tc, LD_POISON};
use emu::ops::{barrier, bulk, fence, mbarrier, memory};
use emu::{ErrorKind, GlobalMemory};

mod common;
use common::*;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

#[track_caller]
fn run(gm: &GlobalMemory, threads: u32, smem: u32, kernel: impl Fn() + Sync) {
    if let Err(e) = emu::launch(gm, one_cta(threads, smem), kernel) {
        panic!("unexpected emulator report: {e}");
    }
}

/// sm_100 shared-memory descriptor (PTX ISA Table 40), built by hand for the tests.
fn desc(start: u32, lbo: u32, sbo: u32, swizzle: u64) -> u64 {
    u64::from((start >> 4) & 0x3FFF) | u64::from(lbo >> 4) << 16 | u64::from(sbo >> 4) << 32 | 1 << 46 | swizzle << 61
}

/// Byte offset of logical byte `byte` of row `row` in a 1024-aligned 128B-swizzled tile.
fn sw128_byte(row: u32, byte: u32) -> u32 {
    (row / 8) * 1024 + (row % 8) * 128 + (((byte / 16) ^ (row % 8)) * 16) + byte % 16
}

/// A small deterministic generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

/// e2m1 (PTX ISA: bit 3 sign, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6).
fn e2m1(code: u8) -> f64 {
    let m = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][(code & 7) as usize];
    if code & 8 != 0 { -m } else { m }
}

/// Positive ue4m3 codes used as scales, with their values (1.m · 2^(e-7)).
const SCALES: [(u8, f64); 6] = [(0x38, 1.0), (0x30, 0.5), (0x3C, 1.5), (0x40, 2.0), (0x44, 3.0), (0x2A, 0.3125)];

// Shared-memory layout of the MMA tests: A (128 rows x 128 B, SW128) at 0, B (up to 128
// rows) at 16 KiB, four 512-byte scale chunks (SFA0, SFB0, SFA1, SFB1) at 32 KiB, the TMEM
// address slot and an mbarrier above them.
const A_OFF: u32 = 0;
const B_OFF: u32 = 16 * 1024;
const SF_OFF: u32 = 32 * 1024;
const SLOT: u32 = SF_OFF + 4 * 512;
const BAR: u32 = SLOT + 8;
const SMEM: u32 = BAR + 8;

// Tensor-memory columns: D at 0..N, scale chunks at 128, 132, 136, 140.
const COLS: u32 = 256;
const SFA_COL: [u32; 2] = [128, 136];
const SFB_COL: [u32; 2] = [132, 140];

/// Operands of an MMA test: two K=64 steps (K = 128 in all).
struct Operands {
    n: u32,
    /// Row r: 64 bytes (128 packed e2m1, low nibble = even k).
    a: Vec<u8>,
    b: Vec<u8>,
    /// Per step, the blocked 512-byte scale chunk: row r, block s at `(r%32)*16 + (r/32)*4 + s`.
    sfa: [Vec<u8>; 2],
    sfb: [Vec<u8>; 2],
}

impl Operands {
    fn random(n: u32, seed: u64) -> Operands {
        let mut rng = Rng(seed);
        let mut bytes = |len: usize| -> Vec<u8> { (0..len).map(|_| rng.next() as u8).collect() };
        let a = bytes(128 * 64);
        let b = bytes(n as usize * 64);
        let mut chunk = || -> Vec<u8> { (0..512).map(|_| SCALES[(rng.next() % 6) as usize].0).collect() };
        let sfa = [chunk(), chunk()];
        let sfb = [chunk(), chunk()];
        Operands { n, a, b, sfa, sfb }
    }

    /// The value of scale (row, block s) of step `step` from a blocked chunk.
    fn scale(chunk: &[u8], row: usize, s: usize) -> f64 {
        let code = chunk[(row % 32) * 16 + (row / 32) * 4 + s];
        SCALES.iter().find(|(c, _)| *c == code).expect("a test scale").1
    }

    /// D after `steps` MMAs (the first without accumulation), each summed exactly in f64
    /// and rounded once to f32.
    fn reference(&self, steps: usize) -> Vec<f32> {
        let n = self.n as usize;
        let value = |rows: &[u8], r: usize, k: usize| {
            let byte = rows[r * 64 + k / 2];
            e2m1(if k.is_multiple_of(2) { byte & 0xF } else { byte >> 4 })
        };
        let mut d = vec![0f32; 128 * n];
        for step in 0..steps {
            for m in 0..128 {
                for j in 0..n {
                    let mut sum = 0f64;
                    for kk in 0..64 {
                        let k = 64 * step + kk;
                        let sa = Operands::scale(&self.sfa[step], m, kk / 16);
                        let sb = Operands::scale(&self.sfb[step], j, kk / 16);
                        sum += value(&self.a, m, k) * sa * value(&self.b, j, k) * sb;
                    }
                    let old = if step == 0 { 0.0 } else { f64::from(d[m * n + j]) };
                    d[m * n + j] = (old + sum) as f32;
                }
            }
        }
        d
    }

    /// Writes A and B (SW128, 1024-aligned tiles) and the scale chunks with st.shared,
    /// spread over the CTA's threads, each fencing its writes for the async proxy if `fence`.
    fn store(&self, threads: u32, fence: bool) {
        let t = tid();
        let base = smem();
        for w in (t..128 * 16).step_by(threads as usize) {
            let (r, b) = (w / 16, 4 * (w % 16));
            let word = u32::from_le_bytes(self.a[(r * 64 + b) as usize..][..4].try_into().unwrap());
            memory::st_shared::<u32>(base + A_OFF + sw128_byte(r, b), word);
        }
        for w in (t..self.n * 16).step_by(threads as usize) {
            let (r, b) = (w / 16, 4 * (w % 16));
            let word = u32::from_le_bytes(self.b[(r * 64 + b) as usize..][..4].try_into().unwrap());
            memory::st_shared::<u32>(base + B_OFF + sw128_byte(r, b), word);
        }
        let chunks = [&self.sfa[0], &self.sfb[0], &self.sfa[1], &self.sfb[1]];
        for w in (t..4 * 128).step_by(threads as usize) {
            let (c, i) = ((w / 128) as usize, (4 * (w % 128)) as usize);
            let word = u32::from_le_bytes(chunks[c][i..i + 4].try_into().unwrap());
            memory::st_shared::<u32>(base + SF_OFF + 512 * c as u32 + i as u32, word);
        }
        if fence {
            fence::proxy_async_shared_cta();
        }
    }
}

/// Instruction descriptor: E2M1 x E2M1, UE4M3, K-major, dense, M = 128, N = `n`.
fn idesc(n: u32) -> u32 {
    (1 << 7) | (1 << 10) | ((n >> 3) << 17) | (1 << 27)
}

/// A/B descriptors of step `step` (start advanced by 32 bytes per K=64), and the scale
/// chunk descriptors. LBO differs on purpose (16 for A, 0 for B): it is ignored.
fn a_desc(step: u32) -> u64 {
    desc(smem() + A_OFF + 32 * step, 16, 1024, 2)
}
fn b_desc(step: u32) -> u64 {
    desc(smem() + B_OFF + 32 * step, 0, 1024, 2)
}
fn sf_desc(chunk: u32) -> u64 {
    desc(smem() + SF_OFF + 512 * chunk, 0, 128, 0)
}

/// Warp 0 allocates `COLS` columns; thread 0 initialises the mbarrier; everyone syncs,
/// fences and returns the TMEM base.
fn setup() -> u32 {
    if tid() < 32 {
        tc::alloc(smem() + SLOT, COLS);
    }
    if tid() == 0 {
        mbarrier::init(smem() + BAR, 1);
        fence::mbarrier_init();
    }
    barrier::sync_all(0);
    tc::fence_after_thread_sync();
    memory::ld_shared::<u32>(smem() + SLOT)
}

/// Thread 0 issues the scale copies and `steps` MMAs into D at `base`, then commits.
fn issue(base: u32, n: u32, steps: u32) {
    if tid() != 0 {
        return;
    }
    for s in 0..steps {
        tc::cp_32x128b_warpx4(base + SFA_COL[s as usize], sf_desc(2 * s));
        tc::cp_32x128b_warpx4(base + SFB_COL[s as usize], sf_desc(2 * s + 1));
    }
    for s in 0..steps {
        let (sfa, sfb) = (base + SFA_COL[s as usize], base + SFB_COL[s as usize]);
        tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(s), b_desc(s), idesc(n), sfa, sfb, s > 0);
    }
    tc::commit(smem() + BAR);
}

/// Each of the 4 warps reads its 32 rows of `cols` columns from `col` (x32 loads) and
/// stores them to `out` (row-major, `cols` per row).
fn read_rows(base: u32, col: u32, cols: u32, out: u64) {
    let (warp, lane) = (tid() / 32, tid() % 32);
    let row = 32 * (warp % 4) + lane;
    for c in (0..cols).step_by(32) {
        let mut regs = [0u32; 32];
        unsafe { tc::ld_32x32b(base + ((32 * (warp % 4)) << 16) + col + c, regs.as_mut_ptr(), 32) };
        tc::wait_ld();
        for (i, v) in regs.iter().enumerate() {
            memory::st_global::<u32>(out + 4 * u64::from(row * cols + c + i as u32), *v);
        }
    }
}

/// The end of every kernel: order the loads before the barrier, then warp 0 frees TMEM.
fn teardown(base: u32) {
    tc::fence_before_thread_sync();
    barrier::sync_all(0);
    if tid() < 32 {
        tc::fence_after_thread_sync();
        tc::dealloc(base, COLS);
    }
}

fn read_u32s(gm: &GlobalMemory, addr: u64, n: usize) -> Vec<u32> {
    let mut out = vec![0u8; 4 * n];
    gm.read(addr, &mut out).expect("readable");
    out.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

// ---------------------------------------------------------------------------------------
// 1. Descriptor decoding (the published worked values and the classic mistakes)
// ---------------------------------------------------------------------------------------

#[test]
fn instruction_descriptors_decode_the_published_values() {
    for (value, n, scale) in [
        (0x0820_0480, 128, ScaleFormat::Ue4m3),
        (0x0840_0480, 256, ScaleFormat::Ue4m3),
        (0x0810_0480, 64, ScaleFormat::Ue4m3),
        (0x0802_0480, 8, ScaleFormat::Ue4m3),
        (0x08A0_0480, 128, ScaleFormat::Ue8m0),
    ] {
        let d = decode_idesc(value).unwrap_or_else(|e| panic!("{value:#x}: {e}"));
        assert_eq!((d.m, d.n, d.scale, d.negate_a, d.negate_b), (128, n, scale, false, false), "{value:#x}");
        assert_eq!(idesc(n), value & !(1 << 23));
    }
    let d = decode_idesc(0x0820_0480 | 1 << 13).unwrap();
    assert!(d.negate_a && !d.negate_b);
}

#[test]
fn instruction_descriptors_reject_bad_fields() {
    for (value, needle) in [
        (0x0820_0490, "matrix B scale-factor id (bits 4-5)"), // kind::f16's dtype F32
        (0x0820_0280 | 5 << 7, "the A type (bits 7-9)"),      // f8f6f4's E2M1 = 5
        (0x0820_0480 | 1 << 15, "transpose-A"),
        (0x0820_0480 | 1 << 16, "transpose-B"),
        (0x0420_0480, "reserved field (below M >> 7) (bits 24-26)"), // M = 64 written as M>>4 at bit 24
        (0x0020_0480, "M >> 7 (bits 27-28)"),                        // M = 0
        (0x1020_0480, "M >> 7 (bits 27-28)"),                        // M = 256
        (0x8820_0480, "K size (bits 31-31)"),                        // K = 96
        (0x0800_0480, "N >> 3 (bits 17-22)"),                        // N = 0
        (0x0842_0480, "N >> 3 (bits 17-22)"),                        // N = 264
        (0x0820_0484, "sparsity flag"),
        (0x2820_0480, "matrix A scale-factor id (bits 29-30)"),
        (0x0820_1480, "reserved field (above the B type)"),
    ] {
        let e = decode_idesc(value).expect_err(&format!("{value:#x} must be rejected"));
        assert!(e.contains(needle), "{value:#x}: {e:?} lacks {needle:?}");
    }
}

#[test]
fn smem_descriptors_decode_and_reject() {
    // The worked values of the design notes.
    let d = decode_smem_desc(0x4000_4040_0000_0040).unwrap();
    assert_eq!((d.start, d.lbo, d.sbo, d.base_offset, d.swizzle), (0x400, 0, 1024, 0, Swizzle::Sw128));
    let d = decode_smem_desc(0x4000_4040_0001_0000).unwrap();
    assert_eq!((d.start, d.lbo, d.sbo), (0, 16, 1024));
    let d = decode_smem_desc(0x0000_4008_0000_0040).unwrap();
    assert_eq!((d.start, d.sbo, d.swizzle), (0x400, 128, Swizzle::None));
    for (code, sw) in [(1, Swizzle::Sw128Base32B), (4, Swizzle::Sw64), (6, Swizzle::Sw32)] {
        assert_eq!(decode_smem_desc(desc(0x400, 0, 1024, code)).unwrap().swizzle, sw);
    }
    let base5 = desc(0x400, 0, 1024, 2) | 5 << 49;
    assert_eq!(decode_smem_desc(base5).unwrap().base_offset, 5);
    for (value, needle) in [
        (desc(0x400, 0, 1024, 2) & !(1 << 46), "descriptor version (bits 46-48)"), // Hopper: no bit 46
        (0x4000_0040_0000_0040, "descriptor version"),                             // sm_90 SW128 layout
        (desc(0x400, 0, 1024, 3), "swizzle mode (bits 61-63)"),
        (desc(0x400, 0, 1024, 5), "swizzle mode"),
        (desc(0x400, 0, 1024, 7), "swizzle mode"),
        (desc(0x400, 0, 1024, 2) | 1 << 52, "LBO mode (bits 52-52)"),
        (desc(0x400, 0, 1024, 2) | 1 << 55, "fixed-zero field (bits 53-60)"),
        (desc(0x3_FFF0, 0, 1024, 2) + 2, "start address"), // advanced past 14 bits
    ] {
        let e = decode_smem_desc(value).expect_err(&format!("{value:#x} must be rejected"));
        assert!(e.contains(needle), "{value:#x}: {e:?} lacks {needle:?}");
    }
    // Decoded but not usable for an mxf4nvf4 operand.
    let sw1 = decode_smem_desc(desc(0x400, 0, 1024, 1)).unwrap();
    assert!(format!("{}", sw1.mma_operand_chunk(0, 0).unwrap_err()).contains("not valid for K-major"));
    let b = decode_smem_desc(base5).unwrap();
    assert!(format!("{}", b.mma_operand_chunk(0, 0).unwrap_err()).contains("base offset 5 is not modelled"));
}

// ---------------------------------------------------------------------------------------
// 2. Instructions, hand-checked
// ---------------------------------------------------------------------------------------

/// Two MMAs of 128x128x64 (the second accumulating, its descriptors advanced by 32 bytes)
/// with random e2m1 data and distinct scales per row and block: a wrong scale block,
/// nibble order, swizzle, row or replica would change the result. Read back by 4 warps.
#[test]
fn mma_128x128x128_in_two_steps_matches_the_definition() {
    let ops = Operands::random(128, 7);
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 128 * 128 * 4);
    run(&gm, 128, SMEM, || {
        ops.store(128, true);
        let base = setup();
        issue(base, 128, 2);
        mbarrier::try_wait_parity(smem() + BAR, 0);
        tc::fence_after_thread_sync();
        read_rows(base, 0, 128, out);
        teardown(base);
    });
    let got = read_u32s(&gm, out, 128 * 128);
    let want = ops.reference(2);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(*g, w.to_bits(), "D[{}][{}]: {} vs {}", i / 128, i % 128, f32::from_bits(*g), w);
    }
    assert!(want.iter().filter(|v| **v != 0.0).count() > 10000, "the test data is degenerate");
}

/// N = 256: B spans 32 swizzle atoms, and its scales two blocked chunks (rows 0-127 and
/// 128-255) copied to SFB columns +0..4 and +4..8 (row n at lane n % 32, column n / 32).
/// UE8M0 scales (idesc bit 23). Read back with two ld.x128 per warp.
#[test]
fn mma_n256_with_ue8m0_scales() {
    const B256: u32 = 16 * 1024;
    const SF: u32 = B256 + 32 * 1024;
    const SLOT3: u32 = SF + 3 * 512;
    const BAR3: u32 = SLOT3 + 8;
    let mut rng = Rng(21);
    let a: Vec<u8> = (0..128 * 32).map(|_| rng.next() as u8).collect();
    let b: Vec<u8> = (0..256 * 32).map(|_| rng.next() as u8).collect();
    // ue8m0 codes 124..=130 (2^-3 .. 2^3), one chunk for A, two for B.
    let sf: Vec<u8> = (0..3 * 512).map(|_| 124 + (rng.next() % 7) as u8).collect();
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 128 * 256 * 4);
    run(&gm, 128, BAR3 + 8, || {
        let t = tid();
        for w in (t..128 * 8).step_by(128) {
            let (r, c) = (w / 8, 4 * (w % 8));
            let word = u32::from_le_bytes(a[(r * 32 + c) as usize..][..4].try_into().unwrap());
            memory::st_shared::<u32>(smem() + sw128_byte(r, c), word);
        }
        for w in (t..256 * 8).step_by(128) {
            let (r, c) = (w / 8, 4 * (w % 8));
            let word = u32::from_le_bytes(b[(r * 32 + c) as usize..][..4].try_into().unwrap());
            memory::st_shared::<u32>(smem() + B256 + sw128_byte(r, c), word);
        }
        for w in (t..3 * 128).step_by(128) {
            let word = u32::from_le_bytes(sf[4 * w as usize..][..4].try_into().unwrap());
            memory::st_shared::<u32>(smem() + SF + 4 * w, word);
        }
        fence::proxy_async_shared_cta();
        if t < 32 {
            tc::alloc(smem() + SLOT3, 512);
        }
        if t == 0 {
            mbarrier::init(smem() + BAR3, 1);
            fence::mbarrier_init();
        }
        barrier::sync_all(0);
        tc::fence_after_thread_sync();
        let base = memory::ld_shared::<u32>(smem() + SLOT3);
        if t == 0 {
            tc::cp_32x128b_warpx4(base + 256, desc(smem() + SF, 0, 128, 0));
            tc::cp_32x128b_warpx4(base + 260, desc(smem() + SF + 512, 0, 128, 0));
            tc::cp_32x128b_warpx4(base + 264, desc(smem() + SF + 1024, 0, 128, 0));
            let (a_d, b_d) = (desc(smem(), 0, 1024, 2), desc(smem() + B256, 0, 1024, 2));
            tc::mma_mxf4nvf4_block_scale_4x(base, a_d, b_d, idesc(256) | 1 << 23, base + 256, base + 260, false);
            tc::commit(smem() + BAR3);
        }
        mbarrier::try_wait_parity(smem() + BAR3, 0);
        tc::fence_after_thread_sync();
        let (warp, lane) = (t / 32, t % 32);
        for half in 0..2u32 {
            let mut regs = [0u32; 128];
            unsafe { tc::ld_32x32b(base + ((32 * warp) << 16) + 128 * half, regs.as_mut_ptr(), 128) };
            tc::wait_ld();
            for (i, v) in regs.iter().enumerate() {
                memory::st_global::<u32>(out + 4 * u64::from((32 * warp + lane) * 256 + 128 * half + i as u32), *v);
            }
        }
        tc::fence_before_thread_sync();
        barrier::sync_all(0);
        if t < 32 {
            tc::fence_after_thread_sync();
            tc::dealloc(base, 512);
        }
    });
    // Blocked chunk c covers rows 128c..128c+128: row r's scale s at (r%32)*16 + ((r%128)/32)*4 + s.
    let scale = |chunks: &[u8], r: usize, s: usize| {
        2f64.powi(i32::from(chunks[(r / 128) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + s]) - 127)
    };
    let value = |rows: &[u8], r: usize, k: usize| {
        let byte = rows[r * 32 + k / 2];
        e2m1(if k.is_multiple_of(2) { byte & 0xF } else { byte >> 4 })
    };
    let got = read_u32s(&gm, out, 128 * 256);
    for m in 0..128 {
        for n in 0..256 {
            let mut sum = 0f64;
            for k in 0..64 {
                sum += value(&a, m, k) * scale(&sf[..512], m, k / 16) * value(&b, n, k) * scale(&sf[512..], n, k / 16);
            }
            assert_eq!(got[m * 256 + n], (sum as f32).to_bits(), "D[{m}][{n}]");
        }
    }
}

/// N = 64 (two SFB columns), one step, negate A (idesc bit 13).
#[test]
fn mma_n64_negated_a() {
    let ops = Operands::random(64, 15);
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 128 * 64 * 4);
    run(&gm, 128, SMEM, || {
        ops.store(128, true);
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + SFA_COL[0], sf_desc(0));
            tc::cp_32x128b_warpx4(base + SFB_COL[0], sf_desc(1));
            let id = idesc(64) | 1 << 13;
            tc::mma_mxf4nvf4_block_scale_4x(
                base,
                a_desc(0),
                b_desc(0),
                id,
                base + SFA_COL[0],
                base + SFB_COL[0],
                false,
            );
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        tc::fence_after_thread_sync();
        read_rows(base, 0, 64, out);
        teardown(base);
    });
    // Compared as values: the sign of a zero result under negation is not documented.
    let got: Vec<f32> = read_u32s(&gm, out, 128 * 64).into_iter().map(f32::from_bits).collect();
    let want: Vec<f32> = ops.reference(1).iter().map(|v| -v).collect();
    assert_eq!(got, want);
}

/// N = 8 (one SFB column) with one step, and a single ld.x8 per warp.
#[test]
fn mma_n8_single_step() {
    let ops = Operands::random(8, 11);
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 128 * 8 * 4);
    run(&gm, 128, SMEM, || {
        ops.store(128, true);
        let base = setup();
        issue(base, 8, 1);
        mbarrier::try_wait_parity(smem() + BAR, 0);
        tc::fence_after_thread_sync();
        let (warp, lane) = (tid() / 32, tid() % 32);
        let mut regs = [0u32; 8];
        unsafe { tc::ld_32x32b(base + ((32 * warp) << 16), regs.as_mut_ptr(), 8) };
        tc::wait_ld();
        for (i, v) in regs.iter().enumerate() {
            memory::st_global::<u32>(out + 4 * u64::from((32 * warp + lane) * 8 + i as u32), *v);
        }
        teardown(base);
    });
    let got = read_u32s(&gm, out, 128 * 8);
    let want: Vec<u32> = ops.reference(1).iter().map(|v| v.to_bits()).collect();
    assert_eq!(got, want);
}

/// tcgen05.cp .32x128b.warpx4 of one 512-byte chunk laid out with SBO = 256 (so the
/// 8-row groups are not contiguous): row r's bytes 4j..4j+3 land in column 8 + j of lanes
/// r, 32+r, 64+r, 96+r.
#[test]
fn cp_32x128b_warpx4_lands_in_every_lane_quarter() {
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 128 * 4 * 4);
    let row_word = |r: u32, j: u32| 0x1000_0000 * (j + 1) + r * 0x101;
    run(&gm, 128, SMEM, || {
        let t = tid();
        if t < 32 {
            for j in 0..4 {
                let addr = smem() + SF_OFF - 2048 + (t / 8) * 256 + (t % 8) * 16 + 4 * j;
                memory::st_shared::<u32>(addr, row_word(t, j));
            }
            fence::proxy_async_shared_cta();
        }
        let base = setup();
        if t == 0 {
            tc::cp_32x128b_warpx4(base + 8, desc(smem() + SF_OFF - 2048, 16, 256, 0));
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        tc::fence_after_thread_sync();
        let warp = t / 32;
        let mut regs = [0u32; 4];
        unsafe { tc::ld_32x32b(base + ((32 * warp) << 16) + 8, regs.as_mut_ptr(), 4) };
        tc::wait_ld();
        for (j, v) in regs.iter().enumerate() {
            memory::st_global::<u32>(out + 4 * u64::from(t * 4 + j as u32), *v);
        }
        teardown(base);
    });
    let got = read_u32s(&gm, out, 128 * 4);
    for lane in 0..128u32 {
        for j in 0..4 {
            assert_eq!(got[(lane * 4 + j) as usize], row_word(lane % 32, j), "lane {lane} column {}", 8 + j);
        }
    }
}

/// Until wait::ld the destination registers hold the poison; after it, the values.
#[test]
fn ld_registers_are_poison_until_wait_ld() {
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 2 * 4);
    run(&gm, 32, SMEM, || {
        let t = tid();
        if t == 0 {
            for j in 0..4 {
                memory::st_shared::<u32>(smem() + SF_OFF + 4 * j, 0xC0DE_0000 + j);
            }
            fence::proxy_async_shared_cta();
        }
        let base = setup();
        if t == 0 {
            tc::cp_32x128b_warpx4(base, sf_desc(0));
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        tc::fence_after_thread_sync();
        let mut regs = [0u32; 2];
        unsafe { tc::ld_32x32b(base + 2, regs.as_mut_ptr(), 2) };
        let early = std::hint::black_box(regs[0]);
        tc::wait_ld();
        if t == 0 {
            memory::st_global::<u32>(out, early);
            memory::st_global::<u32>(out + 4, regs[1]);
        }
        teardown(base);
    });
    assert_eq!(read_u32s(&gm, out, 2), [LD_POISON, 0xC0DE_0003]);
    assert!(f32::from_bits(LD_POISON).is_nan());
}

/// A destination register written between tcgen05.ld and tcgen05.wait::ld.
#[test]
fn ld_register_written_before_wait_ld() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        let base = setup();
        let mut regs = [0u32; 4];
        unsafe { tc::ld_32x32b(base, regs.as_mut_ptr(), 4) };
        if tid() == 3 {
            regs[2] = 1;
        }
        std::hint::black_box(&mut regs);
        line.next();
        tc::wait_ld();
        teardown(base);
    });
    expect(&e, ErrorKind::Tcgen05, &["thread 3 wrote destination register 2 of a tcgen05.ld"]);
    line.assert_blamed(&e);
}

/// enable_input_d = true on an accumulator nothing ever wrote: fresh tensor memory is
/// garbage (poison), so the result is NaN.
#[test]
fn accumulate_on_a_fresh_accumulator_is_poison() {
    let ops = Operands::random(8, 3);
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 4);
    run(&gm, 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + SFA_COL[0], sf_desc(0));
            tc::cp_32x128b_warpx4(base + SFB_COL[0], sf_desc(1));
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(8), base + 128, base + 132, true);
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        tc::fence_after_thread_sync();
        let mut regs = [0u32; 1];
        unsafe { tc::ld_32x32b(base + 3, regs.as_mut_ptr(), 1) };
        tc::wait_ld();
        if tid() == 5 {
            memory::st_global::<u32>(out, regs[0]);
        }
        teardown(base);
    });
    assert!(f32::from_bits(read_u32s(&gm, out, 1)[0]).is_nan());
}

/// alloc is first fit and aligned to its size: 32, then 64 (at 64), then 32 (back at 32).
#[test]
fn alloc_is_first_fit_aligned() {
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 3 * 4);
    run(&gm, 32, 64, || {
        let slot = smem();
        tc::alloc(slot, 32);
        let a = memory::ld_shared::<u32>(slot);
        tc::alloc(slot + 4, 64);
        let b = memory::ld_shared::<u32>(slot + 4);
        tc::alloc(slot + 8, 32);
        let c = memory::ld_shared::<u32>(slot + 8);
        if tid() == 0 {
            for (i, v) in [a, b, c].iter().enumerate() {
                memory::st_global::<u32>(out + 4 * i as u64, *v);
            }
        }
        tc::relinquish_alloc_permit();
        tc::dealloc(a, 32);
        tc::dealloc(b, 64);
        tc::dealloc(c, 32);
    });
    assert_eq!(read_u32s(&gm, out, 3), [0, 64, 32]);
}

/// The warp-specialised pipeline a real kernel uses, end to end: a producer thread fills
/// two shared-memory stages with bulk copies (A and B pre-tiled in SW128 order in global
/// memory, the blocked scale chunks as they are), the MMA thread waits for each stage,
/// copies its 4+4 scale chunks and issues 4 MMAs (K = 256 per stage, 1024 in all), and
/// commits the stage back; four epilogue warps (warps 2..5, so lane quarters 2, 3, 0, 1)
/// wait for the accumulator and read it. Stage refills depend on the lazy completion of
/// the MMAs that read the stage.
#[test]
fn pipeline_with_bulk_copies_two_stages_four_k_blocks() {
    const N: u32 = 8;
    const KB: u32 = 4; // k-blocks of 256
    const STAGE: u32 = 16384 + 1024 + 2048 + 2048;
    const BARS: u32 = 2 * STAGE; // full[0..2], empty[0..2], acc_full
    const SLOT2: u32 = BARS + 40;
    let mut rng = Rng(99);
    let mut bytes = |len: usize| -> Vec<u8> { (0..len).map(|_| rng.next() as u8).collect() };
    // Logical operands: rows of 512 bytes (K = 1024).
    let a = bytes(128 * 512);
    let b = bytes(N as usize * 512);
    let scale_chunks: Vec<Vec<u8>> =
        (0..2 * 4 * KB).map(|i| (0..512).map(|j| SCALES[((i * 7 + j * 13) % 6) as usize].0).collect()).collect();
    let (sfa, sfb) = scale_chunks.split_at(4 * KB as usize);
    // Global memory: per k-block, the SW128 tiles and the 4 scale chunks of each operand.
    let tile = |rows: &[u8], nrows: u32, kb: u32| -> Vec<u8> {
        let mut t = vec![0u8; (nrows.div_ceil(8) * 1024) as usize];
        for r in 0..nrows {
            for c in 0..128 {
                t[sw128_byte(r, c) as usize] = rows[(r * 512 + kb * 128 + c) as usize];
            }
        }
        t
    };
    let gm = GlobalMemory::new();
    let a_g = gm.alloc_from("A", &(0..KB).flat_map(|kb| tile(&a, 128, kb)).collect::<Vec<u8>>());
    let b_g = gm.alloc_from("B", &(0..KB).flat_map(|kb| tile(&b, N, kb)).collect::<Vec<u8>>());
    let sfa_g = gm.alloc_from("SFA", &sfa.concat());
    let sfb_g = gm.alloc_from("SFB", &sfb.concat());
    let out = gm.alloc("out", (128 * N * 4) as usize);
    let sf_col = |s: u32, j: u32| 32 + 32 * s + 8 * j;
    run(&gm, 192, SLOT2 + 8, || {
        let t = tid();
        let (full, empty, acc_full) =
            (|s: u32| smem() + BARS + 8 * s, |s: u32| smem() + BARS + 16 + 8 * s, smem() + BARS + 32);
        if t < 32 {
            tc::alloc(smem() + SLOT2, 128);
        }
        if t == 0 {
            for i in 0..5 {
                mbarrier::init(smem() + BARS + 8 * i, 1);
            }
            fence::mbarrier_init();
        }
        barrier::sync_all(0);
        tc::fence_after_thread_sync();
        let base = memory::ld_shared::<u32>(smem() + SLOT2);
        let stage = |s: u32| smem() + s * STAGE;
        if t == 0 {
            for kb in 0..KB {
                let (s, phase) = (kb % 2, (kb / 2) & 1);
                mbarrier::try_wait_parity(empty(s), phase ^ 1);
                mbarrier::arrive_expect_tx(full(s), STAGE);
                bulk::global_to_shared(stage(s), a_g + u64::from(kb * 16384), 16384, full(s));
                bulk::global_to_shared(stage(s) + 16384, b_g + u64::from(kb * 1024), 1024, full(s));
                bulk::global_to_shared(stage(s) + 17408, sfa_g + u64::from(kb * 2048), 2048, full(s));
                bulk::global_to_shared(stage(s) + 19456, sfb_g + u64::from(kb * 2048), 2048, full(s));
            }
        } else if t == 32 {
            for kb in 0..KB {
                let (s, phase) = (kb % 2, (kb / 2) & 1);
                mbarrier::try_wait_parity(full(s), phase);
                tc::fence_after_thread_sync();
                for j in 0..4 {
                    tc::cp_32x128b_warpx4(base + sf_col(s, j), desc(stage(s) + 17408 + 512 * j, 0, 128, 0));
                    tc::cp_32x128b_warpx4(base + sf_col(s, j) + 4, desc(stage(s) + 19456 + 512 * j, 0, 128, 0));
                }
                for j in 0..4 {
                    let a_d = desc(stage(s) + 32 * j, 16, 1024, 2);
                    let b_d = desc(stage(s) + 16384 + 32 * j, 16, 1024, 2);
                    let acc = kb > 0 || j > 0;
                    tc::mma_mxf4nvf4_block_scale_4x(
                        base,
                        a_d,
                        b_d,
                        idesc(N),
                        base + sf_col(s, j),
                        base + sf_col(s, j) + 4,
                        acc,
                    );
                }
                tc::commit(empty(s));
            }
            tc::commit(acc_full);
        } else if t >= 64 {
            mbarrier::try_wait_parity(acc_full, 0);
            tc::fence_after_thread_sync();
            let (warp, lane) = (t / 32, t % 32);
            let row = 32 * (warp % 4) + lane;
            let mut regs = [0u32; N as usize];
            unsafe { tc::ld_32x32b(base + ((32 * (warp % 4)) << 16), regs.as_mut_ptr(), N) };
            tc::wait_ld();
            for (i, v) in regs.iter().enumerate() {
                memory::st_global::<u32>(out + 4 * u64::from(row * N + i as u32), *v);
            }
        }
        tc::fence_before_thread_sync();
        barrier::sync_all(0);
        if t < 32 {
            tc::fence_after_thread_sync();
            tc::dealloc(base, 128);
        }
    });
    // Reference: 16 MMAs of K = 64, each summed exactly and rounded once to f32.
    let value = |rows: &[u8], r: usize, k: usize| {
        let byte = rows[r * 512 + k / 2];
        e2m1(if k.is_multiple_of(2) { byte & 0xF } else { byte >> 4 })
    };
    let mut want = vec![0f32; 128 * N as usize];
    for step in 0..(4 * KB) as usize {
        for m in 0..128 {
            for n in 0..N as usize {
                let mut sum = 0f64;
                for kk in 0..64 {
                    let k = 64 * step + kk;
                    let sa = Operands::scale(&sfa[step], m, kk / 16);
                    let sb = Operands::scale(&sfb[step], n, kk / 16);
                    sum += value(&a, m, k) * sa * value(&b, n, k) * sb;
                }
                let d = &mut want[m * N as usize + n];
                *d = (if step == 0 { 0.0 } else { f64::from(*d) } + sum) as f32;
            }
        }
    }
    let got: Vec<f32> = read_u32s(&gm, out, 128 * N as usize).into_iter().map(f32::from_bits).collect();
    assert_eq!(got, want);
}

// ---------------------------------------------------------------------------------------
// 3. Detectors
// ---------------------------------------------------------------------------------------

/// A thread writes part of A without fence.proxy.async: the MMA's issue is blamed, and the
/// report names the writer and its line.
#[test]
fn mma_reads_a_write_without_fence_proxy_async() {
    let ops = Operands::random(8, 1);
    let (store, mma) = (Line::default(), Line::default());
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        barrier::sync_all(0);
        if tid() == 7 {
            // Row 127, logical chunk 0 (the first chunk of the MMA's last row).
            store.next();
            memory::st_shared::<u32>(smem() + A_OFF + sw128_byte(127, 0), 0);
        }
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + 128, sf_desc(0));
            tc::cp_32x128b_warpx4(base + 132, sf_desc(1));
            mma.next();
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(8), base + 128, base + 132, false);
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        teardown(base);
    });
    expect(&e, ErrorKind::MissingProxyFence, &[&format!("written by thread 7 at {}", store.at()), "tcgen05.mma"]);
    mma.assert_blamed(&e);
}

/// A generic store into shared memory a committed but not yet completed MMA reads.
#[test]
fn store_into_an_operand_of_a_pending_mma() {
    let ops = Operands::random(8, 2);
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + 128, sf_desc(0));
            tc::cp_32x128b_warpx4(base + 132, sf_desc(1));
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(8), base + 128, base + 132, false);
            tc::commit(smem() + BAR);
            line.next();
            memory::st_shared::<u32>(smem() + B_OFF + 16, 0);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        teardown(base);
    });
    expect(&e, ErrorKind::InFlightRead, &["in-flight async-proxy reader", "tcgen05.mma"]);
    line.assert_blamed(&e);
}

/// A bulk copy (async proxy) into shared memory a pending MMA still reads.
#[test]
fn bulk_copy_into_an_operand_of_a_pending_mma() {
    let ops = Operands::random(8, 16);
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[0; 1024]);
    let line = Line::default();
    let e = report(&gm, 32, SMEM + 8, || {
        ops.store(32, true);
        let base = setup();
        if tid() == 0 {
            mbarrier::init(smem() + SMEM, 1);
            fence::mbarrier_init();
            issue(base, 8, 1);
            mbarrier::arrive_expect_tx(smem() + SMEM, 1024);
            line.next();
            bulk::global_to_shared(smem() + B_OFF, src, 1024, smem() + SMEM);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        teardown(base);
    });
    expect(&e, ErrorKind::InFlightRead, &["copies into shared byte", "tcgen05.mma/cp still reads"]);
    line.assert_blamed(&e);
}

/// tcgen05.ld of the accumulator before the commit's mbarrier wait.
#[test]
fn ld_before_the_commit_wait() {
    let ops = Operands::random(8, 4);
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        issue(base, 8, 1);
        let mut regs = [0u32; 8];
        line.next();
        unsafe { tc::ld_32x32b(base, regs.as_mut_ptr(), 8) };
        tc::wait_ld();
        mbarrier::try_wait_parity(smem() + BAR, 0);
        teardown(base);
    });
    expect(&e, ErrorKind::Tcgen05, &["reads tensor-memory columns 0..8", "pending tcgen05.mma", "commit"]);
    line.assert_blamed(&e);
}

/// A cp right after bar.sync, with no tcgen05.fence::after_thread_sync.
#[test]
fn missing_fence_after_thread_sync() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        if tid() == 0 {
            memory::st_shared::<u32>(smem() + SF_OFF, 1);
            fence::proxy_async_shared_cta();
        }
        tc::alloc(smem() + SLOT, 32);
        barrier::sync_all(0);
        let base = memory::ld_shared::<u32>(smem() + SLOT);
        if tid() == 0 {
            line.next();
            tc::cp_32x128b_warpx4(base, sf_desc(0));
        }
        tc::fence_after_thread_sync();
        tc::dealloc(base, 32);
    });
    expect(&e, ErrorKind::Tcgen05, &["`bar.sync`", "no tcgen05.fence::after_thread_sync"]);
    line.assert_blamed(&e);
}

/// bar.sync after a tcgen05.ld with no tcgen05.fence::before_thread_sync.
#[test]
fn missing_fence_before_thread_sync() {
    let (ld, sync) = (Line::default(), Line::default());
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        tc::alloc(smem() + SLOT, 32);
        let base = memory::ld_shared::<u32>(smem() + SLOT);
        let mut regs = [0u32; 1];
        ld.next();
        unsafe { tc::ld_32x32b(base, regs.as_mut_ptr(), 1) };
        tc::wait_ld();
        sync.next();
        barrier::sync_all(0);
        tc::dealloc(base, 32);
    });
    expect(&e, ErrorKind::Tcgen05, &[&format!("tcgen05.ld at {}", ld.at()), "fence::before_thread_sync"]);
    sync.assert_blamed(&e);
}

/// Warp 0 reads the accumulator; only its lane 0 releases the read (a commit implies
/// fence::before_thread_sync) and signals; the MMA thread of warp 1 waits for that signal
/// and overwrites the accumulator that lanes 1-31 read unreleased.
#[test]
fn mma_overwrites_an_accumulator_an_unreleased_ld_read() {
    let ops = Operands::random(8, 12);
    let (ld, mma) = (Line::default(), Line::default());
    let e = report(&GlobalMemory::new(), 64, SMEM, || {
        ops.store(64, true);
        let base = setup();
        if tid() < 32 {
            let mut regs = [0u32; 8];
            ld.next();
            unsafe { tc::ld_32x32b(base, regs.as_mut_ptr(), 8) };
            tc::wait_ld();
            if tid() == 0 {
                tc::commit(smem() + BAR);
            }
        } else if tid() == 32 {
            mbarrier::try_wait_parity(smem() + BAR, 0);
            tc::fence_after_thread_sync();
            mma.next();
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(8), base + 128, base + 132, false);
        }
    });
    let reader = format!("thread 1 read with the tcgen05.ld at {}", ld.at());
    expect(&e, ErrorKind::Tcgen05, &["writes tensor-memory columns 0..8", &reader, "fence::before_thread_sync"]);
    mma.assert_blamed(&e);
}

/// Warp 1 may only read lanes 32..63.
#[test]
fn ld_outside_the_warps_lane_quarter() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 64, SMEM, || {
        if tid() < 32 {
            tc::alloc(smem() + SLOT, 32);
        }
        barrier::sync_all(0);
        tc::fence_after_thread_sync();
        let base = memory::ld_shared::<u32>(smem() + SLOT);
        let mut regs = [0u32; 1];
        if tid() >= 32 {
            line.next();
            unsafe { tc::ld_32x32b(base, regs.as_mut_ptr(), 1) };
        }
    });
    expect(&e, ErrorKind::Tcgen05, &["warp 1 may access only tensor-memory lanes 32..63", "starts at lane 0"]);
    line.assert_blamed(&e);
}

/// An allocation never freed is a leak, reported at exit with the alloc's line.
#[test]
fn tmem_leaked_at_exit() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        line.next();
        tc::alloc(smem() + SLOT, 64);
    });
    expect(&e, ErrorKind::Tcgen05, &["exited holding tensor-memory columns 0..64", "tcgen05.dealloc"]);
    line.assert_blamed(&e);
}

#[test]
fn alloc_of_48_columns() {
    let e = report(&GlobalMemory::new(), 32, SMEM, || tc::alloc(smem() + SLOT, 48));
    expect(&e, ErrorKind::Tcgen05, &["48 columns", "power of two in 32..=512"]);
}

#[test]
fn alloc_after_relinquish() {
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        tc::relinquish_alloc_permit();
        tc::alloc(smem() + SLOT, 32);
    });
    expect(&e, ErrorKind::Tcgen05, &["after this CTA's tcgen05.relinquish_alloc_permit"]);
}

/// An alloc that can never find room blocks forever: a deadlock.
#[test]
fn alloc_without_room_deadlocks() {
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        tc::alloc(smem() + SLOT, 512);
        tc::alloc(smem() + SLOT + 4, 32);
    });
    expect(&e, ErrorKind::Deadlock, &["for 32 free tensor-memory columns", "columns 0..512"]);
}

#[test]
fn dealloc_matching_no_allocation() {
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        tc::alloc(smem() + SLOT, 64);
        tc::dealloc(0, 32);
    });
    expect(&e, ErrorKind::Tcgen05, &["dealloc of 32 columns at 0x00000000 matches no allocation"]);
}

/// Scale replicas that differ between lane quarters: a completed MMA's accumulator (different
/// in every lane) reused as the scale factors of A.
#[test]
fn scale_replicas_that_differ() {
    let ops = Operands::random(8, 5);
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        issue(base, 8, 1);
        mbarrier::try_wait_parity(smem() + BAR, 0);
        tc::fence_after_thread_sync();
        if tid() == 0 {
            // D (columns 0..8) as the scales of A.
            tc::mma_mxf4nvf4_block_scale_4x(base + 64, a_desc(0), b_desc(0), idesc(8), base, base + 132, false);
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 1);
        teardown(base);
    });
    expect(&e, ErrorKind::Tcgen05, &["scale factors of A row 0 differ between their replicas"]);
}

/// Two MMAs of one thread into overlapping but different accumulators are not ordered.
#[test]
fn mma_into_an_overlapping_different_accumulator() {
    let ops = Operands::random(64, 18);
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + 128, sf_desc(0));
            tc::cp_32x128b_warpx4(base + 132, sf_desc(1));
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(64), base + 128, base + 132, false);
            line.next();
            tc::mma_mxf4nvf4_block_scale_4x(base + 32, a_desc(0), b_desc(0), idesc(64), base + 128, base + 132, true);
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        teardown(base);
    });
    expect(
        &e,
        ErrorKind::Tcgen05,
        &["writes accumulator columns 0..64 that overlap this mma's 32..96", "same accumulator"],
    );
    line.assert_blamed(&e);
}

/// Two pending copies of one thread into the same columns: cp -> cp is not ordered.
#[test]
fn cp_over_a_pending_cp() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + 128, sf_desc(0));
            line.next();
            tc::cp_32x128b_warpx4(base + 130, sf_desc(1));
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        teardown(base);
    });
    expect(
        &e,
        ErrorKind::Tcgen05,
        &["writes tensor-memory columns 130..134", "do not order tcgen05.cp before a later cp"],
    );
    line.assert_blamed(&e);
}

/// A ue4m3 scale byte with bit 7 set (an e4m3 sign left in it) is an invalid encoding.
#[test]
fn ue4m3_scale_with_bit_7_set() {
    let mut ops = Operands::random(8, 17);
    // B row 5, block 2 of the first step.
    ops.sfb[0][5 * 16 + 2] = 0xB8;
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        issue(base, 8, 1);
        mbarrier::try_wait_parity(smem() + BAR, 0);
        teardown(base);
    });
    expect(&e, ErrorKind::Tcgen05, &["scale factor of B row 5", "0xb8 has bit 7 set", "MSB"]);
}

/// Scales read from columns no cp ever wrote.
#[test]
fn scales_never_written() {
    let ops = Operands::random(8, 6);
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + 128, sf_desc(0));
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(8), base + 128, base + 132, false);
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        teardown(base);
    });
    expect(&e, ErrorKind::Tcgen05, &["scale factors of B row 0", "nothing wrote", "tcgen05.cp"]);
}

/// The same thread's cp overwriting scales a pending MMA still reads (mma -> cp is not an
/// ordered pair in the PTX rules).
#[test]
fn cp_over_scales_a_pending_mma_reads() {
    let ops = Operands::random(8, 8);
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + 128, sf_desc(0));
            tc::cp_32x128b_warpx4(base + 132, sf_desc(1));
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(8), base + 128, base + 132, false);
            line.next();
            tc::cp_32x128b_warpx4(base + 128, sf_desc(2));
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        teardown(base);
    });
    expect(&e, ErrorKind::Tcgen05, &["this thread's pending tcgen05.mma", "not mma before a later cp"]);
    line.assert_blamed(&e);
}

/// Ops never committed are reported at exit (the first of them is blamed).
#[test]
fn mma_never_committed() {
    let ops = Operands::random(8, 9);
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        if tid() == 0 {
            line.next();
            tc::cp_32x128b_warpx4(base + 128, sf_desc(0));
            tc::cp_32x128b_warpx4(base + 132, sf_desc(1));
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(8), base + 128, base + 132, false);
        }
    });
    expect(&e, ErrorKind::Tcgen05, &["thread 0 exited with the tcgen05.cp issued at", "never committed"]);
    line.assert_blamed(&e);
}

/// Waiting for an MMA's commit that was never issued: a deadlock whose report names the
/// uncommitted MMA.
#[test]
fn wait_for_an_mma_never_committed_deadlocks() {
    let ops = Operands::random(8, 13);
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + 128, sf_desc(0));
            tc::cp_32x128b_warpx4(base + 132, sf_desc(1));
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(8), base + 128, base + 132, false);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
    });
    expect(&e, ErrorKind::Deadlock, &["thread 0 holds 3 uncommitted tcgen05 op(s)", "no tcgen05.commit follows"]);
}

/// A commit by another thread than the MMA's issuer tracks nothing: it arrives at once,
/// and the accumulator is read while the MMA is still pending.
#[test]
fn commit_by_another_thread_tracks_nothing() {
    let ops = Operands::random(8, 14);
    let e = report(&GlobalMemory::new(), 32, SMEM, || {
        ops.store(32, true);
        let base = setup();
        if tid() == 0 {
            tc::cp_32x128b_warpx4(base + 128, sf_desc(0));
            tc::cp_32x128b_warpx4(base + 132, sf_desc(1));
            tc::mma_mxf4nvf4_block_scale_4x(base, a_desc(0), b_desc(0), idesc(8), base + 128, base + 132, false);
        } else if tid() == 1 {
            tc::commit(smem() + BAR);
        }
        mbarrier::try_wait_parity(smem() + BAR, 0);
        tc::fence_after_thread_sync();
        let mut regs = [0u32; 8];
        unsafe { tc::ld_32x32b(base, regs.as_mut_ptr(), 8) };
        tc::wait_ld();
    });
    expect(&e, ErrorKind::Tcgen05, &["reads tensor-memory columns 0..8 that the pending tcgen05.mma", "by thread 0"]);
}

/// Descriptors rejected at issue: the kind::f16 idesc, a Hopper smem descriptor, a base
/// offset (unsupported), D outside the allocation.
#[test]
fn bad_operands_rejected_at_issue() {
    type Case = (fn(u32), ErrorKind, &'static str);
    let cases: [Case; 6] = [
        (
            |b| {
                let a = desc(smem() + SMEM - 1024, 16, 1024, 2);
                tc::mma_mxf4nvf4_block_scale_4x(b, a, b_desc(0), idesc(8), b + 128, b + 132, false)
            },
            ErrorKind::OutOfBounds,
            "A descriptor 0x",
        ),
        (
            |b| tc::mma_mxf4nvf4_block_scale_4x(b, a_desc(0), b_desc(0), 0x0820_0490, b + 128, b + 132, false),
            ErrorKind::Tcgen05,
            "matrix B scale-factor id",
        ),
        (
            |b| {
                tc::mma_mxf4nvf4_block_scale_4x(b, a_desc(0) & !(1 << 46), b_desc(0), idesc(8), b + 128, b + 132, false)
            },
            ErrorKind::Tcgen05,
            "descriptor version",
        ),
        (
            |b| tc::mma_mxf4nvf4_block_scale_4x(b, a_desc(0), b_desc(0) | 1 << 49, idesc(8), b + 128, b + 132, false),
            ErrorKind::Unsupported,
            "base offset 1 is not modelled",
        ),
        (
            |b| tc::mma_mxf4nvf4_block_scale_4x(b + 200, a_desc(0), b_desc(0), idesc(64), b + 128, b + 132, false),
            ErrorKind::Tcgen05,
            "columns 200..264 are not inside one allocation",
        ),
        (
            |b| tc::cp_32x128b_warpx4(b + 128, desc(smem() + SF_OFF, 0, 128, 2)),
            ErrorKind::Unsupported,
            "only no swizzle",
        ),
    ];
    for (issue, kind, needle) in cases {
        let ops = Operands::random(8, 10);
        let e = report(&GlobalMemory::new(), 32, SMEM, || {
            ops.store(32, true);
            let base = setup();
            if tid() == 0 {
                issue(base);
            }
        });
        expect(&e, kind, &[needle]);
    }
}
