//! The wgmma unit (instructions in `ops::wgmma`): each warpgroup's `mma_async`s, grouped
//! by `commit_group`, with the true values of the accumulators they own, and each thread's
//! `wgmma.fence` state. The operations complete only at the `wait_group` that guarantees
//! them (nothing else observes them), so the unit has no lazy work; at the end of the CTA
//! none may be left.

use std::collections::{HashMap, VecDeque};

use super::AsyncUnit;
use crate::cta::{CtaState, WARPGROUP};
use crate::report::{EmuError, ErrorKind, Loc};

pub(crate) enum OperandA {
    /// Chunk addresses, row-major: row r, chunk c at `r * 2 + c`.
    Smem(Vec<u32>),
    /// Per member thread: the address of its four A-fragment registers, and their value
    /// when issued (they must not change before completion).
    Registers(Vec<(usize, [u32; 4])>),
}

pub(crate) struct MmaOp {
    pub n: u32,
    pub a: OperandA,
    pub b_chunks: Vec<u32>,
    pub accumulate: bool,
    pub negate_a: bool,
    pub negate_b: bool,
    pub inputs: crate::model::wgmma::Inputs,
    pub members: Vec<u32>,
    pub accumulators: Vec<usize>,
    pub loc: Loc,
}

pub(crate) struct Shadow {
    pub values: Vec<f32>,
    pub in_flight: u32,
}

/// One warpgroup's wgmma state.
#[derive(Default)]
pub(crate) struct WarpgroupMma {
    pub uncommitted: Vec<MmaOp>,
    pub groups: VecDeque<Vec<MmaOp>>,
    /// The accumulators' true values while operations on them are in flight, by
    /// (thread, register-array address).
    pub shadows: HashMap<(u32, usize), Shadow>,
}

impl WarpgroupMma {
    /// Whether any operation is still issued but not waited for.
    pub fn in_flight(&self) -> bool {
        !self.uncommitted.is_empty() || self.groups.iter().any(|g| !g.is_empty())
    }
}

/// The CTA's wgmma state.
pub(crate) struct WarpgroupMmas {
    /// By warpgroup.
    pub warpgroups: Vec<WarpgroupMma>,
    /// Per thread: `wgmma.fence` executed since its accumulators were last accessible.
    pub fenced: Vec<bool>,
}

impl AsyncUnit for WarpgroupMmas {
    fn new(threads: usize) -> WarpgroupMmas {
        let warpgroups = threads.div_ceil(WARPGROUP as usize);
        WarpgroupMmas {
            warpgroups: (0..warpgroups).map(|_| WarpgroupMma::default()).collect(),
            fenced: vec![false; threads],
        }
    }

    fn end_of_cta(st: &mut CtaState) -> Result<(), EmuError> {
        match st.units.get::<WarpgroupMmas>().warpgroups.iter().position(|w| w.in_flight()) {
            Some(wg) => Err(EmuError::new(
                ErrorKind::Wgmma,
                "exit",
                format!("warpgroup {wg} exited with wgmma operations never waited for"),
            )),
            None => Ok(()),
        }
    }
}
