//! One GEMM problem's inputs, held on the host in exactly the layouts the kernels read, and
//! its output.

use half::f16;
use nvfp4::Shape;
use nvfp4::epilogue::OutDtype;
pub use nvfp4::operand::AFormat;

/// The inputs of C = alpha * (A * B^T) + bias for every batch, as the kernels consume them.
#[derive(Clone, Debug)]
pub struct Problem {
    pub shape: Shape,
    /// A, packed e2m1, [L][M][K/2] (low nibble = even k); or, when `a_format` is
    /// [`AFormat::F16`] (W4A16), fp16 values [L][M][K] as little-endian bytes.
    pub a: Vec<u8>,
    pub a_format: AFormat,
    /// B, packed e2m1, [L][N][K/2].
    pub b: Vec<u8>,
    /// SFA, e4m3 bits in the blocked layout, L batches of `layout::batch_bytes(M, K/16)`
    /// (empty for fp16 activations).
    pub sfa: Vec<u8>,
    /// SFB, e4m3 bits in the blocked layout, L batches of `layout::batch_bytes(N, K/16)`.
    pub sfb: Vec<u8>,
    /// What becomes of the fp32 accumulator: [`Epilogue::IDENTITY`] unless asked otherwise.
    pub epilogue: Epilogue,
}

/// `C = round(alpha * acc + bias[n])` to fp16 or bf16 (the order of operations is
/// [`nvfp4::epilogue`]'s).
#[derive(Clone, Debug, PartialEq)]
pub struct Epilogue {
    pub alpha: f32,
    /// Pass alpha to the kernel as one f32 in GPU memory instead of as an argument (what a
    /// captured CUDA graph needs); the result is the same.
    pub alpha_in_memory: bool,
    /// [N] values in the output type's bits.
    pub bias: Option<Vec<u16>>,
    pub out: OutDtype,
}

impl Epilogue {
    /// alpha 1, no bias, fp16: the plain C = A * B^T of the GPU MODE problem.
    pub const IDENTITY: Epilogue = Epilogue { alpha: 1.0, alpha_in_memory: false, bias: None, out: OutDtype::F16 };

    /// Whether this is [`Epilogue::IDENTITY`] up to where alpha lives (C is then fp16,
    /// rounded once from the exact sum by the reference).
    pub fn is_identity(&self) -> bool {
        self.alpha == 1.0 && self.bias.is_none() && self.out == OutDtype::F16
    }

    /// The output element for an accumulator `acc` in column `col`: `acc * alpha`, or
    /// `fma(acc, alpha, bias[col])`, rounded to the output type.
    pub fn apply(&self, acc: f32, col: usize) -> u16 {
        let v = match &self.bias {
            None => acc * self.alpha,
            Some(bias) => acc.mul_add(self.alpha, self.out.to_f32(bias[col])),
        };
        match self.out {
            OutDtype::F16 => f16::from_f32(v).to_bits(),
            OutDtype::Bf16 => nvfp4::epilogue::bf16_from_f32(v),
        }
    }

    /// One line for reports: `alpha 0.5, bias, bf16 out`.
    pub fn describe(&self) -> String {
        let alpha = if self.alpha_in_memory {
            format!("alpha {} (in GPU memory)", self.alpha)
        } else {
            format!("alpha {}", self.alpha)
        };
        let bias = if self.bias.is_some() { ", bias" } else { "" };
        format!("{alpha}{bias}, {} out", self.out.name())
    }
}

/// C as the bits of its element type, `[L][M][N]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub dtype: OutDtype,
    pub bits: Vec<u16>,
}

impl Output {
    /// An fp16 C.
    pub fn from_f16(values: &[f16]) -> Output {
        Output { dtype: OutDtype::F16, bits: values.iter().map(|v| v.to_bits()).collect() }
    }

    /// C's bits read back from little-endian bytes.
    pub fn from_le_bytes(dtype: OutDtype, bytes: &[u8]) -> Output {
        Output { dtype, bits: bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect() }
    }

    pub fn len(&self) -> usize {
        self.bits.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    /// Element `i` as an f32 (exact).
    pub fn value(&self, i: usize) -> f32 {
        self.dtype.to_f32(self.bits[i])
    }
}

/// The quiet NaN the reference writes where a NaN scale makes C NaN.
pub fn canonical_nan(out: OutDtype) -> u16 {
    match out {
        OutDtype::F16 => f16::NAN.to_bits(),
        OutDtype::Bf16 => half::bf16::NAN.to_bits(),
    }
}
