//! A position in a ring of `N` shared-memory slots guarded by mbarriers.
//!
//! Each slot's barrier completes one phase per lap of the ring, and phases alternate
//! parity; so a waiter needs the slot and the parity of the current lap. A consumer waits
//! for `phase` on a `full` barrier; a producer waits for `phase ^ 1` on an `empty` one,
//! which a fresh barrier passes at once on the first lap (its "previous phase" counts as
//! complete).

/// The slot, and the parity of the ring's current lap.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingPos<const N: u32> {
    pub slot: u32,
    pub phase: u32,
}

impl<const N: u32> RingPos<N> {
    pub const START: Self = RingPos { slot: 0, phase: 0 };

    /// The next slot; the phase flips when the ring wraps.
    #[inline(always)]
    pub fn advance(&mut self) {
        self.slot += 1;
        if self.slot == N {
            self.slot = 0;
            self.phase ^= 1;
        }
    }
}
