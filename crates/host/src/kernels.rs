//! The kernels the host can run, and what each needs from a GPU.

use std::fmt;

use kernel::{GemmArgs, Launch};

use crate::device::DeviceInfo;
use crate::error::{Error, Result};
use nvfp4::Shape;
use serde::Serialize;

/// SMs of an H100 SXM (and an H200): what emulating a Hopper kernel assumes.
pub const H100_SXM_SMS: u32 = 132;
/// SMs of a B200: what emulating `sm100` assumes.
pub const B200_SMS: u32 = 148;

/// A GEMM kernel of the `kernel` crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// One thread per output, CUDA cores: any GPU CUDA 13 supports.
    Naive,
    /// Hopper: exact in-kernel FP4→fp16 dequantization feeding wgmma.
    Sm90,
    /// Hopper v2: weights dequantized into wgmma registers (RS), activations prepared
    /// once per call, split K.
    Sm90v2,
    /// Blackwell: block-scaled FP4 tcgen05 MMA, scales in tensor memory.
    Sm100,
}

/// Which kernel to run: a specific one, or the best this GPU can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelChoice {
    Auto,
    Naive,
    Sm90,
    Sm90v2,
    Sm100,
}

/// One kernel launch of a GEMM call: every kernel takes the [`GemmArgs`] parameters.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// The `.entry` name in the kernel's PTX build.
    pub entry: &'static str,
    pub launch: Launch,
    /// The body as the emulator runs it (once per emulated thread).
    pub body: fn(&GemmArgs),
    /// Launched with programmatic stream serialization: it may start before the previous
    /// step completes (once that step's CTAs signalled `griddepcontrol.launch_dependents`,
    /// or when they exit without signalling) and executes `griddepcontrol.wait` before it
    /// reads anything the previous step wrote.
    pub programmatic: bool,
}

/// Which GPUs a kernel's PTX can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchRule {
    /// This compute capability or any later one (portable PTX, JIT-compiled upward).
    AtLeast(u32, u32),
    /// Exactly this compute capability (`sm_90a`/`sm_100a` PTX: architecture-specific
    /// instructions that no other generation has).
    Exactly(u32, u32),
}

impl Kernel {
    /// In order of preference, least first: `auto` picks the last one the GPU runs.
    /// `sm90v2` is after `sm90`: measured faster on every benchmark shape (perf notes).
    pub const ALL: [Kernel; 4] = [Kernel::Naive, Kernel::Sm90, Kernel::Sm90v2, Kernel::Sm100];

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Naive => "naive",
            Kernel::Sm90 => "sm90",
            Kernel::Sm90v2 => "sm90v2",
            Kernel::Sm100 => "sm100",
        }
    }

    /// One line on what the kernel does.
    pub fn summary(self) -> &'static str {
        match self {
            Kernel::Naive => "one thread per output on CUDA cores, f32 accumulation (the GPU reference)",
            Kernel::Sm90 => {
                "cp.async staging, exact FP4->fp16 dequant into swizzled shared memory, wgmma m64n128k16 (SS), fp32 accumulation"
            }
            Kernel::Sm90v2 => {
                "activations dequantized once per call; weights dequantized into registers, 128x128 tiles: wgmma m64n128k16 RS on each converted weight (256x64 tiles with m64n64 for M <= 64, 128x64 with m64n64 for M = 17..64 and short K, 64x128 and 64x64 with m64n128 and m64n64 (the two warpgroups on alternate stages) for M = 17..128 and short K, 256x16 with m64n16 for M <= 16; above 128 rows, 128x256 tiles: m64n256k16, unless they would split K where 128x128 tiles make one unsplit wave), a producer warpgroup filling one ring of images and raw weights (setmaxnreg: 40 registers, consumers 232; 48 and 224 on 256x64 tiles), split K or stream-K; M <= 4 with NVFP4 A: one CUDA-core GEMV launch (dp4a on doubled e2m1 codes); M <= 16 with K % 1024 = 0 (from 5 with NVFP4 A, from 1 in W4A16): one launch of warp-level mma.sync m16n8k16 (bf16 with bf16 A) on weights converted in registers"
            }
            Kernel::Sm100 => {
                "cp.async staging, scales copied to tensor memory, tcgen05.mma kind::mxf4nvf4 block_scale 128x64x64, f32 accumulator in tensor memory"
            }
        }
    }

    /// The embedded PTX build it lives in, and its main `.entry` name (see [`Kernel::steps`]).
    pub fn ptx(self) -> (&'static str, &'static str) {
        match self {
            Kernel::Naive => ("portable", "nvfp4_gemm_naive"),
            Kernel::Sm90 => ("sm90a", "nvfp4_gemm_sm90"),
            Kernel::Sm90v2 => ("sm90a", "nvfp4_gemm_sm90v2"),
            Kernel::Sm100 => ("sm100a", "nvfp4_gemm_sm100"),
        }
    }

    pub fn arch_rule(self) -> (ArchRule, &'static str) {
        match self {
            Kernel::Naive => {
                (ArchRule::AtLeast(7, 5), "its portable PTX targets sm_75, the oldest architecture CUDA 13 supports")
            }
            Kernel::Sm90 | Kernel::Sm90v2 => (ArchRule::Exactly(9, 0), "wgmma exists only on Hopper (sm_90a PTX)"),
            Kernel::Sm100 => (
                ArchRule::Exactly(10, 0),
                "tcgen05 block-scaled FP4 MMA is sm_100a PTX: B200 and GB200 only (sm_103 parts need their own build)",
            ),
        }
    }

    /// Fails with a message saying why, and what does run, when the GPU cannot run it.
    pub fn check_device(self, device: &DeviceInfo) -> Result<()> {
        let cc = device.compute_capability;
        if self.runs_on(cc) {
            return Ok(());
        }
        let (rule, why) = self.arch_rule();
        let (need_major, need_minor) = match rule {
            ArchRule::AtLeast(a, b) | ArchRule::Exactly(a, b) => (a, b),
        };
        let runnable: Vec<&str> = Kernel::ALL.iter().filter(|k| k.runs_on(cc)).map(|k| k.name()).collect();
        Err(Error::Unsupported {
            kernel: self.name(),
            why,
            need_major,
            need_minor,
            device: device.ordinal,
            name: device.name.clone(),
            have_major: cc.0,
            have_minor: cc.1,
            hint: if runnable.is_empty() {
                "no kernel of this build runs on it; `--emulate` runs them on the CPU".into()
            } else {
                format!("kernels that run here: {} (or `--kernel auto`)", runnable.join(", "))
            },
        })
    }

    pub fn runs_on(self, (major, minor): (u32, u32)) -> bool {
        match self.arch_rule().0 {
            ArchRule::AtLeast(a, b) => (major, minor) >= (a, b),
            ArchRule::Exactly(a, b) => (major, minor) == (a, b),
        }
    }

    /// Dynamic shared memory per CTA: the most any shape's launch uses.
    pub fn dynamic_smem(self) -> u32 {
        match self {
            Kernel::Naive => 0,
            Kernel::Sm90 => kernel::sm90::SMEM_BYTES,
            Kernel::Sm90v2 => kernel::sm90v2::SMEM_BYTES,
            Kernel::Sm100 => kernel::sm100::SMEM_BYTES,
        }
    }

    /// Scratch GPU memory the kernel needs for `shape` on a GPU with `sms` SMs
    /// (zero-filled before its first launch; the kernel leaves it reusable).
    pub fn workspace_bytes(self, shape: Shape, sms: u32) -> u64 {
        let (m, n, k, l) = (shape.m, shape.n, shape.k, shape.l);
        match self {
            Kernel::Naive | Kernel::Sm90 => 0,
            Kernel::Sm90v2 => kernel::sm90v2::workspace_bytes(m, n, k, l, sms),
            Kernel::Sm100 => kernel::sm100::workspace_bytes(m, n, k, l, sms),
        }
    }

    /// The SM count a run without a GPU assumes (emulation, `--emulate`'s launch line):
    /// that of the GPU the kernel was tuned on, an H100 SXM's 132 (a B200's 148 for
    /// `sm100`). A GPU run uses the device's own count: `sm90v2` and `sm100` size their
    /// grids, and so their split K, to it.
    pub fn emulated_sms(self) -> u32 {
        match self {
            Kernel::Naive | Kernel::Sm90 | Kernel::Sm90v2 => H100_SXM_SMS,
            Kernel::Sm100 => B200_SMS,
        }
    }

    /// Whether the kernel takes A as 16-bit values (W4A16: fp16 or bf16 activations,
    /// [`nvfp4::operand::AFormat::is_16bit`]).
    pub fn takes_16bit_activations(self) -> bool {
        matches!(self, Kernel::Sm90v2)
    }

    /// Whether the kernel takes A in `format` (NVFP4: every kernel).
    pub fn takes(self, format: nvfp4::operand::AFormat) -> bool {
        !format.is_16bit() || self.takes_16bit_activations()
    }

    /// The names of the kernels that take 16-bit activations, for refusals ("sm90v2").
    pub fn w4a16_kernels() -> String {
        let names: Vec<&str> = Kernel::ALL.iter().filter(|k| k.takes_16bit_activations()).map(|k| k.name()).collect();
        names.join(", ")
    }

    /// Whether the workspace must hold zeros when a call starts (sm100's split-K counters,
    /// which every call leaves at zero again); sm90v2 writes everything it reads.
    pub fn workspace_starts_zeroed(self) -> bool {
        matches!(self, Kernel::Sm100)
    }

    /// Grid, CTA and shared memory of the main launch for `shape` on `sms` SMs.
    pub fn launch(self, shape: Shape, sms: u32) -> Launch {
        let (m, n, k, l) = (shape.m, shape.n, shape.k, shape.l);
        match self {
            Kernel::Naive => kernel::naive::launch(m, n, l),
            Kernel::Sm90 => kernel::sm90::launch(m, n, l),
            Kernel::Sm90v2 => kernel::sm90v2::launch(m, n, k, l, sms),
            Kernel::Sm100 => kernel::sm100::launch(m, n, k, l, sms),
        }
    }

    /// The main kernel body as the emulator runs it (once per emulated thread). (sm90v2's
    /// calls take theirs from [`Kernel::sm90v2_steps`], by tile kind and operand type; this
    /// is its prefill tile's.)
    pub fn body(self) -> fn(&GemmArgs) {
        match self {
            Kernel::Naive => kernel::naive::gemm,
            Kernel::Sm90 => kernel::sm90::gemm::<kernel::sm90::Correct>,
            Kernel::Sm90v2 => kernel::sm90v2::gemm::<kernel::sm90v2::Prefill, kernel::sm90v2::BothTypes>,
            Kernel::Sm100 => kernel::sm100::gemm::<kernel::sm100::Correct>,
        }
    }

    /// The launches of one GEMM call on `sms` SMs with A in `format`, in stream order: the
    /// main launch; for `sm90v2` preceded by the prologue that dequantizes the activations
    /// into the workspace and, when it splits K, followed by the sum of the partials; or,
    /// for `sm90v2` at decode sizes, the CUDA-core GEMV alone (NVFP4 activations, M up to
    /// 4, [`kernel::gemv::takes`]) or the one-launch mma.sync kernel (any activations, M up
    /// to 16, [`kernel::skinny::takes`]).
    pub fn steps(self, shape: Shape, sms: u32, format: nvfp4::operand::AFormat) -> Vec<Step> {
        let (m, n, k, l) = (shape.m, shape.n, shape.k, shape.l);
        let nvfp4 = format == nvfp4::operand::AFormat::Nvfp4;
        match self {
            Kernel::Sm90v2 if nvfp4 && kernel::gemv::takes(m, n, k, l) => vec![Kernel::gemv_step(shape, sms)],
            Kernel::Sm90v2 if kernel::skinny::takes(m, n, k, l, sms) => vec![Kernel::skinny_step(shape, sms)],
            Kernel::Sm90v2 => Kernel::sm90v2_steps(&kernel::sm90v2::Plan::new(m, n, k, l, sms), format),
            _ => vec![Step {
                entry: self.ptx().1,
                launch: self.launch(shape, sms),
                body: self.body(),
                programmatic: false,
            }],
        }
    }

    /// The main launch of a call (the GEMM's, not the prologue's or the reduce's): what
    /// `host` prints as the call's launch.
    pub fn main_step(self, shape: Shape, sms: u32, format: nvfp4::operand::AFormat) -> Step {
        let steps = self.steps(shape, sms, format);
        // sm90v2's wgmma calls start with the prologue; every other call is one launch.
        if steps.len() > 1 { steps[1] } else { steps[0] }
    }

    /// The CUDA-core GEMV's one launch ([`kernel::gemv`]): sm90v2's decode calls with
    /// NVFP4 activations.
    pub fn gemv_step(shape: Shape, sms: u32) -> Step {
        let launch = kernel::gemv::launch(shape.m, shape.n, shape.k, shape.l, sms);
        Step { entry: kernel::gemv::ENTRY, launch, body: kernel::gemv::gemv, programmatic: false }
    }

    /// The one-launch mma.sync kernel ([`kernel::skinny`]): sm90v2's calls with M up to 16
    /// that it takes and the GEMV does not (M = 5..16 with NVFP4 activations, 1..16 in
    /// W4A16).
    pub fn skinny_step(shape: Shape, sms: u32) -> Step {
        let launch = kernel::skinny::launch(shape.n, shape.l, sms);
        Step { entry: kernel::skinny::ENTRY, launch, body: kernel::skinny::skinny, programmatic: false }
    }

    /// The launches of one sm90v2 call on `plan` with A in `format` (its tile kind picks
    /// the entry points: decode, narrow, thin, medium, prefill, wide; the format the GEMM's
    /// operand type). [`Kernel::steps`] takes the plan [`kernel::sm90v2::Plan::new`] picks;
    /// tests use it to run a given tile kind.
    pub fn sm90v2_steps(plan: &kernel::sm90v2::Plan, format: nvfp4::operand::AFormat) -> Vec<Step> {
        let ([prepare, gemm, reduce], [prepare_body, gemm_body, reduce_body]) =
            (plan.entries(format), plan.bodies(format));
        let main = Step { entry: gemm, launch: plan.launch(), body: gemm_body, programmatic: false };
        // The GEMM prefetches weights while the prologue finishes; the reduce is
        // scheduled as the GEMM grid completes (it does not signal earlier). Each
        // waits (griddepcontrol) before reading the previous launch's output.
        let mut steps = vec![
            Step { entry: prepare, launch: plan.prepare_launch(), body: prepare_body, programmatic: false },
            Step { programmatic: true, ..main },
        ];
        if plan.splits() > 1 {
            steps.push(Step { entry: reduce, launch: plan.reduce_launch(), body: reduce_body, programmatic: true });
        }
        steps
    }

    /// Every launch any call may make on `sms` SMs (each entry point at least once, with
    /// its largest shared memory): what loading the kernel prepares. A step may be skipped
    /// for some shapes, and sm90v2 has an entry point per tile kind: a one-tile plan per
    /// kind (so it splits K) has them all.
    pub fn every_step(self, sms: u32) -> Vec<Step> {
        if self == Kernel::Sm90v2 {
            // Every tile kind on a one-tile shape of 8 stages, which splits K (and so
            // launches the reduce too) wherever there is more than one SM.
            // And the GEMV, with the most shared memory it takes.
            let k = 8 * nvfp4::shape::K_GRANULE;
            let gemv = Kernel::gemv_step(Shape::new(1, 1, k, 1).expect("a valid shape"), sms);
            let gemv = Step { launch: Launch { dynamic_smem: kernel::gemv::SMEM_LIMIT, ..gemv.launch }, ..gemv };
            // And the mma.sync kernel (its shared memory is the same for every call).
            let skinny =
                Kernel::skinny_step(Shape::new(16, 1, kernel::skinny::PHASE_K, 1).expect("a valid shape"), sms);
            // With bf16 activations too where the GEMM has a bf16 entry of its own.
            let (nvfp4, bf16) = (nvfp4::operand::AFormat::Nvfp4, nvfp4::operand::AFormat::Bf16);
            return kernel::sm90v2::TILES
                .iter()
                .flat_map(|&tile| {
                    let plan = kernel::sm90v2::Plan::on(tile, 1, 1, k, 1, sms);
                    let formats =
                        if plan.entries(bf16) != plan.entries(nvfp4) { vec![nvfp4, bf16] } else { vec![nvfp4] };
                    formats.into_iter().flat_map(move |format| Kernel::sm90v2_steps(&plan, format))
                })
                .chain([gemv, skinny])
                .collect();
        }
        // The other kernels (one entry point each): a shape of every size class.
        [1, kernel::sm90v2::MEDIUM_MAX_M, kernel::sm90v2::PREFILL_MAX_M, 2 * kernel::sm90v2::PREFILL_MAX_M]
            .into_iter()
            .map(|m| Shape::new(m, 1, 64 * nvfp4::shape::K_GRANULE, 1).expect("a valid shape"))
            .flat_map(|shape| self.steps(shape, sms, nvfp4::operand::AFormat::Nvfp4))
            .collect()
    }

    /// FLOP per clock per SM of the unit the kernel computes on, for compute capability
    /// `cc`: the arithmetic limit its speed is compared with.
    pub fn unit_flop_per_clk_per_sm(self, cc: (u32, u32)) -> (f64, &'static str) {
        match self {
            // f32 FMA lanes per SM: 64 on Turing (sm_75) and A100 (sm_80), 128 on later parts.
            Kernel::Naive => {
                let lanes = if matches!(cc, (7, 5) | (8, 0)) { 64.0 } else { 128.0 };
                (2.0 * lanes, "f32 FMA on CUDA cores")
            }
            // Dense fp16 wgmma: 4096 FLOP/clk/SM on an H100 (measured with SS m64n256k16).
            Kernel::Sm90 | Kernel::Sm90v2 => (4096.0, "dense fp16 tensor cores"),
            // Dense block-scaled FP4 tcgen05: 16384 FMA/clk/SM (a B200's 9 PFLOP/s dense
            // FP4 over 148 SMs at ~1.9 GHz); not measured here, no B200 at hand.
            Kernel::Sm100 => (32768.0, "dense FP4 tensor cores"),
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl KernelChoice {
    /// The kernel to run on a GPU of compute capability `cc` (None: emulation, where
    /// `auto` means the most capable kernel).
    pub fn resolve(self, cc: Option<(u32, u32)>) -> Kernel {
        match self {
            KernelChoice::Naive => Kernel::Naive,
            KernelChoice::Sm90 => Kernel::Sm90,
            KernelChoice::Sm90v2 => Kernel::Sm90v2,
            KernelChoice::Sm100 => Kernel::Sm100,
            KernelChoice::Auto => {
                Kernel::ALL.iter().rev().copied().find(|k| cc.is_none_or(|cc| k.runs_on(cc))).unwrap_or(Kernel::Naive)
            }
        }
    }

    /// [`KernelChoice::resolve`] for A in `format`: `auto` picks the most capable kernel
    /// that runs here and takes it (under the emulator, W4A16 runs on sm90v2); when none
    /// does (W4A16 on a B200), what `resolve` picks, which then refuses it with the reason.
    pub fn resolve_for(self, cc: Option<(u32, u32)>, format: nvfp4::operand::AFormat) -> Kernel {
        let takes = |k: &Kernel| k.takes(format) && cc.is_none_or(|cc| k.runs_on(cc));
        match self {
            KernelChoice::Auto => Kernel::ALL.iter().rev().copied().find(takes).unwrap_or_else(|| self.resolve(cc)),
            _ => self.resolve(cc),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(cc: (u32, u32)) -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: "Test GPU".into(),
            compute_capability: cc,
            multiprocessors: 1,
            sm_clock_mhz: 1000.0,
            memory_clock_mhz: 1000.0,
            memory_bus_bits: 64,
            l2_bytes: 1 << 20,
            memory_bytes: 1 << 30,
            max_shared_per_block: 48 << 10,
            driver_cuda_version: (13, 0),
        }
    }

    #[test]
    fn architecture_rules() {
        assert!(Kernel::Naive.runs_on((7, 5)) && Kernel::Naive.runs_on((9, 0)) && Kernel::Naive.runs_on((10, 0)));
        assert!(!Kernel::Naive.runs_on((7, 0)), "CUDA 13 dropped Volta");
        assert!(Kernel::Sm90.runs_on((9, 0)));
        assert!(!Kernel::Sm90.runs_on((8, 9)) && !Kernel::Sm90.runs_on((10, 0)), "sm_90a PTX runs on Hopper only");
        assert!(Kernel::Sm100.runs_on((10, 0)));
        assert!(
            !Kernel::Sm100.runs_on((9, 0)) && !Kernel::Sm100.runs_on((10, 3)) && !Kernel::Sm100.runs_on((12, 0)),
            "sm_100a PTX runs on B200/GB200 only"
        );
    }

    #[test]
    fn auto_picks_the_most_capable_kernel() {
        assert_eq!(KernelChoice::Auto.resolve(Some((9, 0))), Kernel::Sm90v2);
        assert_eq!(KernelChoice::Auto.resolve(Some((8, 0))), Kernel::Naive);
        assert_eq!(KernelChoice::Auto.resolve(Some((10, 0))), Kernel::Sm100);
        assert_eq!(KernelChoice::Auto.resolve(Some((12, 0))), Kernel::Naive);
        assert_eq!(KernelChoice::Auto.resolve(None), Kernel::Sm100, "the emulator runs everything");
        assert_eq!(KernelChoice::Naive.resolve(Some((9, 0))), Kernel::Naive);
        // With 16-bit activations: the most capable kernel that takes them.
        use nvfp4::operand::AFormat;
        assert_eq!(KernelChoice::Auto.resolve_for(None, AFormat::Bf16), Kernel::Sm90v2);
        assert_eq!(KernelChoice::Auto.resolve_for(None, AFormat::Nvfp4), Kernel::Sm100);
        assert_eq!(KernelChoice::Auto.resolve_for(Some((9, 0)), AFormat::F16), Kernel::Sm90v2);
        assert_eq!(KernelChoice::Auto.resolve_for(Some((10, 0)), AFormat::F16), Kernel::Sm100, "refused later");
        assert_eq!(KernelChoice::Sm90.resolve_for(None, AFormat::F16), Kernel::Sm90, "an explicit choice stays");
    }

    #[test]
    fn a_kernel_the_gpu_cannot_run_says_why_and_what_can() {
        let err = Kernel::Sm90.check_device(&device((8, 9))).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("kernel `sm90` needs compute capability 9.0"), "{text}");
        assert!(text.contains("wgmma exists only on Hopper"), "{text}");
        assert!(text.contains("has 8.9"), "{text}");
        assert!(text.contains("kernels that run here: naive"), "{text}");
        assert_eq!(err.exit_code(), 3);

        let err = Kernel::Naive.check_device(&device((6, 1))).unwrap_err().to_string();
        assert!(err.contains("needs compute capability 7.5"), "{err}");
        assert!(err.contains("no kernel of this build runs on it; `--emulate`"), "{err}");

        assert!(Kernel::Sm90.check_device(&device((9, 0))).is_ok());

        // On the H100: sm100 is refused, and the message names what runs instead.
        let err = Kernel::Sm100.check_device(&device((9, 0))).unwrap_err().to_string();
        assert!(err.contains("kernel `sm100` needs compute capability 10.0"), "{err}");
        assert!(err.contains("has 9.0"), "{err}");
        assert!(err.contains("kernels that run here: naive, sm90, sm90v2"), "{err}");
        assert!(Kernel::Sm100.check_device(&device((10, 0))).is_ok());
    }

    /// Loading a kernel prepares every GEMM entry point its PTX has (a tile height that
    /// `every_step` missed would fail at its first call with "not loaded").
    #[test]
    fn every_step_reaches_every_entry_point() {
        for k in Kernel::ALL {
            let (target, main) = k.ptx();
            let ptx = crate::embedded::target(target).expect("embedded target").ptx;
            let steps = k.every_step(H100_SXM_SMS);
            let names = ptx.lines().filter_map(|l| l.split(".entry ").nth(1)).map(|n| n.trim_end_matches('(').trim());
            // sm90v2's entries: a prologue, GEMM and reduce per tile height, and the GEMV.
            let sm90v2 = |n: &str| n.contains("sm90v2") || n == kernel::gemv::ENTRY;
            let ours: Vec<&str> = names.filter(|n| *n == main || (k == Kernel::Sm90v2 && sm90v2(n))).collect();
            assert!(!ours.is_empty(), "{k}: no entry point found in {target}");
            for name in ours {
                assert!(steps.iter().any(|s| s.entry == name), "{k}: `{name}` is not among every_step's launches");
            }
        }
    }

    #[test]
    fn every_kernel_has_its_ptx_and_a_launch() {
        for (k, shape) in Kernel::ALL
            .into_iter()
            .flat_map(|k| [(k, Shape::new(300, 200, 128, 2).unwrap()), (k, Shape::new(1, 200, 128, 2).unwrap())])
        {
            let (target, entry) = k.ptx();
            let ptx = crate::embedded::target(target).expect("embedded target");
            for format in [nvfp4::operand::AFormat::Nvfp4, nvfp4::operand::AFormat::F16] {
                if !k.takes(format) {
                    continue;
                }
                for step in k.steps(shape, k.emulated_sms(), format) {
                    assert!(
                        ptx.ptx.contains(&format!(".entry {}", step.entry)),
                        "{} missing from {target}",
                        step.entry
                    );
                    let launch = step.launch;
                    assert!(launch.grid.iter().all(|&g| g > 0) && launch.block.iter().product::<u32>() > 0);
                    assert!(launch.dynamic_smem <= k.dynamic_smem());
                }
                // sm90v2 has its own entry points for M <= 16 (decode tiles, the GEMV with
                // NVFP4 activations, the mma.sync kernel).
                let (m, n, kk, l, sms) = (shape.m, shape.n, shape.k, shape.l, k.emulated_sms());
                let nvfp4 = format == nvfp4::operand::AFormat::Nvfp4;
                let main = match k {
                    Kernel::Sm90v2 if nvfp4 && kernel::gemv::takes(m, n, kk, l) => kernel::gemv::ENTRY,
                    Kernel::Sm90v2 if kernel::skinny::takes(m, n, kk, l, sms) => kernel::skinny::ENTRY,
                    Kernel::Sm90v2 => kernel::sm90v2::entries(m, n, kk, l, sms, format)[1],
                    _ => entry,
                };
                assert_eq!(k.main_step(shape, sms, format).entry, main, "{k} {shape} {format:?}");
            }
        }
    }
}
