//! Every rule the emulator enforces, provoked on purpose: each test breaks one rule in a
//! tiny kernel and checks the report's kind, its message, and that it names the kernel's
//! source line (the `location`, captured through `#[track_caller]`, must be this file and
//! the line of the offending instruction).
//!
//! Kernels record the line of the instruction that must be blamed with [`Line::next`]
//! just before it, so the tests do not depend on line numbers.

use emu::model::tensor_map::{OobFill, TmaSwizzle};
use emu::ops::{barrier, bulk, cp_async, fence, mbarrier, memory, special, warp, wgmma};
use emu::{ErrorKind, GlobalMemory, LaunchConfig, TensorMap};

mod common;
use common::*;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Thread 0 initialises an mbarrier of `count` at `bar` (fenced for the async proxy when
/// `fenced`), then the whole CTA synchronises.
#[track_caller]
fn init_mbarrier(bar: u32, count: u32, fenced: bool) {
    if tid() == 0 {
        mbarrier::init(bar, count);
        if fenced {
            fence::mbarrier_init();
        }
    }
    barrier::sync_all(0);
}

/// sm_90 wgmma descriptor of a K-major 128B-swizzled operand (SBO 1024, LBO 16).
fn desc_sw128(addr: u32) -> u64 {
    ((addr as u64 >> 4) & 0x3FFF) | (1 << 16) | ((1024u64 >> 4) << 32) | (1 << 62)
}

/// Byte offset of byte `byte` of row `row` in a 1024-aligned 128B-swizzled tile.
fn sw128_byte(row: u32, byte: u32) -> u32 {
    (row / 8) * 1024 + (row % 8) * 128 + (((byte / 16) ^ (row % 8)) * 16) + byte % 16
}

/// Shared layout of the wgmma tests: A (64 x k16, 128B swizzle) at the base, B (8 rows)
/// 8 KiB above it.
const WGMMA_SMEM: u32 = 8 * 1024 + 1024;
fn a_tile() -> u32 {
    smem()
}
fn b_tile() -> u32 {
    smem() + 8 * 1024
}

/// The operands of an SS m64n8k16 on the standard tiles.
fn ss(acc: *mut f32) -> wgmma::MmaArgs {
    wgmma::MmaArgs {
        accumulators: acc,
        n: 8,
        a: desc_sw128(a_tile()),
        desc_b: desc_sw128(b_tile()),
        accumulate: false,
        negate_a: false,
        negate_b: false,
        a_in_registers: false,
        inputs: Default::default(),
    }
}

// ---------------------------------------------------------------------------------------
// a. Out-of-bounds and misaligned accesses
// ---------------------------------------------------------------------------------------

/// A shared load below the dynamic base (0x400, the system-reserved first KiB) is out of
/// bounds.
#[test]
fn shared_load_below_the_dynamic_base() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, 256, || {
        line.next();
        memory::ld_shared::<u32>(0x3FC);
    });
    expect(&e, ErrorKind::OutOfBounds, &["0x3fc", "outside the CTA's shared memory [0x400, 0x500)"]);
    assert_eq!((e.instruction, e.thread), ("ld.shared", Some(0)));
    line.assert_blamed(&e);
}

/// A shared store past the end of dynamic shared memory is out of bounds, also when only
/// its last bytes are.
#[test]
fn shared_store_past_the_end() {
    for (offset, needle) in [(256, "4 bytes at shared address 0x500"), (254, "4 bytes at shared address 0x4fe")] {
        let line = Line::default();
        let e = report(&GlobalMemory::new(), 32, 256, || {
            if tid() == 3 {
                line.next();
                memory::st_shared::<u32>(smem() + offset, 1);
            }
        });
        expect(&e, ErrorKind::OutOfBounds, &[needle, "outside the CTA's shared memory"]);
        assert_eq!((e.instruction, e.thread), ("st.shared", Some(3)));
        line.assert_blamed(&e);
    }
}

/// Shared accesses must be aligned to their size (up to 16 bytes).
#[test]
fn shared_access_misaligned() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, 256, || {
        line.next();
        memory::ld_shared::<u64>(smem() + 4);
    });
    expect(&e, ErrorKind::OutOfBounds, &["shared address 0x404 is not 8-byte aligned"]);
    line.assert_blamed(&e);

    let e = report(&GlobalMemory::new(), 32, 256, || {
        line.next();
        memory::st_shared::<[u32; 4]>(smem() + 8, [0; 4]);
    });
    expect(&e, ErrorKind::OutOfBounds, &["shared address 0x408 is not 16-byte aligned"]);
    line.assert_blamed(&e);
}

/// A global load that runs past the end of its allocation names the allocation and by
/// how much it overruns.
#[test]
fn global_load_past_an_allocation_end() {
    let gm = GlobalMemory::new();
    let p = gm.alloc("weights", 20);
    let line = Line::default();
    let e = report(&gm, 32, 0, || {
        line.next();
        memory::ld_global::<u64>(p + 16);
    });
    let needle = format!("8 bytes at {:#x} run past the end of `weights` (20 bytes at {p:#x}) by 4 bytes", p + 16);
    expect(&e, ErrorKind::OutOfBounds, &[&needle]);
    assert_eq!(e.instruction, "ld.global");
    line.assert_blamed(&e);
}

/// A global access to an address in no allocation (here: a freed one, and one near null)
/// is out of bounds.
#[test]
fn global_access_in_no_allocation() {
    let gm = GlobalMemory::new();
    let p = gm.alloc("scratch", 64);
    gm.free(p).unwrap();
    for addr in [p, 0x1000] {
        let line = Line::default();
        let e = report(&gm, 32, 0, || {
            line.next();
            memory::st_global::<u32>(addr, 7);
        });
        expect(&e, ErrorKind::OutOfBounds, &[&format!("4 bytes at {addr:#x} are in no global allocation")]);
        assert_eq!(e.instruction, "st.global");
        line.assert_blamed(&e);
    }
}

/// Global accesses must be aligned to their size.
#[test]
fn global_access_misaligned() {
    let gm = GlobalMemory::new();
    let p = gm.alloc("buf", 64);
    let line = Line::default();
    let e = report(&gm, 32, 0, || {
        line.next();
        memory::ld_global::<u32>(p + 2);
    });
    expect(&e, ErrorKind::OutOfBounds, &[&format!("global address {:#x} is not 4-byte aligned", p + 2)]);
    line.assert_blamed(&e);
}

// ---------------------------------------------------------------------------------------
// b. Shared memory owned by a pending asynchronous copy
// ---------------------------------------------------------------------------------------

/// Reading the destination of a cp.async with no wait reads bytes the copy still owns.
#[test]
fn read_of_a_pending_cp_async_destination() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[1; 16]);
    let line = Line::default();
    let e = report(&gm, 32, 64, || {
        if tid() == 0 {
            cp_async::copy(smem() + 16, src, 16, 16);
            cp_async::commit_group();
            line.next();
            memory::ld_shared::<u32>(smem() + 20);
        }
    });
    expect(&e, ErrorKind::AsyncOwned, &["reads shared byte 0x414", "still pending"]);
    assert_eq!(e.thread, Some(0));
    line.assert_blamed(&e);
}

/// After cp.async.wait_group(1) the newest group is still pending: reading it is reported.
#[test]
fn read_of_a_group_that_wait_group_left_pending() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[1; 32]);
    let line = Line::default();
    let e = report(&gm, 32, 64, || {
        if tid() == 0 {
            cp_async::copy(smem(), src, 16, 16);
            cp_async::commit_group();
            cp_async::copy(smem() + 16, src + 16, 16, 16);
            cp_async::commit_group();
            cp_async::wait_group(1);
            memory::ld_shared::<[u32; 4]>(smem());
            line.next();
            memory::ld_shared::<[u32; 4]>(smem() + 16);
        }
    });
    expect(&e, ErrorKind::AsyncOwned, &["reads shared byte 0x410"]);
    line.assert_blamed(&e);
}

/// Writing a byte a pending cp.async will write is reported too (another thread's copy).
#[test]
fn write_into_a_pending_cp_async_destination() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[1; 16]);
    let line = Line::default();
    let e = report(&gm, 64, 64, || {
        if tid() == 0 {
            cp_async::copy(smem(), src, 16, 16);
        }
        barrier::sync_all(0);
        if tid() == 40 {
            line.next();
            memory::st_shared::<u8>(smem() + 15, 0);
        }
        barrier::sync_all(0);
        if tid() == 0 {
            cp_async::wait_all();
        }
    });
    expect(&e, ErrorKind::AsyncOwned, &["writes shared byte 0x40f"]);
    assert_eq!(e.thread, Some(40));
    line.assert_blamed(&e);
}

/// Reading the destination of a bulk copy before waiting on its mbarrier reads bytes the
/// copy still owns. (Only the issuing thread reads: another thread's read, unordered with
/// the copy, would be a data race, reported as such when the copy is issued after it.)
#[test]
fn read_of_a_pending_bulk_copy_destination() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[3; 64]);
    let line = Line::default();
    let e = report(&gm, 32, 128, || {
        let (bar, dst) = (smem(), smem() + 64);
        init_mbarrier(bar, 1, true);
        if tid() == 0 {
            mbarrier::arrive_expect_tx(bar, 64);
            bulk::global_to_shared(dst, src, 64, bar);
            line.next();
            let _ = memory::ld_shared::<u64>(dst);
        }
        mbarrier::try_wait_parity(bar, 0);
    });
    expect(&e, ErrorKind::AsyncOwned, &["reads shared byte 0x440", "still pending"]);
    line.assert_blamed(&e);
}

// ---------------------------------------------------------------------------------------
// c. mbarrier misuse
// ---------------------------------------------------------------------------------------

/// More arrivals than the init count in one phase: the phase of a count-1 barrier already
/// has its arrival and waits for transaction bytes, so a second arrival is one too many.
#[test]
fn more_arrivals_than_the_count() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, 64, || {
        if tid() == 0 {
            mbarrier::init(smem(), 1);
            mbarrier::arrive_expect_tx(smem(), 64);
            line.next();
            mbarrier::arrive(smem());
        }
    });
    expect(
        &e,
        ErrorKind::Mbarrier,
        &["mbarrier 0x400", "only 0 of its 1 arrivals left", "more arrivals than the init count"],
    );
    line.assert_blamed(&e);
}

/// Surplus arrivals roll into the next phase, which is then left incomplete at exit:
/// 40 arrivals on a count-32 barrier leave phase 1 short of 24.
#[test]
fn surplus_arrivals_leave_the_next_phase_open() {
    let init = Line::default();
    let e = report(&GlobalMemory::new(), 64, 64, || {
        if tid() == 0 {
            init.next();
            mbarrier::init(smem(), 32);
        }
        barrier::sync_all(0);
        if tid() < 40 {
            mbarrier::arrive(smem());
        }
    });
    expect(&e, ErrorKind::Mbarrier, &["mbarrier 0x400", &init.at(), "ended mid-phase: 24 of 32 arrivals missing"]);
}

/// Fewer arrivals than the count: the phase is left incomplete when the CTA exits, and
/// the report names the barrier's init line.
#[test]
fn missing_arrivals_leave_a_phase_open_at_exit() {
    let init = Line::default();
    let e = report(&GlobalMemory::new(), 32, 64, || {
        if tid() == 0 {
            init.next();
            mbarrier::init(smem() + 8, 32);
        }
        barrier::sync_all(0);
        if tid() < 16 {
            mbarrier::arrive(smem() + 8);
        }
    });
    expect(&e, ErrorKind::Mbarrier, &["mbarrier 0x408", &init.at(), "16 of 32 arrivals missing", "tx-count 0"]);
}

/// Transaction bytes that never balance: expect_tx 512 but the copy delivers 256. The
/// waiting threads deadlock and the report shows the tx-count still owed.
#[test]
fn tx_bytes_that_never_balance_deadlock() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[9; 256]);
    let wait = Line::default();
    let e = report(&gm, 32, 512, || {
        let bar = smem();
        init_mbarrier(bar, 1, true);
        if tid() == 0 {
            mbarrier::arrive_expect_tx(bar, 512);
            bulk::global_to_shared(smem() + 256, src, 256, bar);
        }
        wait.next();
        mbarrier::try_wait_parity(bar, 0);
    });
    expect(
        &e,
        ErrorKind::Deadlock,
        &["threads 0-31 wait at", "mbarrier 0x400 for parity 0", "tx-count 256", &wait.at()],
    );
}

/// A CTA that exits with a bulk copy nobody waited for (its data would land after exit).
#[test]
fn bulk_copy_never_waited_for() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[9; 256]);
    let copy = Line::default();
    let e = report(&gm, 32, 512, || {
        init_mbarrier(smem(), 1, true);
        if tid() == 0 {
            mbarrier::arrive_expect_tx(smem(), 256);
            copy.next();
            bulk::global_to_shared(smem() + 256, src, 256, smem());
        }
    });
    expect(&e, ErrorKind::Mbarrier, &["exited with a bulk copy into 0x500 never waited for", &copy.at()]);
}

/// A bulk copy (async proxy) signalling an mbarrier whose init was never fenced with
/// fence.mbarrier_init / fence.proxy.async; the report blames the copy and names the init.
#[test]
fn bulk_copy_on_an_unfenced_mbarrier_init() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[1; 64]);
    let (init, copy) = (Line::default(), Line::default());
    let e = report(&gm, 32, 128, || {
        let bar = smem();
        if tid() == 0 {
            init.next();
            mbarrier::init(bar, 1);
            mbarrier::arrive_expect_tx(bar, 64);
            copy.next();
            bulk::global_to_shared(smem() + 64, src, 64, bar);
        }
        barrier::sync_all(0);
        mbarrier::try_wait_parity(bar, 0);
    });
    expect(
        &e,
        ErrorKind::Mbarrier,
        &["signals mbarrier 0x400", &format!("whose init ({})", init.at()), "never fenced"],
    );
    assert_eq!(e.thread, Some(0));
    copy.assert_blamed(&e);
}

/// Generic loads and stores of an mbarrier object's bytes are reported.
#[test]
fn generic_access_to_an_mbarrier_object() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, 64, || {
        init_mbarrier(smem() + 8, 1, false);
        line.next();
        memory::ld_shared::<u32>(smem() + 12);
    });
    expect(&e, ErrorKind::Mbarrier, &["generic load of 0x40c reads an mbarrier object"]);
    line.assert_blamed(&e);

    let e = report(&GlobalMemory::new(), 32, 64, || {
        init_mbarrier(smem() + 8, 1, false);
        line.next();
        memory::st_shared::<[u32; 4]>(smem(), [0; 4]);
    });
    expect(&e, ErrorKind::Mbarrier, &["generic store to 0x400 overwrites an mbarrier object"]);
    line.assert_blamed(&e);
}

/// Waiting on an address where no mbarrier was initialised.
#[test]
fn wait_on_an_uninitialised_mbarrier() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, 64, || {
        line.next();
        mbarrier::try_wait_parity(smem() + 16, 0);
    });
    expect(&e, ErrorKind::Mbarrier, &["no mbarrier was initialised at shared address 0x410"]);
    line.assert_blamed(&e);
}

/// A bulk copy whose destination covers the mbarrier it signals would overwrite the
/// barrier object (the async-proxy counterpart of a generic store over an mbarrier).
#[test]
fn bulk_copy_over_an_mbarrier_object() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[0; 64]);
    let copy = Line::default();
    let e = report(&gm, 32, 128, || {
        let bar = smem() + 16;
        init_mbarrier(bar, 1, true);
        if tid() == 0 {
            mbarrier::arrive_expect_tx(bar, 64);
            copy.next();
            bulk::global_to_shared(smem(), src, 64, bar);
        }
        mbarrier::try_wait_parity(bar, 0);
    });
    expect(&e, ErrorKind::Mbarrier, &["mbarrier"]);
    copy.assert_blamed(&e);
}

// ---------------------------------------------------------------------------------------
// d. wgmma misuse
// ---------------------------------------------------------------------------------------

/// A B descriptor whose tile starts at the end of shared memory leaves it.
#[test]
fn wgmma_descriptor_leaving_shared_memory() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let mut acc = [0f32; 4];
        wgmma::fence();
        let args = wgmma::MmaArgs { desc_b: desc_sw128(smem() + WGMMA_SMEM), ..ss(acc.as_mut_ptr()) };
        line.next();
        unsafe { wgmma::mma_async(args) };
        wgmma::commit_group();
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::Wgmma, &["B descriptor", "leaves shared memory at row 0", "0x2800"]);
    line.assert_blamed(&e);
}

/// A descriptor with bit 46 set (the fixed 0b001 of sm_100 tcgen05 descriptors) is not
/// an sm_90 wgmma descriptor.
#[test]
fn wgmma_descriptor_with_the_sm100_bit_46() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let mut acc = [0f32; 4];
        wgmma::fence();
        let args = wgmma::MmaArgs { a: desc_sw128(a_tile()) | 1 << 46, ..ss(acc.as_mut_ptr()) };
        line.next();
        unsafe { wgmma::mma_async(args) };
        wgmma::commit_group();
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::Wgmma, &["A descriptor", "reserved bits 46-48", "sm_100"]);
    line.assert_blamed(&e);
}

/// mma_async without a wgmma.fence before it (here: none at all).
#[test]
fn wgmma_without_a_fence() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let mut acc = [0f32; 4];
        line.next();
        unsafe { wgmma::mma_async(ss(acc.as_mut_ptr())) };
        wgmma::commit_group();
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::Wgmma, &["thread 0 issues wgmma.mma_async without a wgmma.fence"]);
    line.assert_blamed(&e);
}

/// After a wait_group the accumulators are accessible again, so the next mma_async needs
/// a new wgmma.fence.
#[test]
fn wgmma_after_a_wait_needs_a_new_fence() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let mut acc = [0f32; 4];
        let p = acc.as_mut_ptr();
        wgmma::fence();
        unsafe { wgmma::mma_async(ss(p)) };
        wgmma::commit_group();
        wgmma::wait_group(0);
        line.next();
        unsafe { wgmma::mma_async(ss(p)) };
        wgmma::commit_group();
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::Wgmma, &["without a wgmma.fence"]);
    line.assert_blamed(&e);
}

/// An accumulator register written while the wgmma on it is in flight is reported when
/// the wait completes the operation, naming the thread and register.
#[test]
fn wgmma_accumulator_written_while_in_flight() {
    let wait = Line::default();
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let mut acc = [0f32; 4];
        let p = acc.as_mut_ptr();
        wgmma::fence();
        unsafe { wgmma::mma_async(ss(p)) };
        wgmma::commit_group();
        if tid() == 70 {
            // SAFETY: the array is alive; writing it now is the rule violation under test.
            unsafe { p.add(3).write(1.0) };
        }
        wait.next();
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::Wgmma, &["thread 70 wrote accumulator register 3 while a wgmma on it was in flight"]);
    wait.assert_blamed(&e);
}

/// RS form: a thread's A-fragment registers changed while the wgmma reading them is in
/// flight.
#[test]
fn wgmma_a_registers_written_while_in_flight() {
    let wait = Line::default();
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let (mut acc, mut regs) = ([0f32; 4], [0x3C00_3C00u32; 4]);
        let r = regs.as_mut_ptr();
        wgmma::fence();
        let args = wgmma::MmaArgs { a: r as u64, a_in_registers: true, ..ss(acc.as_mut_ptr()) };
        unsafe { wgmma::mma_async(args) };
        wgmma::commit_group();
        if tid() == 12 {
            // SAFETY: as above.
            unsafe { r.add(2).write(0) };
        }
        wait.next();
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::Wgmma, &["thread 12 overwrote its A-fragment registers"]);
    wait.assert_blamed(&e);
}

/// A generic st.shared over an operand an in-flight wgmma still reads.
#[test]
fn store_over_an_operand_of_an_in_flight_wgmma() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let mut acc = [0f32; 4];
        wgmma::fence();
        unsafe { wgmma::mma_async(ss(acc.as_mut_ptr())) };
        wgmma::commit_group();
        if tid() == 9 {
            line.next();
            memory::st_shared::<u32>(b_tile() + 4, 0);
        }
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::InFlightRead, &["overwrites shared byte 0x2404", "in-flight async-proxy reader", "a wgmma"]);
    assert_eq!(e.thread, Some(9));
    line.assert_blamed(&e);
}

/// A warpgroup that exits with a wgmma never waited for.
#[test]
fn wgmma_never_waited_for() {
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let acc = Box::leak(Box::new([0f32; 4]));
        wgmma::fence();
        unsafe { wgmma::mma_async(ss(acc.as_mut_ptr())) };
        wgmma::commit_group();
    });
    expect(&e, ErrorKind::Wgmma, &["warpgroup 0 exited with wgmma operations never waited for"]);
}

/// wgmma needs a whole warpgroup: a 64-thread CTA cannot issue one.
#[test]
fn wgmma_in_a_partial_warpgroup() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 64, WGMMA_SMEM, || {
        line.next();
        wgmma::fence();
    });
    expect(&e, ErrorKind::Collective, &["warpgroup 0 needs threads up to 128, but the CTA has 64"]);
    line.assert_blamed(&e);
}

// ---------------------------------------------------------------------------------------
// e. Missing fence.proxy.async
// ---------------------------------------------------------------------------------------

/// st.shared, bar.sync, wgmma: every thread but thread 5 fences its generic writes for the
/// async proxy. The wgmma may read its operands as soon as it is issued, so the issue is
/// blamed; the report names thread 5 and the line of its store.
#[test]
fn wgmma_reads_a_write_without_fence_proxy_async() {
    let (store, issue) = (Line::default(), Line::default());
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let t = tid();
        for i in (t..64 * 16).step_by(128) {
            store.next();
            memory::st_shared::<u16>(a_tile() + sw128_byte(i / 16, 2 * (i % 16)), 0x3C00);
        }
        if t != 5 {
            fence::proxy_async_shared_cta();
        }
        barrier::sync_all(0);
        let mut acc = [0f32; 4];
        wgmma::fence();
        issue.next();
        unsafe { wgmma::mma_async(ss(acc.as_mut_ptr())) };
        wgmma::commit_group();
        wgmma::wait_group(0);
    });
    let writer = format!("written by thread 5 at {} through the generic proxy", store.at());
    expect(&e, ErrorKind::MissingProxyFence, &[&writer, "no fence.proxy.async in that thread"]);
    issue.assert_blamed(&e);
}

/// cp.async writes through the generic proxy: an operand it delivered needs the issuing
/// thread's fence.proxy.async (after its wait) before a wgmma reads it.
#[test]
fn wgmma_reads_a_cp_async_result_without_fence_proxy_async() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[0; 16]);
    let copy = Line::default();
    let e = report(&gm, 128, WGMMA_SMEM, || {
        if tid() == 0 {
            copy.next();
            cp_async::copy(b_tile() + 16, src, 16, 16);
            cp_async::wait_all();
        }
        barrier::sync_all(0);
        let mut acc = [0f32; 4];
        wgmma::fence();
        unsafe { wgmma::mma_async(ss(acc.as_mut_ptr())) };
        wgmma::commit_group();
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::MissingProxyFence, &[&format!("written by thread 0 at {}", copy.at())]);
}

/// A fence.proxy.async after the mma_async is too late: the wgmma may read its operands
/// as soon as it is issued, so the writes had to be fenced (and a barrier passed) before.
#[test]
fn fence_proxy_async_after_the_wgmma_issue_is_too_late() {
    let e = report(&GlobalMemory::new(), 128, WGMMA_SMEM, || {
        let t = tid();
        for i in (t..64 * 16).step_by(128) {
            memory::st_shared::<u16>(a_tile() + sw128_byte(i / 16, 2 * (i % 16)), 0x3C00);
        }
        barrier::sync_all(0);
        let mut acc = [0f32; 4];
        wgmma::fence();
        unsafe { wgmma::mma_async(ss(acc.as_mut_ptr())) };
        wgmma::commit_group();
        fence::proxy_async_shared_cta();
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::MissingProxyFence, &["written by thread"]);
}

/// A wgmma issued before the bulk copy of its operand has landed (the kernel waits on
/// the copy's mbarrier only after the issue) may read stale data.
#[test]
fn wgmma_issued_before_its_operand_copy_landed() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[0; 1024]);
    let e = report(&gm, 128, WGMMA_SMEM + 8, || {
        let bar = smem() + WGMMA_SMEM;
        init_mbarrier(bar, 1, true);
        if tid() == 0 {
            mbarrier::arrive_expect_tx(bar, 1024);
            bulk::global_to_shared(b_tile(), src, 1024, bar);
        }
        let mut acc = [0f32; 4];
        wgmma::fence();
        unsafe { wgmma::mma_async(ss(acc.as_mut_ptr())) };
        wgmma::commit_group();
        mbarrier::try_wait_parity(bar, 0);
        wgmma::wait_group(0);
    });
    expect(&e, ErrorKind::AsyncOwned, &["asynchronous copy"]);
}

// ---------------------------------------------------------------------------------------
// f. Deadlocks
// ---------------------------------------------------------------------------------------

/// Half the CTA waits at bar.sync for all 64 threads while the other half exits.
#[test]
fn deadlock_at_a_barrier_half_the_cta_skips() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 64, 0, || {
        if tid() < 32 {
            line.next();
            barrier::sync_all(0);
        }
    });
    let waits = format!("threads 0-31 wait at `bar.sync` barrier 0 (32 of 64 threads arrived) at {}", line.at());
    expect(&e, ErrorKind::Deadlock, &["every live thread is blocked", &waits, "(32 threads have exited)"]);
}

/// Everyone waits on an mbarrier nobody arrives on.
#[test]
fn deadlock_on_an_mbarrier_nobody_arrives_on() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 64, 64, || {
        init_mbarrier(smem() + 8, 1, false);
        line.next();
        mbarrier::try_wait_parity(smem() + 8, 0);
    });
    let waits = "threads 0-63 wait at `mbarrier.try_wait.parity.shared::cta.b64` on mbarrier 0x408 for parity 0 \
                 (phase 0: 1 of 1 arrivals missing";
    expect(&e, ErrorKind::Deadlock, &[waits, &line.at()]);
}

/// A `test_wait` polling loop on an mbarrier nobody will ever arrive on: the pollers let
/// each other run, nothing changes, and after enough futile polls the loop is reported
/// as a deadlock instead of spinning forever.
#[test]
fn polling_loop_that_can_never_succeed() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, 64, || {
        init_mbarrier(smem() + 8, 1, false);
        line.next();
        while !mbarrier::test_wait_parity(smem() + 8, 0) {}
    });
    let polls = "wait at `mbarrier.test_wait.parity.shared::cta.b64` on mbarrier 0x408 for parity 0";
    expect(&e, ErrorKind::Deadlock, &[polls, &line.at()]);
}

/// Two groups stuck on different things are listed separately: warp 0 on named barrier 1
/// (count 96, only 64 come), warp 1 on barrier 1 too, warp 2 on an mbarrier.
#[test]
fn deadlock_report_lists_every_wait() {
    let (bar_line, mbar_line) = (Line::default(), Line::default());
    let e = report(&GlobalMemory::new(), 96, 64, || {
        init_mbarrier(smem(), 2, false);
        if tid() < 64 {
            bar_line.next();
            barrier::sync(1, 96);
        } else {
            mbar_line.next();
            mbarrier::try_wait_parity(smem(), 0);
        }
    });
    expect(
        &e,
        ErrorKind::Deadlock,
        &[
            &format!("threads 0-63 wait at `bar.sync` barrier 1 (64 of 96 threads arrived) at {}", bar_line.at()),
            "threads 64-95 wait at `mbarrier.try_wait.parity.shared::cta.b64` on mbarrier 0x400",
            "2 of 2 arrivals missing",
            &mbar_line.at(),
        ],
    );
}

/// A collective some lanes never reach because they are stuck elsewhere: lanes 0-15 wait
/// at elect.sync for lanes 16-31, which wait at a named barrier only they reach.
#[test]
fn deadlock_report_names_the_missing_lanes_of_a_collective() {
    let (elect, bar) = (Line::default(), Line::default());
    let e = report(&GlobalMemory::new(), 32, 0, || {
        if tid() < 16 {
            elect.next();
            warp::elect_sync(u32::MAX);
        } else {
            bar.next();
            barrier::sync(1, 32);
        }
    });
    expect(
        &e,
        ErrorKind::Deadlock,
        &[
            &format!(
                "threads 0-15 wait at `elect.sync` for threads 16-31 of its warp 0 that never arrive at {}",
                elect.at()
            ),
            &format!("threads 16-31 wait at `bar.sync` barrier 1 (16 of 32 threads arrived) at {}", bar.at()),
        ],
    );
}

// ---------------------------------------------------------------------------------------
// g. Warp collectives reached by part of a warp
// ---------------------------------------------------------------------------------------

/// Lanes 0-15 execute elect.sync with a full membermask while lanes 16-31 exit.
#[test]
fn collective_abandoned_by_exiting_lanes() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, 0, || {
        if tid() < 16 {
            line.next();
            warp::elect_sync(u32::MAX);
        }
    });
    let needle =
        format!("thread 16 exited while other threads of its warp wait for it at `elect.sync` ({})", line.at());
    expect(&e, ErrorKind::Collective, &[&needle]);
}

/// The stranded-collective report should carry the collective's location (and the exiting
/// thread), like every other per-instruction report; today it only quotes it in the message.
#[test]
fn collective_abandoned_report_has_a_location() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, 0, || {
        if tid() < 16 {
            line.next();
            warp::shfl_sync_idx(1, 0);
        }
    });
    assert_eq!(e.kind, ErrorKind::Collective);
    assert_eq!(e.thread, Some(16));
    line.assert_blamed(&e);
}

/// Lanes 0-15 reach shfl.sync while lanes 16-31 reach elect.sync: divergent collectives.
#[test]
fn collective_divergence_between_two_instructions() {
    let (shfl, elect) = (Line::default(), Line::default());
    let e = report(&GlobalMemory::new(), 32, 0, || {
        if tid() < 16 {
            shfl.next();
            warp::shfl_sync_idx(tid(), 0);
        } else {
            elect.next();
            warp::elect_sync(u32::MAX);
        }
    });
    let needle = format!(
        "this thread reached `elect.sync` while threads of its warp 0 wait at `shfl.sync.idx.b32` ({})",
        shfl.at()
    );
    expect(&e, ErrorKind::Collective, &["divergent collective", &needle]);
    assert_eq!(e.thread, Some(16));
    elect.assert_blamed(&e);
}

/// A lane may only execute elect.sync if its membermask includes it, and all lanes must
/// agree on the mask.
#[test]
fn elect_sync_membermask_misuse() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 32, 0, || {
        line.next();
        warp::elect_sync(0xFFFF_FFFE);
    });
    expect(&e, ErrorKind::Collective, &["lane 0 executes elect.sync with membermask 0xfffffffe, which excludes it"]);
    line.assert_blamed(&e);

    // A partial warp of 16 lanes: masks 0xFFFF and 0xFFFF_FFFF name the same lanes but differ,
    // so lane 15 joins a group that overlaps the one lanes 0-14 wait in.
    let e = report(&GlobalMemory::new(), 16, 0, || {
        line.next();
        warp::elect_sync(if tid() == 15 { 0xFFFF_FFFF } else { 0xFFFF });
    });
    expect(&e, ErrorKind::Collective, &["divergent collective", "membermask 0xffffffff", "overlapping mask"]);
    assert_eq!(e.thread, Some(15));
    line.assert_blamed(&e);
}

/// Two disjoint groups of one warp, each executing elect.sync with its own membermask
/// (even lanes with 0x5555_5555, odd lanes with 0xAAAA_AAAA) are two independent, legal
/// collectives: lane 0 is elected among the even lanes, lane 1 among the odd ones.
#[test]
fn disjoint_membermask_groups_are_independent() {
    let gm = GlobalMemory::new();
    let out = gm.alloc_from("out", &[0; 32 * 4]);
    emu::launch(&gm, one_cta(32, 0), || {
        let mask = if tid().is_multiple_of(2) { 0x5555_5555 } else { 0xAAAA_AAAA };
        let (elected, _) = warp::elect_sync(mask);
        memory::st_global::<u32>(out + 4 * tid() as u64, elected);
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let mut words = [0u8; 128];
    gm.read(out, &mut words).unwrap();
    for t in 0..32 {
        assert_eq!(words[4 * t], (t % 2) as u8, "lane {t}");
    }
}

// ---------------------------------------------------------------------------------------
// Named-barrier misuse
// ---------------------------------------------------------------------------------------

/// bar.sync thread counts must be positive multiples of 32, agree between arrivals, and
/// barrier ids are 0..16.
#[test]
fn named_barrier_misuse() {
    let line = Line::default();
    let e = report(&GlobalMemory::new(), 64, 0, || {
        line.next();
        barrier::sync(1, 48);
    });
    expect(&e, ErrorKind::Barrier, &["thread count 48 of barrier 1 is not a positive multiple of 32"]);
    line.assert_blamed(&e);

    let e = report(&GlobalMemory::new(), 128, 0, || {
        if tid() < 32 {
            barrier::sync(2, 64);
        } else if tid() < 64 {
            line.next();
            barrier::sync(2, 96);
        }
    });
    expect(&e, ErrorKind::Barrier, &["barrier 2 with 96 threads while 32 threads already arrived expecting 64"]);
    assert_eq!(e.thread, Some(32));
    line.assert_blamed(&e);

    let e = report(&GlobalMemory::new(), 32, 0, || {
        line.next();
        barrier::sync_all(16);
    });
    expect(&e, ErrorKind::Barrier, &["barrier id 16 is out of range 0..16"]);
    line.assert_blamed(&e);
}

/// Barriers count arriving warps: a partial last warp arrives as a whole warp, so in a
/// 48-thread CTA `bar.sync 1, 64` by every thread completes (as `bar.sync 1` does).
#[test]
fn explicit_count_barrier_in_a_partial_warp() {
    emu::launch(&GlobalMemory::new(), one_cta(48, 0), || barrier::sync(1, 64)).unwrap_or_else(|e| panic!("{e}"));
}

// ---------------------------------------------------------------------------------------
// h. Panics, unsupported operands and invalid launches
// ---------------------------------------------------------------------------------------

/// A Rust panic inside the kernel (here in thread 7 while the others wait at a barrier)
/// is reported as such, with the thread and the panic message.
#[test]
fn kernel_panic_is_reported() {
    let e = report(&GlobalMemory::new(), 64, 0, || {
        if tid() == 7 {
            panic!("boom in thread {}", tid());
        }
        barrier::sync_all(0);
    });
    expect(&e, ErrorKind::Panic, &["the kernel panicked: boom in thread 7"]);
    assert_eq!(e.thread, Some(7));
}

/// Operands the PTX ISA forbids or the emulator does not model: a 12-byte cp.async, and a
/// tensor copy through a pointer that holds no tensor map.
#[test]
fn unsupported_operands() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[0; 128]);
    let line = Line::default();
    let e = report(&gm, 32, 64, || {
        line.next();
        cp_async::copy(smem(), src, 12, 12);
    });
    expect(&e, ErrorKind::Unsupported, &["cp.async copy size 12 is not 4, 8 or 16"]);
    line.assert_blamed(&e);

    let e = report(&gm, 32, 2048, || {
        init_mbarrier(smem() + 1024, 1, true);
        line.next();
        bulk::tensor_global_to_shared(smem(), src, &[0, 0], smem() + 1024);
    });
    expect(&e, ErrorKind::Unsupported, &["not a tensor map"]);
    line.assert_blamed(&e);
}

/// A tensor copy whose swizzled destination is not aligned to the swizzle's repeat.
#[test]
fn tensor_copy_to_a_misaligned_swizzled_tile() {
    let gm = GlobalMemory::new();
    let g = gm.alloc_from("tensor", &[0; 128 * 8]);
    let map = TensorMap {
        elem_bytes: 1,
        rank: 2,
        global_addr: g,
        dims: [128, 8, 0, 0, 0],
        strides: [0, 128, 0, 0, 0],
        box_dims: [128, 8, 0, 0, 0],
        elem_strides: [1, 1, 0, 0, 0],
        swizzle: TmaSwizzle::B128,
        oob_fill: OobFill::Zero,
    };
    let map = gm.alloc_from("map", &map.encode().unwrap());
    let line = Line::default();
    let e = report(&gm, 32, 4096, || {
        init_mbarrier(smem(), 1, true);
        line.next();
        bulk::tensor_global_to_shared(smem() + 512, map, &[0, 0], smem());
    });
    expect(&e, ErrorKind::OutOfBounds, &["0x600 not 1024-byte aligned"]);
    line.assert_blamed(&e);
}

/// Invalid launch configurations are refused before anything runs: no threads, no CTAs,
/// more than 1024 threads per CTA, more than 227 KiB of dynamic shared memory.
#[test]
fn invalid_launches() {
    let gm = GlobalMemory::new();
    let cases = [
        (LaunchConfig { grid: [1, 1, 1], block: [0, 1, 1], dynamic_smem: 0 }, "empty launch"),
        (LaunchConfig { grid: [4, 0, 1], block: [32, 1, 1], dynamic_smem: 0 }, "empty launch"),
        (
            LaunchConfig { grid: [1, 1, 1], block: [1025, 1, 1], dynamic_smem: 0 },
            "1025 threads per CTA exceed the limit of 1024",
        ),
        (LaunchConfig { grid: [1, 1, 1], block: [32, 32, 2], dynamic_smem: 0 }, "2048 threads per CTA exceed"),
        (
            LaunchConfig { grid: [1, 1, 1], block: [32, 1, 1], dynamic_smem: emu::MAX_DYNAMIC_SMEM + 1 },
            "232449 bytes of dynamic shared memory exceed the limit of 232448",
        ),
    ];
    for (config, needle) in cases {
        let e = report_of(&gm, config, || panic!("a refused launch runs no thread"));
        expect(&e, ErrorKind::Launch, &[needle]);
        assert_eq!(e.location, None);
    }
    let at_limits = LaunchConfig { grid: [1, 1, 1], block: [1024, 1, 1], dynamic_smem: emu::MAX_DYNAMIC_SMEM };
    let stats = emu::launch(&gm, at_limits, || {
        assert_eq!(special::dynamic_smem_size(), emu::MAX_DYNAMIC_SMEM);
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stats.threads, emu::MAX_THREADS_PER_CTA as u64);
}

/// `setmaxnreg` takes 24..=256 registers in multiples of 8, the same value and direction
/// in every thread of the warpgroup, and a whole warpgroup; a producer/consumer split that
/// obeys all three runs.
#[test]
fn setmaxnreg_operand_and_warpgroup_rules() {
    let gm = GlobalMemory::new();
    emu::launch(&gm, one_cta(384, 0), || {
        if tid() >= 256 {
            warp::setmaxnreg(false, 40);
        } else {
            warp::setmaxnreg(true, 232);
        }
    })
    .expect("two consumer warpgroups raise, the producer lowers");

    let line = Line::default();
    let e = report(&gm, 128, 0, || {
        line.next();
        warp::setmaxnreg(true, 236);
    });
    expect(&e, ErrorKind::Collective, &["setmaxnreg with 236 registers", "multiples of 8"]);
    line.assert_blamed(&e);

    let e = report(&gm, 128, 0, || warp::setmaxnreg(true, if tid() < 64 { 232 } else { 224 }));
    expect(&e, ErrorKind::Collective, &["setmaxnreg operands differ within the warpgroup"]);

    let e = report(&gm, 64, 0, || warp::setmaxnreg(false, 40));
    expect(&e, ErrorKind::Collective, &["setmaxnreg in warpgroup 0, which needs threads up to 128; the CTA has 64"]);
}
