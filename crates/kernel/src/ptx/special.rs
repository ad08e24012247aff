//! Special registers (PTX ISA 10: `%tid`, `%ctaid`, `%nctaid`, `%ntid`) and the
//! dynamic shared memory base.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

use super::SmemAddr;

macro_rules! special_register {
    ($(#[$doc:meta])* $name:ident, $reg:literal, $emu:ident, $index:literal) => {
        $(#[$doc])*
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub fn $name() -> u32 {
            #[cfg(target_arch = "nvptx64")]
            {
                let r: u32;
                // SAFETY: reads a special register.
                unsafe { asm!(concat!("mov.u32 {}, ", $reg, ";"), out(reg32) r, options(pure, nomem, nostack)) };
                r
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                emu::ops::special::$emu()[$index]
            }
        }
    };
}

special_register!(/// `mov.u32 r, %tid.x;` — thread index in the CTA (x).
    tid_x, "%tid.x", tid, 0);
special_register!(/// `mov.u32 r, %ntid.x;` — threads per CTA (x).
    ntid_x, "%ntid.x", ntid, 0);
special_register!(/// `mov.u32 r, %ctaid.x;`
    ctaid_x, "%ctaid.x", ctaid, 0);
special_register!(/// `mov.u32 r, %ctaid.y;`
    ctaid_y, "%ctaid.y", ctaid, 1);
special_register!(/// `mov.u32 r, %ctaid.z;`
    ctaid_z, "%ctaid.z", ctaid, 2);
special_register!(/// `mov.u32 r, %nctaid.x;`
    nctaid_x, "%nctaid.x", nctaid, 0);
special_register!(/// `mov.u32 r, %nctaid.y;`
    nctaid_y, "%nctaid.y", nctaid, 1);
special_register!(/// `mov.u32 r, %nctaid.z;`
    nctaid_z, "%nctaid.z", nctaid, 2);

/// `mov.u32 r, DYN_SMEM;` — the shared-window address of the dynamic shared memory
/// (0x400 on sm_90 for a kernel without static shared variables: the first KiB of the
/// window is reserved).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn dynamic_smem() -> SmemAddr {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: reads the address of a module-level symbol.
        unsafe { asm!("mov.u32 {}, DYN_SMEM;", out(reg32) r, options(pure, nomem, nostack)) };
        SmemAddr(r)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        SmemAddr(emu::ops::special::dynamic_smem_base())
    }
}
