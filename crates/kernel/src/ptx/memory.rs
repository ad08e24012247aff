//! Loads and stores (PTX ISA 9.7.9.8 `ld`, 9.7.9.10 `st`) on the global and shared
//! state spaces. Global addresses are the device pointers the host passes in.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

use super::SmemAddr;

/// `ld.global.nc.u8 r, [addr];` — through the read-only (non-coherent) data path.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_global_nc_u8(addr: u64) -> u8 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u16;
        // SAFETY: the caller passes a valid global address (checked under emulation).
        unsafe { asm!("ld.global.nc.u8 {}, [{}];", out(reg16) r, in(reg64) addr, options(pure, readonly, nostack)) };
        r as u8
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_global::<u8>(addr)
    }
}

/// `ld.global.nc.u16 r, [addr];` (2-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_global_nc_u16(addr: u64) -> u16 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u16;
        // SAFETY: as above.
        unsafe { asm!("ld.global.nc.u16 {}, [{}];", out(reg16) r, in(reg64) addr, options(pure, readonly, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_global::<u16>(addr)
    }
}

/// `ld.global.nc.u32 r, [addr];` (4-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_global_nc_u32(addr: u64) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: as above.
        unsafe { asm!("ld.global.nc.u32 {}, [{}];", out(reg32) r, in(reg64) addr, options(pure, readonly, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_global::<u32>(addr)
    }
}

/// `ld.global.nc.u64 r, [addr];` (8-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_global_nc_u64(addr: u64) -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u64;
        // SAFETY: as above.
        unsafe { asm!("ld.global.nc.u64 {}, [{}];", out(reg64) r, in(reg64) addr, options(pure, readonly, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_global::<u64>(addr)
    }
}

/// `st.global.b16 [addr], v;` (2-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn st_global_b16(addr: u64, value: u16) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as above.
    unsafe {
        asm!("st.global.b16 [{}], {};", in(reg64) addr, in(reg16) value, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::memory::st_global::<u16>(addr, value)
}

/// `st.global.b32 [addr], v;` (4-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn st_global_b32(addr: u64, value: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as above.
    unsafe {
        asm!("st.global.b32 [{}], {};", in(reg64) addr, in(reg32) value, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::memory::st_global::<u32>(addr, value)
}

/// `st.global.v4.b32 [addr], {v0, v1, v2, v3};` (16-byte aligned): one 16-byte store.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn st_global_v4_b32(addr: u64, v: [u32; 4]) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as above.
    unsafe {
        asm!(
            "st.global.v4.b32 [{}], {{{}, {}, {}, {}}};",
            in(reg64) addr, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
            options(nostack)
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::memory::st_global::<[u32; 4]>(addr, v)
}

/// `ld.global.cg.v4.b32 {r0, r1, r2, r3}, [addr];` (16-byte aligned) — cached in L2 only,
/// so it sees what other SMs wrote (this SM's L1 is not coherent with theirs).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_global_cg_v4_b32(addr: u64) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: `addr` is a 16-byte aligned global address the kernel may read.
        unsafe {
            asm!(
                "ld.global.cg.v4.b32 {{{}, {}, {}, {}}}, [{}];",
                out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) addr,
                options(nostack, readonly)
            )
        };
        [a, b, c, d]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_global::<[u32; 4]>(addr)
    }
}

/// `ld.global.nc.v4.b32 {r0, r1, r2, r3}, [addr];` (16-byte aligned) — through the
/// read-only (non-coherent) data path, for data no thread writes during the launch.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_global_nc_v4_b32(addr: u64) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: `addr` is a 16-byte aligned global address the kernel may read.
        unsafe {
            asm!(
                "ld.global.nc.v4.b32 {{{}, {}, {}, {}}}, [{}];",
                out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) addr,
                options(pure, readonly, nostack)
            )
        };
        [a, b, c, d]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_global::<[u32; 4]>(addr)
    }
}

/// `ld.global.v4.b32 {r0, r1, r2, r3}, [addr];` (16-byte aligned) — a plain (weak) load:
/// for data a previous grid wrote, read after `griddepcontrol.wait` (which makes that
/// grid's writes visible to this one). Unlike `.cg` (a strong load to ptxas), independent
/// weak loads may all be in flight at once.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_global_v4_b32(addr: u64) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: `addr` is a 16-byte aligned global address the kernel may read.
        unsafe {
            asm!(
                "ld.global.v4.b32 {{{}, {}, {}, {}}}, [{}];",
                out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) addr,
                options(nostack, readonly)
            )
        };
        [a, b, c, d]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_global::<[u32; 4]>(addr)
    }
}

/// `atom.acq_rel.gpu.global.add.u32 old, [addr], v;` — adds `v` atomically and returns
/// the old value; releases this thread's earlier writes to, and acquires later reads from,
/// every thread of the GPU that synchronises on the same address.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn atom_add_acq_rel_gpu_u32(addr: u64, v: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let old: u32;
        // SAFETY: `addr` is a 4-byte aligned global address the kernel owns.
        unsafe {
            asm!("atom.acq_rel.gpu.global.add.u32 {}, [{}], {};", out(reg32) old, in(reg64) addr, in(reg32) v, options(nostack))
        };
        old
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::atom_add_global_u32(addr, v)
    }
}

/// `ld.shared.b32 r, [addr];`
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_shared_b32(addr: SmemAddr) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: the caller passes a shared-window address inside the CTA's allocation.
        unsafe { asm!("ld.shared.b32 {}, [{}];", out(reg32) r, in(reg32) addr.0, options(readonly, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_shared::<u32>(addr.0)
    }
}

/// `ld.shared.v4.b32 {r0, r1, r2, r3}, [addr];` (16-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_shared_v4_b32(addr: SmemAddr) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: as above.
        unsafe {
            asm!(
                "ld.shared.v4.b32 {{{}, {}, {}, {}}}, [{}];",
                out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg32) addr.0,
                options(readonly, nostack)
            )
        };
        [a, b, c, d]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_shared::<[u32; 4]>(addr.0)
    }
}

/// `ld.shared.v2.b32 {r0, r1}, [addr];` (8-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ld_shared_v2_b32(addr: SmemAddr) -> [u32; 2] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b): (u32, u32);
        // SAFETY: as above.
        unsafe {
            asm!(
                "ld.shared.v2.b32 {{{}, {}}}, [{}];",
                out(reg32) a, out(reg32) b, in(reg32) addr.0,
                options(readonly, nostack)
            )
        };
        [a, b]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::memory::ld_shared::<[u32; 2]>(addr.0)
    }
}

/// `st.shared.b16 [addr], v;` (2-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn st_shared_b16(addr: SmemAddr, value: u16) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as above.
    unsafe {
        asm!("st.shared.b16 [{}], {};", in(reg32) addr.0, in(reg16) value, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::memory::st_shared::<u16>(addr.0, value)
}

/// `st.shared.b32 [addr], v;` (4-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn st_shared_b32(addr: SmemAddr, value: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as above.
    unsafe {
        asm!("st.shared.b32 [{}], {};", in(reg32) addr.0, in(reg32) value, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::memory::st_shared::<u32>(addr.0, value)
}

/// `st.shared.v4.b32 [addr], {v0, v1, v2, v3};` (16-byte aligned).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn st_shared_v4_b32(addr: SmemAddr, v: [u32; 4]) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as above.
    unsafe {
        asm!(
            "st.shared.v4.b32 [{}], {{{}, {}, {}, {}}};",
            in(reg32) addr.0, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
            options(nostack)
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::memory::st_shared::<[u32; 4]>(addr.0, v)
}
