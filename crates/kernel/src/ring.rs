//! A position in a ring of shared-memory slots guarded by mbarriers.
//!
//! Each slot's barrier completes one phase per lap of the ring, and phases alternate
//! parity; so a waiter needs the slot and the parity of the current lap. A consumer waits
//! for `phase` on a `full` barrier; a producer waits for `phase ^ 1` on an `empty` one,
//! which a fresh barrier passes at once on the first lap (its "previous phase" counts as
//! complete).

/// The slot, and the parity of the ring's current lap, in a ring of `slots` slots (a
/// kernel's compile-time constant once inlined, so the wrap test compares with an
/// immediate).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingPos {
    pub slot: u32,
    pub phase: u32,
    slots: u32,
}

impl RingPos {
    /// Slot 0 of the first lap of a ring of `slots` slots.
    #[inline(always)]
    pub const fn start(slots: u32) -> Self {
        RingPos { slot: 0, phase: 0, slots }
    }

    /// The next slot; the phase flips when the ring wraps.
    #[inline(always)]
    pub fn advance(&mut self) {
        self.slot += 1;
        if self.slot == self.slots {
            self.slot = 0;
            self.phase ^= 1;
        }
    }

    /// `n` slots on (a compile-time constant once inlined: the loop unrolls).
    #[inline(always)]
    pub fn advance_by(&mut self, n: u32) {
        for _ in 0..n {
            self.advance();
        }
    }
}
