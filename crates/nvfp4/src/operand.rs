//! The format of the A operand (the activations): NVFP4 like B, or 16-bit values (W4A16).
//!
//! W4A16 is how Hopper serves NVFP4 checkpoints: the weights (B) stay NVFP4 and the
//! activations (A) come as fp16 or bf16 values, `[L][M][K]` row-major, with no scales. An
//! e2m1 value times an e4m3 scale has at most 6 significant bits, so the weights are exact
//! in fp16 and in bf16, and the products with 16-bit activations are exact in fp32.

/// How A is stored; the code is what a kernel receives (`GemmArgs::a_format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum AFormat {
    /// Packed e2m1 `[L][M][K/2]` with blocked e4m3 scales (SFA).
    #[default]
    Nvfp4 = 0,
    /// fp16 `[L][M][K]`; SFA unused.
    F16 = 1,
    /// bf16 `[L][M][K]`; SFA unused.
    Bf16 = 2,
}

impl AFormat {
    pub const fn code(self) -> u32 {
        self as u32
    }

    pub const fn from_code(code: u32) -> Option<AFormat> {
        match code {
            0 => Some(AFormat::Nvfp4),
            1 => Some(AFormat::F16),
            2 => Some(AFormat::Bf16),
            _ => None,
        }
    }

    /// Bytes of A for `l` batches of `m` rows of `k` values.
    pub const fn a_bytes(self, m: u32, k: u32, l: u32) -> u64 {
        let values = l as u64 * m as u64 * k as u64;
        match self {
            AFormat::Nvfp4 => values / 2,
            AFormat::F16 | AFormat::Bf16 => values * 2,
        }
    }

    /// 16-bit activations (W4A16), fp16 or bf16.
    pub const fn is_16bit(self) -> bool {
        !matches!(self, AFormat::Nvfp4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_sizes() {
        for f in [AFormat::Nvfp4, AFormat::F16, AFormat::Bf16] {
            assert_eq!(AFormat::from_code(f.code()), Some(f));
        }
        assert_eq!(AFormat::from_code(3), None);
        assert_eq!(AFormat::Bf16.a_bytes(3, 64, 2), 768);
        assert_eq!(AFormat::Nvfp4.a_bytes(3, 64, 2), 192);
        assert_eq!(AFormat::F16.a_bytes(3, 64, 2), 768);
    }
}
