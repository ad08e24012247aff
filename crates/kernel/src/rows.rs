//! Staging rows of packed e2m1 values whose K tail is not a whole tile.
//!
//! A row of K values is K/2 bytes. K is a multiple of 16 (one scale block), so a row is a
//! multiple of 8 bytes, and of 16 bytes when K is a multiple of 32. The tiled kernels read
//! K in stages of 64 values (32 bytes) in 16-byte chunks; past K, a chunk must read as
//! zeros (a zero value times any finite scale adds nothing, and the blocked layout's
//! padding scales are zero). `cp.async`'s `src_size` does the zero-filling, but its
//! source must be aligned to the copy size, so:
//!
//! - K % 32 == 0: every chunk of every row is 16-byte aligned and lies wholly inside or
//!   wholly outside the row: one 16-byte copy, `src_size` 16 or 0.
//! - K % 32 == 16 (K = 80, 112, ...): odd rows start 8 bytes into a 16-byte line: the
//!   chunk is copied as two 8-byte halves, each inside or outside the row.

use crate::ptx::{SmemAddr, cp_async};

/// Bytes per chunk (one 16-byte `cp.async`).
pub const CHUNK: u32 = 16;
/// Bytes per half chunk: the alignment every row has.
const HALF: u32 = CHUNK / 2;

/// What L2 fetches from DRAM for a chunk (16-byte copies only; a hint).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum L2Prefetch {
    /// The chunk's own 32-byte sector.
    Sector,
    /// The aligned 128-byte line around it ([`cp_async::cg_16_l2_128`]).
    Line,
}

/// Copies bytes `[byte_in_row, byte_in_row + 16)` of the row at global address `row`
/// (`row_bytes` long; pass 0 for a row past the matrix edge) into `dst`, zero-filling what
/// lies past the row's end. `byte_in_row` is a multiple of 16.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn copy_chunk(dst: SmemAddr, row: u64, byte_in_row: u32, row_bytes: u32, l2_prefetch: L2Prefetch) {
    // A source of 0 with `src_size` 0 reads nothing.
    let source = |offset: u32, size: u32| if offset < row_bytes { (row + offset as u64, size) } else { (0, 0) };
    if row_bytes.is_multiple_of(CHUNK) {
        let (src, size) = source(byte_in_row, CHUNK);
        match l2_prefetch {
            L2Prefetch::Sector => cp_async::cg_16(dst, src, size),
            L2Prefetch::Line => cp_async::cg_16_l2_128(dst, src, size),
        }
    } else {
        for half in 0..CHUNK / HALF {
            let (src, size) = source(byte_in_row + half * HALF, HALF);
            cp_async::ca_8(dst.offset(half * HALF), src, size);
        }
    }
}
