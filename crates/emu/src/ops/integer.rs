//! Integer and byte-permute instructions: thread-local, so they only count themselves and
//! call the bit-exact models in `model::integer`.

use super::count;
use crate::model::integer as model;

/// `prmt.b32 d, a, b, c;` (default mode): bytes of {b, a} chosen by the selectors in `c`.
pub fn prmt_b32(a: u32, b: u32, c: u32) -> u32 {
    count("prmt.b32");
    model::prmt_b32(a, b, c)
}

/// `dp4a.s32.s32 d, a, b, c;`: `c` plus the dot product of the four signed bytes.
pub fn dp4a_s32(a: u32, b: u32, c: i32) -> i32 {
    count("dp4a.s32.s32");
    model::dp4a_s32(a, b, c)
}
