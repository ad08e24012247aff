//! Blackwell fifth-generation tensor-core instructions (PTX ISA 9.7.16, `sm_100a`):
//! tensor memory allocation, `tcgen05.cp`, `tcgen05.mma.kind::mxf4nvf4.block_scale`,
//! `tcgen05.commit`, `tcgen05.ld`, `tcgen05.wait::ld` and the tcgen05 fences.
//!
//! API contract with the kernel crate's `ptx::tcgen05` wrappers (every function is
//! `#[track_caller]`). Tensor-memory addresses are 32-bit: lane in bits 31-16, column in
//! bits 15-0. Shared-memory addresses are shared-window addresses (as `cvta.to.shared`).

/// `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], columns;` — warp
/// collective: allocates `columns` (a power of two in 32..=512) tensor-memory columns of
/// all 128 lanes and writes the base address to shared memory at `dst`.
#[track_caller]
pub fn alloc(dst: u32, columns: u32) {
    let _ = (dst, columns);
    unimplemented!("tcgen05.alloc")
}

/// `tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, columns;` — warp collective.
#[track_caller]
pub fn dealloc(taddr: u32, columns: u32) {
    let _ = (taddr, columns);
    unimplemented!("tcgen05.dealloc")
}

/// `tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;` — warp collective.
#[track_caller]
pub fn relinquish_alloc_permit() {
    unimplemented!("tcgen05.relinquish_alloc_permit")
}

/// `tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [d], a_desc, b_desc,
/// idesc, [sfa], [sfb], enable_input_d;` — issued by one thread.
#[track_caller]
pub fn mma_mxf4nvf4_block_scale_4x(
    d: u32,
    a_desc: u64,
    b_desc: u64,
    idesc: u32,
    sfa: u32,
    sfb: u32,
    enable_input_d: bool,
) {
    let _ = (d, a_desc, b_desc, idesc, sfa, sfb, enable_input_d);
    unimplemented!("tcgen05.mma")
}

/// `tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], src_desc;` — issued by one thread.
#[track_caller]
pub fn cp_32x128b_warpx4(taddr: u32, src_desc: u64) {
    let _ = (taddr, src_desc);
    unimplemented!("tcgen05.cp")
}

/// `tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [mbar];` — one
/// arrival on `mbar` once every earlier asynchronous tcgen05 operation of this thread has
/// completed.
#[track_caller]
pub fn commit(mbar: u32) {
    let _ = mbar;
    unimplemented!("tcgen05.commit")
}

/// `tcgen05.ld.sync.aligned.32x32b.x{n}.b32 {r0..}, [taddr];` — warp collective.
///
/// # Safety
/// `regs` must point to `n` u32 registers of the calling thread that stay alive and
/// untouched until this thread's next `wait_ld`.
#[track_caller]
pub unsafe fn ld_32x32b(taddr: u32, regs: *mut u32, n: u32) {
    let _ = (taddr, regs, n);
    unimplemented!("tcgen05.ld")
}

/// `tcgen05.wait::ld.sync.aligned;` — warp collective.
#[track_caller]
pub fn wait_ld() {
    unimplemented!("tcgen05.wait::ld")
}

/// `tcgen05.fence::before_thread_sync;`
#[track_caller]
pub fn fence_before_thread_sync() {
    unimplemented!("tcgen05.fence::before_thread_sync")
}

/// `tcgen05.fence::after_thread_sync;`
#[track_caller]
pub fn fence_after_thread_sync() {
    unimplemented!("tcgen05.fence::after_thread_sync")
}
