//! One GEMM problem's inputs, held on the host in exactly the layouts the kernels read.

use nvfp4::Shape;

/// The inputs of C = A * B^T for every batch, as the kernels consume them.
#[derive(Clone, Debug)]
pub struct Problem {
    pub shape: Shape,
    /// A, packed e2m1, [L][M][K/2] (low nibble = even k).
    pub a: Vec<u8>,
    /// B, packed e2m1, [L][N][K/2].
    pub b: Vec<u8>,
    /// SFA, e4m3 bits in the blocked layout, L batches of `layout::batch_bytes(M, K/16)`.
    pub sfa: Vec<u8>,
    /// SFB, e4m3 bits in the blocked layout, L batches of `layout::batch_bytes(N, K/16)`.
    pub sfb: Vec<u8>,
}
