//! Blackwell's fifth-generation tensor cores (PTX ISA 9.7.16, `sm_100a`, PTX 8.7).
//!
//! The tensor core owns a private memory per CTA, *tensor memory* (TMEM): 128 lanes x 512
//! columns of 32-bit cells. A kernel allocates columns of it (`alloc`, one warp), copies
//! scale factors into it from shared memory (`cp`), lets `mma` accumulate into it, and
//! reads the accumulator back into registers (`ld`, then `wait_ld`).
//!
//! `cp`, `mma` and `commit` are issued by a single thread and run asynchronously; a
//! thread's `cp`s and `mma`s execute in issue order, and `commit` arrives on an mbarrier
//! once all of that thread's earlier ones have completed (PTX ISA 9.7.16.6). Around any
//! thread synchronisation (mbarrier wait, `bar.sync`) that orders tcgen05 work between
//! threads, `fence_before_thread_sync` goes before the signal and
//! `fence_after_thread_sync` after the wait.
//!
//! Every instruction here uses `.cta_group::1`: a kernel may not mix `::1` and `::2`.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

use nvfp4::sm100::{InstrDesc, SmemDesc};

use super::SmemAddr;
use super::mbarrier::Mbarrier;

/// A tensor-memory address: lane in bits 31-16, column in bits 15-0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct TmemAddr(pub u32);

impl TmemAddr {
    /// The address `columns` columns further right.
    #[inline(always)]
    pub const fn column(self, columns: u32) -> TmemAddr {
        TmemAddr(self.0 + columns)
    }

    /// The address `lanes` lanes further down.
    #[inline(always)]
    pub const fn lane(self, lanes: u32) -> TmemAddr {
        TmemAddr(self.0 + (lanes << 16))
    }
}

/// `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], columns;` — allocates
/// `columns` columns (a power of two in 32..=512) of all 128 lanes and writes their base
/// address to shared memory at `dst`. Warp collective (all 32 lanes, one warp per CTA);
/// blocks while the columns are held by another CTA on the SM.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn alloc(dst: SmemAddr, columns: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warp-collective; `dst` is a 4-byte shared slot the kernel reserved.
    unsafe {
        asm!("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{}], {};", in(reg32) dst.0, in(reg32) columns, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::tcgen05::alloc(dst.0, columns)
}

/// `tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, columns;` — frees what `alloc`
/// gave. Warp collective; every allocation must be freed before the CTA exits.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn dealloc(taddr: TmemAddr, columns: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warp-collective; frees an allocation of this CTA.
    unsafe {
        asm!("tcgen05.dealloc.cta_group::1.sync.aligned.b32 {}, {};", in(reg32) taddr.0, in(reg32) columns, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::tcgen05::dealloc(taddr.0, columns)
}

/// `tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;` — this CTA will allocate
/// no more, so a CTA waiting for columns on the same SM may proceed. Warp collective.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn relinquish_alloc_permit() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warp-collective, no operands.
    unsafe {
        asm!("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::tcgen05::relinquish_alloc_permit()
}

/// `tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [d], a, b, idesc,
/// [sfa], [sfb], p;` — D[M x N] (+)= (A·SFA)[M x 64] · (B·SFB)[N x 64]ᵀ in f32, A and B
/// packed e2m1 in shared memory (K-major), one ue4m3 scale per 16 values read from tensor
/// memory at `sfa` / `sfb`. `accumulate` false overwrites D (tensor memory starts as
/// garbage: the first MMA of a tile must pass false).
///
/// Issued by one thread; asynchronous: the shared memory it reads and the tensor memory
/// it reads or writes belong to it until a `commit` by the same thread has arrived.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mma_mxf4nvf4_block_scale_4x(
    d: TmemAddr,
    a: SmemDesc,
    b: SmemDesc,
    idesc: InstrDesc,
    sfa: TmemAddr,
    sfb: TmemAddr,
    accumulate: bool,
) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: single-thread issue; the operands are this CTA's shared and tensor memory.
    unsafe {
        asm!(
            "{{",
            ".reg .pred p;",
            "setp.ne.b32 p, {acc}, 0;",
            "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [{d}], {a}, {b}, {idesc}, [{sfa}], [{sfb}], p;",
            "}}",
            acc = in(reg32) accumulate as u32,
            d = in(reg32) d.0,
            a = in(reg64) a.0,
            b = in(reg64) b.0,
            idesc = in(reg32) idesc.0,
            sfa = in(reg32) sfa.0,
            sfb = in(reg32) sfb.0,
            options(nostack)
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::tcgen05::mma_mxf4nvf4_block_scale_4x(d.0, a.0, b.0, idesc.0, sfa.0, sfb.0, accumulate)
}

/// `tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], src;` — copies 32 rows x 16 bytes
/// (512 B) from shared memory into tensor memory: source row r lands in lane r of each
/// of the four 32-lane quarters (`.warpx4` replicates it), 4 columns from `taddr`.
/// Exactly one blocked scale tile (128 rows x 4 scales). Issued by one thread;
/// asynchronous, ordered before later `mma`s of the same thread.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn cp_32x128b_warpx4(taddr: TmemAddr, src: SmemDesc) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: single-thread issue; `src` describes 512 bytes of this CTA's shared memory.
    unsafe {
        asm!("tcgen05.cp.cta_group::1.32x128b.warpx4 [{}], {};", in(reg32) taddr.0, in(reg64) src.0, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::tcgen05::cp_32x128b_warpx4(taddr.0, src.0)
}

/// `tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];` — one
/// arrival on `bar` once every earlier `cp` and `mma` of this thread has completed
/// (implies `fence_before_thread_sync`). Must be issued by the thread that issued them.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn commit(bar: Mbarrier) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: `bar` is an initialised mbarrier of this CTA (a shared::cta address is a
    // valid shared::cluster address of the executing CTA).
    unsafe {
        asm!("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [{}];", in(reg32) bar.0.0, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::tcgen05::commit(bar.0.0)
}

/// `tcgen05.ld.sync.aligned.32x32b.x32.b32 {r0..r31}, [taddr];` — thread t of the warp
/// receives lane `taddr.lane + t`, register i column `taddr.col + i`. Warp collective;
/// warp w may only read lanes 32·(w%4) .. 32·(w%4)+31. Asynchronous: `regs` is valid only
/// after [`wait_ld`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_32x32b_x32(taddr: TmemAddr, regs: &mut [u32; 32]) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warp-collective read of this CTA's tensor memory into registers.
    unsafe {
        asm!(
            concat!(
                "tcgen05.ld.sync.aligned.32x32b.x32.b32 {{",
                super::operand_list!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31),
                "}}, [{32}];"
            ),
            out(reg32) regs[0], out(reg32) regs[1], out(reg32) regs[2], out(reg32) regs[3],
            out(reg32) regs[4], out(reg32) regs[5], out(reg32) regs[6], out(reg32) regs[7],
            out(reg32) regs[8], out(reg32) regs[9], out(reg32) regs[10], out(reg32) regs[11],
            out(reg32) regs[12], out(reg32) regs[13], out(reg32) regs[14], out(reg32) regs[15],
            out(reg32) regs[16], out(reg32) regs[17], out(reg32) regs[18], out(reg32) regs[19],
            out(reg32) regs[20], out(reg32) regs[21], out(reg32) regs[22], out(reg32) regs[23],
            out(reg32) regs[24], out(reg32) regs[25], out(reg32) regs[26], out(reg32) regs[27],
            out(reg32) regs[28], out(reg32) regs[29], out(reg32) regs[30], out(reg32) regs[31],
            in(reg32) taddr.0,
            options(nostack)
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: `regs` is a live array of 32 registers that only `wait_ld` completes.
    unsafe {
        emu::ops::tcgen05::ld_32x32b(taddr.0, regs.as_mut_ptr(), 32)
    }
}

/// `tcgen05.wait::ld.sync.aligned;` — waits until this thread's earlier `ld`s have
/// delivered. `regs` names the registers they deliver into, so the compiler keeps every
/// use of them below this point (it emits no instruction for that). Warp collective.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn wait_ld(regs: &mut [u32; 32]) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warp-collective wait; the register operands only constrain the compiler.
    unsafe {
        asm!(
            concat!(
                "tcgen05.wait::ld.sync.aligned; // ",
                super::operand_list!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
            ),
            inout(reg32) regs[0], inout(reg32) regs[1], inout(reg32) regs[2], inout(reg32) regs[3],
            inout(reg32) regs[4], inout(reg32) regs[5], inout(reg32) regs[6], inout(reg32) regs[7],
            inout(reg32) regs[8], inout(reg32) regs[9], inout(reg32) regs[10], inout(reg32) regs[11],
            inout(reg32) regs[12], inout(reg32) regs[13], inout(reg32) regs[14], inout(reg32) regs[15],
            inout(reg32) regs[16], inout(reg32) regs[17], inout(reg32) regs[18], inout(reg32) regs[19],
            inout(reg32) regs[20], inout(reg32) regs[21], inout(reg32) regs[22], inout(reg32) regs[23],
            inout(reg32) regs[24], inout(reg32) regs[25], inout(reg32) regs[26], inout(reg32) regs[27],
            inout(reg32) regs[28], inout(reg32) regs[29], inout(reg32) regs[30], inout(reg32) regs[31],
            options(nostack)
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::tcgen05::wait_ld();
        core::hint::black_box(regs);
    }
}

/// `tcgen05.fence::before_thread_sync;` — orders this thread's earlier tcgen05 operations
/// before a following synchronisation (arrive, `bar.sync`).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn fence_before_thread_sync() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        asm!("tcgen05.fence::before_thread_sync;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::tcgen05::fence_before_thread_sync()
}

/// `tcgen05.fence::after_thread_sync;` — orders this thread's later tcgen05 operations
/// after a preceding synchronisation (mbarrier wait, `bar.sync`).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn fence_after_thread_sync() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        asm!("tcgen05.fence::after_thread_sync;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::tcgen05::fence_after_thread_sync()
}
