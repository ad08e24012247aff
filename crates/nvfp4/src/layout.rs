//! The "blocked" scale-factor layout (cuBLAS / CuTe block scaling), which every kernel reads.
//!
//! View one batch's `[R, K/16]` scale matrix in tiles of 128 rows x 4 scale columns; each tile
//! is one contiguous 512-byte block; tiles are ordered row-block major; R is padded up to a
//! multiple of 128 and K/16 up to a multiple of 4 with zero bytes (K need only be a
//! multiple of 16: a zero scale makes the padding's values count for nothing). Inside a tile, row r's 4 scales are bytes
//! `(r % 32) * 16 + ((r % 128) / 32) * 4 ..+4`: the 16 bytes at `16 * lane` hold rows
//! lane, lane + 32, lane + 64 and lane + 96, which is the tensor-memory layout tcgen05 wants
//! (one `tcgen05.cp .32x128b.warpx4` per tile, no transposition).
//!
//! ```text
//! tile (row block rb, k block kb) at ((rb * sf_cols/4) + kb) * 512
//! byte  0..16  rows 0, 32, 64, 96 (4 scales each)     <- lane 0
//! byte 16..32  rows 1, 33, 65, 97                     <- lane 1
//! ...
//! byte 496..512 rows 31, 63, 95, 127                  <- lane 31
//! ```
//!
//! Batches follow each other, each [`batch_bytes`] long. The same bytes, seen as the 6-d
//! tensor the reference hands out, have shape (32, 4, rest_r, 4, rest_k, L) and strides
//! (16, 4, 512 * rest_k, 1, 512, 512 * rest_k * rest_r): index
//! [r % 32, (r % 128) / 32, r / 128, j % 4, j / 4, l] is scale (r, j) of batch l.
//!
//! The 4 scales of one row in one tile are contiguous, which [`to_blocked`] and
//! [`from_blocked`] use to move 4 bytes at a time.

/// Rows per blocked tile.
pub const TILE_ROWS: u32 = 128;
/// Scale columns per blocked tile (= 64 values of K).
pub const TILE_COLS: u32 = 4;
/// Bytes per blocked tile.
pub const TILE_BYTES: u32 = 512;
/// Rows of one lane group inside a tile (row r sits in lane group r % 32).
pub const LANE_ROWS: u32 = 32;

/// Row blocks of 128: ceil(rows / 128).
#[inline]
pub const fn row_blocks(rows: u32) -> u32 {
    rows.div_ceil(TILE_ROWS)
}

/// Column blocks of 4 scales (64 values of K): ceil(sf_cols / 4).
#[inline]
pub const fn col_blocks(sf_cols: u32) -> u32 {
    sf_cols.div_ceil(TILE_COLS)
}

/// Bytes of one batch's blocked scales for `rows` rows and `sf_cols` (= K/16) columns,
/// padding included.
#[inline]
pub const fn batch_bytes(rows: u32, sf_cols: u32) -> u64 {
    row_blocks(rows) as u64 * col_blocks(sf_cols) as u64 * TILE_BYTES as u64
}

/// Byte offset of scale (r, j) inside one batch:
/// `((r/128)*ceil(sf_cols/4) + j/4)*512 + (r%32)*16 + ((r%128)/32)*4 + j%4`.
#[inline]
pub const fn offset(r: u32, j: u32, sf_cols: u32) -> u64 {
    let in_tile = (r % LANE_ROWS) * 16 + (r % TILE_ROWS / LANE_ROWS) * 4 + j % TILE_COLS;
    tile_offset(r / TILE_ROWS, j / TILE_COLS, sf_cols) + in_tile as u64
}

/// Byte offset of the tile holding rows [128*rb, 128*rb+128) and scale columns
/// [4*kb, 4*kb+4) inside one batch.
#[inline]
pub const fn tile_offset(row_block: u32, k_block: u32, sf_cols: u32) -> u64 {
    (row_block as u64 * col_blocks(sf_cols) as u64 + k_block as u64) * TILE_BYTES as u64
}

/// Converts plain row-major scales `[L][rows][sf_cols]` into the blocked layout (pads with 0).
/// `blocked.len()` must be `l * batch_bytes(rows, sf_cols)`.
///
/// # Panics
/// If a slice has the wrong length.
#[inline]
pub fn to_blocked(plain: &[u8], rows: u32, sf_cols: u32, l: u32, blocked: &mut [u8]) {
    check_lengths(plain.len(), blocked.len(), rows, sf_cols, l);
    blocked.fill(0);
    for_each_run(rows, sf_cols, l, |plain_at, blocked_at, len| {
        blocked[blocked_at..blocked_at + len].copy_from_slice(&plain[plain_at..plain_at + len]);
    });
}

/// The inverse of [`to_blocked`] (drops the padding).
/// `plain.len()` must be `l * rows * sf_cols`.
///
/// # Panics
/// If a slice has the wrong length.
#[inline]
pub fn from_blocked(blocked: &[u8], rows: u32, sf_cols: u32, l: u32, plain: &mut [u8]) {
    check_lengths(plain.len(), blocked.len(), rows, sf_cols, l);
    for_each_run(rows, sf_cols, l, |plain_at, blocked_at, len| {
        plain[plain_at..plain_at + len].copy_from_slice(&blocked[blocked_at..blocked_at + len]);
    });
}

#[inline]
fn check_lengths(plain: usize, blocked: usize, rows: u32, sf_cols: u32, l: u32) {
    let plain_want = l as u64 * rows as u64 * sf_cols as u64;
    let blocked_want = l as u64 * batch_bytes(rows, sf_cols);
    assert!(plain as u64 == plain_want, "plain scales: {plain} bytes, want {plain_want}");
    assert!(blocked as u64 == blocked_want, "blocked scales: {blocked} bytes, want {blocked_want}");
}

/// Calls `f(plain_offset, blocked_offset, len)` for every run of up to 4 scales (one row of
/// one tile; shorter in the last tile when K/16 is not a multiple of 4), all batches: the
/// run is contiguous in both layouts.
#[inline]
fn for_each_run(rows: u32, sf_cols: u32, l: u32, mut f: impl FnMut(usize, usize, usize)) {
    let batch = batch_bytes(rows, sf_cols);
    let mut plain_at = 0;
    for batch_index in 0..l as u64 {
        for r in 0..rows {
            for j in (0..sf_cols).step_by(TILE_COLS as usize) {
                let len = (sf_cols - j).min(TILE_COLS) as usize;
                f(plain_at, (batch_index * batch + offset(r, j, sf_cols)) as usize, len);
                plain_at += len;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// (rows, sf_cols, L) covering partial row blocks, one and several k blocks and batches.
    const CASES: [(u32, u32, u32); 12] = [
        (1, 4, 1),
        (1, 1, 1),
        (100, 6, 2),
        (130, 3, 1),
        (100, 4, 1),
        (128, 8, 1),
        (129, 4, 2),
        (256, 16, 1),
        (300, 12, 3),
        (32, 4, 3),
        (384, 64, 1),
        (7, 1024, 1),
    ];

    /// gpu-mode reference.py `to_blocked`, one tensor operation at a time, each view,
    /// permute, reshape or transpose written as the index map it is (on a [rows, cols]
    /// matrix, one batch):
    ///
    /// ```python
    /// n_row_blocks = ceil_div(rows, 128); n_col_blocks = ceil_div(cols, 4)
    /// padded = pad to (n_row_blocks*128, n_col_blocks*4) with zeros
    /// blocks = padded.view(n_row_blocks, 128, n_col_blocks, 4).permute(0, 2, 1, 3)
    /// rearranged = blocks.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16)
    /// return rearranged.flatten()
    /// ```
    fn reference_to_blocked<T: Copy + Default>(input: &[T], rows: usize, cols: usize) -> Vec<T> {
        let n_row_blocks = rows.div_ceil(128);
        let n_col_blocks = cols.div_ceil(4);
        let (padded_rows, padded_cols) = (n_row_blocks * 128, n_col_blocks * 4);
        let len = padded_rows * padded_cols;

        // padded: [padded_rows, padded_cols], contiguous, zeros outside the input.
        let mut padded = vec![T::default(); len];
        for r in 0..rows {
            for c in 0..cols {
                padded[r * padded_cols + c] = input[r * cols + c];
            }
        }

        // view(n_row_blocks, 128, n_col_blocks, 4): element [a, b, c, d] is
        // padded[a*128 + b, c*4 + d]. permute(0, 2, 1, 3) makes [a, c, b, d] of shape
        // (n_row_blocks, n_col_blocks, 128, 4) that element; materialise it contiguously
        // (reshape on a non-contiguous tensor copies in this logical order).
        let mut blocks = vec![T::default(); len];
        for a in 0..n_row_blocks {
            for c in 0..n_col_blocks {
                for b in 0..128 {
                    for d in 0..4 {
                        let viewed = padded[(a * 128 + b) * padded_cols + c * 4 + d];
                        blocks[((a * n_col_blocks + c) * 128 + b) * 4 + d] = viewed;
                    }
                }
            }
        }

        // reshape(-1, 4, 32, 4) of the contiguous blocks: element [p, q, s, t] is
        // blocks_flat[((p*4 + q)*32 + s)*4 + t]. transpose(1, 2) makes [p, s, q, t] of shape
        // (n, 32, 4, 4) that element; materialise it.
        let n = n_row_blocks * n_col_blocks;
        let mut transposed = vec![T::default(); len];
        for p in 0..n {
            for s in 0..32 {
                for q in 0..4 {
                    for t in 0..4 {
                        let reshaped = blocks[((p * 4 + q) * 32 + s) * 4 + t];
                        transposed[((p * 32 + s) * 4 + q) * 4 + t] = reshaped;
                    }
                }
            }
        }

        // reshape(-1, 32, 16) then flatten: contiguous already, the order is unchanged.
        transposed
    }

    /// A distinct nonzero id per (batch, row, column), so every placement is checked.
    fn id(l: u32, r: u32, j: u32, rows: u32, sf_cols: u32) -> u32 {
        (l * rows + r) * sf_cols + j + 1
    }

    #[test]
    fn offset_matches_reference_to_blocked() {
        for (rows, sf_cols, _) in CASES {
            let input: Vec<u32> =
                (0..rows).flat_map(|r| (0..sf_cols).map(move |j| id(0, r, j, rows, sf_cols))).collect();
            let reference = reference_to_blocked(&input, rows as usize, sf_cols as usize);
            assert_eq!(reference.len() as u64, batch_bytes(rows, sf_cols));
            let mut expected = vec![0u32; reference.len()];
            for r in 0..rows {
                for j in 0..sf_cols {
                    expected[offset(r, j, sf_cols) as usize] = id(0, r, j, rows, sf_cols);
                }
            }
            assert_eq!(expected, reference, "rows {rows}, sf_cols {sf_cols}");
        }
    }

    /// The reference's permuted scale tensor: storage shaped (L, rest_r, rest_k, 32, 4, 4),
    /// contiguous, viewed through `permute(3, 4, 1, 5, 2, 0)` as (32, 4, rest_r, 4, rest_k, L).
    #[test]
    fn offset_matches_permuted_6d_tensor() {
        for (rows, sf_cols, l) in CASES {
            let (rest_r, rest_k) = (row_blocks(rows) as usize, col_blocks(sf_cols) as usize);
            // Row-major strides of the storage shape.
            let storage_shape = [l as usize, rest_r, rest_k, 32, 4, 4];
            let mut storage_strides = [1usize; 6];
            for d in (0..5).rev() {
                storage_strides[d] = storage_strides[d + 1] * storage_shape[d + 1];
            }
            let permutation = [3, 4, 1, 5, 2, 0];
            let strides = permutation.map(|d| storage_strides[d]);
            assert_eq!(strides, [16, 4, 512 * rest_k, 1, 512, 512 * rest_k * rest_r]);

            let mut tensor = vec![0u32; storage_shape.iter().product()];
            let mut plain = Vec::new();
            for b in 0..l {
                for r in 0..rows {
                    for j in 0..sf_cols {
                        let index = [r % 32, (r % 128) / 32, r / 128, j % 4, j / 4, b];
                        let at: usize = index.iter().zip(strides).map(|(&i, s)| i as usize * s).sum();
                        tensor[at] = id(b, r, j, rows, sf_cols);
                        let batch_start = b as u64 * batch_bytes(rows, sf_cols);
                        assert_eq!(at as u64, batch_start + offset(r, j, sf_cols));
                        plain.push(id(b, r, j, rows, sf_cols));
                    }
                }
            }
            // The reference per batch, concatenated, is the same buffer.
            let per_batch = (rows * sf_cols) as usize;
            let concatenated: Vec<u32> = plain
                .chunks(per_batch)
                .flat_map(|batch| reference_to_blocked(batch, rows as usize, sf_cols as usize))
                .collect();
            assert_eq!(tensor, concatenated, "rows {rows}, sf_cols {sf_cols}, l {l}");
        }
    }

    #[test]
    fn offset_is_a_bijection_onto_the_padded_buffer() {
        for (rows, sf_cols, l) in CASES {
            let batch = batch_bytes(rows, sf_cols);
            let mut hits = vec![0u8; (l as u64 * batch) as usize];
            for b in 0..l as u64 {
                for r in 0..row_blocks(rows) * TILE_ROWS {
                    for j in 0..col_blocks(sf_cols) * TILE_COLS {
                        hits[(b * batch + offset(r, j, sf_cols)) as usize] += 1;
                    }
                }
            }
            assert!(hits.iter().all(|&h| h == 1), "rows {rows}, sf_cols {sf_cols}, l {l}");
        }
    }

    #[test]
    fn tiles_are_512_contiguous_bytes() {
        let sf_cols = 12;
        for rb in 0..3 {
            for kb in 0..3 {
                let start = tile_offset(rb, kb, sf_cols);
                assert_eq!(start, ((rb * 3 + kb) * 512) as u64);
                let mut seen = [false; 512];
                for r in rb * 128..rb * 128 + 128 {
                    for j in kb * 4..kb * 4 + 4 {
                        let at = offset(r, j, sf_cols) - start;
                        assert!(at < 512);
                        seen[at as usize] = true;
                    }
                }
                assert!(seen.iter().all(|&s| s));
            }
        }
        // Lane l's 16 bytes: rows l, l+32, l+64, l+96, 4 scales each.
        for lane in 0..32 {
            for (group, r) in [lane, lane + 32, lane + 64, lane + 96].into_iter().enumerate() {
                for j in 0..4 {
                    assert_eq!(offset(r, j, 4), (16 * lane + 4 * group as u32 + j) as u64);
                }
            }
        }
    }

    #[test]
    fn to_blocked_matches_reference_pads_with_zero_and_round_trips() {
        for (rows, sf_cols, l) in CASES {
            let plain: Vec<u8> = (0..l * rows * sf_cols).map(|i| (i % 255 + 1) as u8).collect();
            let mut blocked = vec![0xAAu8; (l as u64 * batch_bytes(rows, sf_cols)) as usize];
            to_blocked(&plain, rows, sf_cols, l, &mut blocked);

            let per_batch = (rows * sf_cols) as usize;
            let reference: Vec<u8> = plain
                .chunks(per_batch)
                .flat_map(|batch| reference_to_blocked(batch, rows as usize, sf_cols as usize))
                .collect();
            assert_eq!(blocked, reference, "rows {rows}, sf_cols {sf_cols}, l {l}");

            // Exactly the padding rows and columns are zero (the data has no zeros).
            let zeros = blocked.iter().filter(|&&b| b == 0).count() as u64;
            let padded = (row_blocks(rows) * TILE_ROWS) as u64 * (col_blocks(sf_cols) * TILE_COLS) as u64;
            let padding = (padded - rows as u64 * sf_cols as u64) * l as u64;
            assert_eq!(zeros, padding);

            let mut back = vec![0u8; plain.len()];
            from_blocked(&blocked, rows, sf_cols, l, &mut back);
            assert_eq!(back, plain);
        }
    }

    #[test]
    fn batch_sizes() {
        assert_eq!(row_blocks(0), 0);
        assert_eq!(row_blocks(1), 1);
        assert_eq!(row_blocks(128), 1);
        assert_eq!(row_blocks(129), 2);
        assert_eq!(row_blocks(u32::MAX), 1 << 25);
        assert_eq!(batch_bytes(128, 1024), 256 * 512);
        assert_eq!(batch_bytes(7168, 1024), 56 * 256 * 512);
        assert_eq!(batch_bytes(300, 4), 3 * 512);
    }

    #[test]
    fn partial_tiles_are_padded_with_zero_columns() {
        // K = 96: 6 scales per row fill one tile and half of the next.
        let mut blocked = [0xAAu8; 1024];
        to_blocked(&[1, 2, 3, 4, 5, 6], 1, 6, 1, &mut blocked);
        assert_eq!(blocked[..4], [1, 2, 3, 4]);
        assert_eq!(blocked[512..516], [5, 6, 0, 0]);
        assert_eq!(batch_bytes(1, 6), 1024);
    }

    #[test]
    #[should_panic(expected = "blocked scales")]
    fn to_blocked_rejects_a_short_buffer() {
        to_blocked(&[0; 4], 1, 4, 1, &mut [0; 256]);
    }
}
