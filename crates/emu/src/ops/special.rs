//! Special registers (PTX ISA 10): `%tid`, `%ntid`, `%ctaid`, `%nctaid`, `%laneid`.

use super::{count, current};

fn xyz(linear: u32, ntid: [u32; 3]) -> [u32; 3] {
    [linear % ntid[0], (linear / ntid[0]) % ntid[1], linear / (ntid[0] * ntid[1])]
}

/// `%tid`: the thread's index in its CTA, (x, y, z).
#[track_caller]
pub fn tid() -> [u32; 3] {
    let (cta, me) = current("mov %tid");
    count("mov.special");
    xyz(me, cta.ntid)
}

/// `%ntid`: the CTA's dimensions.
#[track_caller]
pub fn ntid() -> [u32; 3] {
    count("mov.special");
    current("mov %ntid").0.ntid
}

/// `%ctaid`: the CTA's index in the grid.
#[track_caller]
pub fn ctaid() -> [u32; 3] {
    count("mov.special");
    current("mov %ctaid").0.ctaid
}

/// `%nctaid`: the grid's dimensions.
#[track_caller]
pub fn nctaid() -> [u32; 3] {
    count("mov.special");
    current("mov %nctaid").0.nctaid
}

/// `%laneid`: the thread's lane in its warp.
#[track_caller]
pub fn laneid() -> u32 {
    count("mov.special");
    current("mov %laneid").1 % crate::cta::WARP
}

/// `%warpid`: on hardware the warp's slot on its SM, which may change during execution
/// and is meant for profiling only; the emulator returns the warp's index in its CTA
/// (linear thread index / 32), one value the hardware may give. Kernels that need their
/// warp index compute it from `%tid`.
#[track_caller]
pub fn warpid() -> u32 {
    count("mov.special");
    current("mov %warpid").1 / crate::cta::WARP
}

/// The shared-window address of the dynamic shared memory (`DYN_SMEM` in the kernel).
#[track_caller]
pub fn dynamic_smem_base() -> u32 {
    count("mov.special");
    let (cta, _) = current("mov DYN_SMEM");
    cta.lock().smem.base
}

/// `%dynamic_smem_size`.
#[track_caller]
pub fn dynamic_smem_size() -> u32 {
    count("mov.special");
    let (cta, _) = current("mov %dynamic_smem_size");
    cta.lock().smem.bytes.len() as u32
}
