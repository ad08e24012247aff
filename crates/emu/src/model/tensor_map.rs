//! The emulator's tensor map: the equivalent of a `CUtensorMap` in tiled mode, as consumed by
//! `cp.async.bulk.tensor` (TMA) — PTX ISA §5.5 "Tensors" (subsections "Tensor Dimension, size
//! and format", "Tiled mode": "Bounding Box", "Out of Boundary Access", "Tensor-copy Swizzling
//! Modes") and §9.7.9.25 "cp.async.bulk.tensor"; CUDA driver API `cuTensorMapEncodeTiled` for
//! the parameter rules.
//!
//! A tensor map describes a strided tensor of rank 1..=5 in global memory and a *box* (bounding
//! box) shape. A tensor copy moves the box whose origin is at given signed element coordinates
//! between global memory and a dense (optionally swizzled) tile in shared memory.
//! [`TensorMap::box_plan`] turns one copy into a list of byte runs; the core performs them.
//!
//! Dimension 0 is the innermost (contiguous) dimension, as in the driver API and the PTX
//! coordinate order `{x, y, ...}`.
//!
//! Modelled: interleave NONE, element strides of 1, swizzle NONE/32B/64B/128B with the inner box
//! exactly one swizzle span wide, OOB fill zero or NaN (2- and 4-byte elements). Anything else is
//! rejected by [`TensorMap::validate`] rather than approximated.

/// The shared-memory swizzle of a tensor copy (`CUtensorMapSwizzle`; PTX ISA §5.5 "Tensor-copy
/// Swizzling Modes"). Note the encodings differ from the wgmma descriptor's (TMA 128B = 3,
/// wgmma 128B = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmaSwizzle {
    /// `CU_TENSOR_MAP_SWIZZLE_NONE` (0): the box is stored densely, unpermuted.
    None,
    /// `CU_TENSOR_MAP_SWIZZLE_32B` (1): span 32 B, pattern repeats every 256 B.
    B32,
    /// `CU_TENSOR_MAP_SWIZZLE_64B` (2): span 64 B, pattern repeats every 512 B.
    B64,
    /// `CU_TENSOR_MAP_SWIZZLE_128B` (3): span 128 B, pattern repeats every 1024 B.
    B128,
}

impl TmaSwizzle {
    /// The swizzle span in bytes (the width of the rows it permutes), `None` for no swizzle.
    pub fn span(self) -> Option<u32> {
        match self {
            TmaSwizzle::None => None,
            TmaSwizzle::B32 => Some(32),
            TmaSwizzle::B64 => Some(64),
            TmaSwizzle::B128 => Some(128),
        }
    }

    /// Alignment the model requires of the shared-memory destination: 128 B without swizzle
    /// (the PTX ISA requires 128-byte alignment of the shared-memory address of a tensor copy),
    /// and the pattern's repeat (8 rows × span: 256/512/1024 B) with swizzle, so that the
    /// hardware's absolute-address swizzle starts at row 0 of the pattern at the tile start
    /// (CUTLASS aligns swizzled tiles the same way; sm90-wgmma.md §6 item 2). Real hardware may
    /// accept a less aligned swizzled destination, the pattern then starting mid-repeat; the
    /// model rejects it because the project's readers assume tile-relative rows.
    pub fn smem_alignment(self) -> u32 {
        self.span().map_or(128, |span| 8 * span)
    }

    /// Swizzles an absolute shared address: the 16-byte-chunk bits are XORed with the bits just
    /// above a span-wide row, modulo 8 rows. 128B: `bits[4:6] ^= bits[7:9]`;
    /// 64B: `bits[4:5] ^= bits[7:8]`; 32B: `bit 4 ^= bit 7` (CUTLASS `Swizzle<3,4,3>`,
    /// `<2,4,3>`, `<1,4,3>`). For a tile aligned to [`TmaSwizzle::smem_alignment`], with rows of
    /// one span, chunk `c` of row `r` lands at chunk `c ^ (r % 8)` (128B), `c ^ ((r / 2) % 4)`
    /// (64B), `c ^ ((r / 4) % 2)` (32B).
    pub fn apply(self, addr: u32) -> u32 {
        match self {
            TmaSwizzle::None => addr,
            TmaSwizzle::B32 => addr ^ ((addr >> 3) & 0x10),
            TmaSwizzle::B64 => addr ^ ((addr >> 3) & 0x30),
            TmaSwizzle::B128 => addr ^ ((addr >> 3) & 0x70),
        }
    }
}

/// What an out-of-bound element of the box reads as (`CUtensorMapFloatOOBfill`; PTX ISA §5.5
/// "Out of Boundary Access").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OobFill {
    /// `CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE` (0): zeros.
    Zero,
    /// `CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA` (1): a NaN, for floating-point
    /// element types only. For 2-byte elements the model writes 0x7FF7, the bits an H100 wrote
    /// for an f16 tensor in the `tma` probe (2026-11-23; not the canonical 0x7FFF). For 4-byte
    /// elements (f32) it writes 0x7FFF_FFFF, which no probe has measured yet; other sizes are
    /// rejected. Any NaN-aware check should test for NaN, not these bits.
    NanRequestZeroFma,
}

/// A tiled-mode tensor map (the fields of `cuTensorMapEncodeTiled`, minus the data type — only
/// its size matters to a copy — interleave, L2 promotion).
///
/// Entries of `dims`, `strides`, `box_dims`, `elem_strides` at index ≥ `rank` are ignored, as is
/// `strides[0]` (the innermost stride is the element size); [`TensorMap::encode`] does not store
/// them and [`TensorMap::decode`] returns them as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMap {
    /// Bytes per element: 1, 2, 4 or 8.
    pub elem_bytes: u32,
    /// Number of dimensions, 1..=5.
    pub rank: u32,
    /// Global address of element (0, 0, ...), 16-byte aligned.
    pub global_addr: u64,
    /// Tensor extent per dimension, in elements (dimension 0 innermost), each 1..=2^32.
    pub dims: [u64; 5],
    /// Byte stride of dimensions 1..rank; multiples of 16, below 2^40. `strides[0]` is ignored.
    pub strides: [u64; 5],
    /// Box extent per dimension, in elements, each 1..=256.
    pub box_dims: [u32; 5],
    /// Traversal ("element") strides; only 1 is modelled.
    pub elem_strides: [u32; 5],
    /// Shared-memory swizzle.
    pub swizzle: TmaSwizzle,
    /// Out-of-bound fill.
    pub oob_fill: OobFill,
}

/// One contiguous piece of a box copy: `bytes` bytes at shared address `smem_addr`, which
/// correspond to `bytes` contiguous global bytes starting at `global_addr`, or — `None` — to
/// out-of-bound elements.
///
/// For a load (global → shared) a `None` run is filled with [`TensorMap::fill_element`]
/// repeated. For a store (shared → global) a `None` run is skipped: out-of-bound elements are
/// not written (PTX ISA §5.5 "Out of Boundary Access").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoxRun {
    /// Shared-window byte address (swizzle applied).
    pub smem_addr: u32,
    /// Global byte address, or `None` for out-of-bound elements.
    pub global_addr: Option<u64>,
    /// Length in bytes: a whole number of elements, never crossing a 16-byte shared chunk.
    pub bytes: u32,
}

/// Largest box the model accepts: the 2^18-byte shared window. A larger box could never be
/// delivered to one CTA; the driver does not necessarily reject it, the model does.
const MAX_BOX_BYTES: u64 = 1 << 18;

/// Tag in bytes 0..8 of an encoded map, so that decoding a pointer to anything else fails.
const MAGIC: [u8; 8] = *b"emuTMAP1";

// Byte offsets of the encoded format (all integers little-endian).
const OFF_ELEM_BYTES: usize = 8; // u8
const OFF_RANK: usize = 9; // u8
const OFF_SWIZZLE: usize = 10; // u8, CUtensorMapSwizzle value
const OFF_OOB: usize = 11; // u8, CUtensorMapFloatOOBfill value
const OFF_GLOBAL: usize = 16; // u64
const OFF_DIMS: usize = 24; // 5 × u64
const OFF_STRIDES: usize = 64; // 4 × u64: strides[1..5]
const OFF_BOX: usize = 96; // 5 × u16
const OFF_ELEM_STRIDES: usize = 106; // 5 × u8
const END_FIELDS: usize = 111; // bytes 12..16 and 111..128 are reserved (zero)

impl TensorMap {
    /// Applies `cuTensorMapEncodeTiled`'s parameter rules (interleave NONE), plus the model's
    /// own limits, each marked below. Returns the first violation, naming the field and value.
    ///
    /// Driver rules: rank 1..=5; element size 1, 2, 4 or 8 bytes; global address 16-byte
    /// aligned; every dimension 1..=2^32; every stride of dimensions 1.. a multiple of 16 and
    /// below 2^40; box dimensions 1..=256; inner box bytes (`box_dims[0] · elem_bytes`) a multiple
    /// of 16; with a swizzle, inner box bytes ≤ the swizzle span; NaN fill only for float types.
    ///
    /// Stricter than the driver (model limits):
    /// * `strides[i] ≥ dims[i-1] · strides[i-1]` (with `strides[0]` = element size): rows may
    ///   not overlap. The driver only checks alignment and range.
    /// * element strides must be 1 (the driver allows 1..=8; strided traversal is not modelled).
    /// * with a swizzle, inner box bytes must **equal** the span (smaller boxes are not
    ///   modelled); this is also the only form the project uses (sm90-wgmma.md §1.2, §6 item 15).
    /// * NaN fill needs 2- or 4-byte elements (the sizes whose NaN the model knows).
    /// * the whole box is at most 2^18 bytes.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=5).contains(&self.rank) {
            return Err(format!("tensor map rank {} not in 1..=5", self.rank));
        }
        let rank = self.rank as usize;
        let eb = self.elem_bytes;
        if ![1, 2, 4, 8].contains(&eb) {
            return Err(format!("tensor map elem_bytes {eb} not one of 1, 2, 4, 8"));
        }
        if !self.global_addr.is_multiple_of(16) {
            return Err(format!("tensor map global_addr {:#x} not 16-byte aligned", self.global_addr));
        }
        for i in 0..rank {
            if !(1..=1u64 << 32).contains(&self.dims[i]) {
                return Err(format!("tensor map dims[{i}] = {} not in 1..=2^32", self.dims[i]));
            }
            if !(1..=256).contains(&self.box_dims[i]) {
                return Err(format!("tensor map box_dims[{i}] = {} not in 1..=256", self.box_dims[i]));
            }
            if self.elem_strides[i] != 1 {
                return Err(format!(
                    "tensor map elem_strides[{i}] = {}: only 1 is modelled (the driver allows \
                     1..=8)",
                    self.elem_strides[i]
                ));
            }
        }
        for i in 1..rank {
            let stride = self.strides[i];
            if !stride.is_multiple_of(16) || stride >= 1 << 40 {
                return Err(format!("tensor map strides[{i}] = {stride} must be a multiple of 16 below 2^40"));
            }
            let below = if i == 1 { u64::from(eb) } else { self.strides[i - 1] };
            let extent = u128::from(self.dims[i - 1]) * u128::from(below);
            if u128::from(stride) < extent {
                return Err(format!(
                    "tensor map strides[{i}] = {stride} is below dims[{}] · stride = {extent}: \
                     rows would overlap (a model rule; the driver does not check it)",
                    i - 1
                ));
            }
        }
        let inner = self.box_dims[0] * eb;
        if !inner.is_multiple_of(16) {
            return Err(format!(
                "tensor map inner box bytes box_dims[0] · elem_bytes = {inner} not a multiple of \
                 16"
            ));
        }
        if let Some(span) = self.swizzle.span()
            && inner != span
        {
            return Err(format!(
                "tensor map with {:?} swizzle: inner box bytes {inner} must equal the span {span} \
                 (the driver allows ≤ span; smaller boxes are not modelled)",
                self.swizzle
            ));
        }
        if self.oob_fill == OobFill::NanRequestZeroFma && eb != 2 && eb != 4 {
            return Err(format!(
                "tensor map NaN OOB fill with elem_bytes {eb}: only 2- and 4-byte floats are \
                 modelled"
            ));
        }
        let total = self.box_dims[..rank].iter().fold(u64::from(eb), |acc, &b| acc * u64::from(b));
        if total > MAX_BOX_BYTES {
            return Err(format!("tensor map box of {total} bytes exceeds the 2^18-byte shared window"));
        }
        Ok(())
    }

    /// Bytes one tensor copy delivers to shared memory: `product(box_dims) · elem_bytes`,
    /// out-of-bound fill included — the `complete_tx` byte count an `mbarrier.expect_tx` must
    /// match (PTX ISA §9.7.9.25 "cp.async.bulk.tensor", `.mbarrier::complete_tx::bytes`).
    /// Saturates at `u32::MAX` for a map that fails [`TensorMap::validate`].
    pub fn box_bytes(&self) -> u32 {
        let rank = (self.rank as usize).min(5);
        let total =
            self.box_dims[..rank].iter().fold(u64::from(self.elem_bytes), |acc, &b| acc.saturating_mul(u64::from(b)));
        u32::try_from(total).unwrap_or(u32::MAX)
    }

    /// The bytes of one out-of-bound element as loaded into shared memory (little-endian):
    /// zeros, or the canonical NaN of the element size (see [`OobFill`]).
    pub fn fill_element(&self) -> Result<Vec<u8>, String> {
        match (self.oob_fill, self.elem_bytes) {
            (OobFill::Zero, eb @ (1 | 2 | 4 | 8)) => Ok(vec![0; eb as usize]),
            (OobFill::NanRequestZeroFma, 2) => Ok(0x7FF7u16.to_le_bytes().to_vec()),
            (OobFill::NanRequestZeroFma, 4) => Ok(0x7FFF_FFFFu32.to_le_bytes().to_vec()),
            (fill, eb) => Err(format!("tensor map {fill:?} fill with elem_bytes {eb} not modelled")),
        }
    }

    /// Plans one tiled tensor copy of the box at signed element coordinates `coords` (one per
    /// dimension, innermost first) to/from the shared tile at `smem_dst`.
    ///
    /// Placement (PTX ISA §5.5 "Tiled mode", "Tensor-copy Swizzling Modes"): the box is stored in
    /// shared memory densely, innermost dimension fastest; a "row" is the `box_dims[0]` elements
    /// of one index of the outer dimensions, and rows follow each other at a pitch of
    /// `box_dims[0] · elem_bytes`. With a swizzle, every 16-byte chunk is moved by
    /// [`TmaSwizzle::apply`] on its absolute address.
    ///
    /// Bounds (§5.5 "Out of Boundary Access"): element `coords[i] + j` of dimension i is out of
    /// bounds unless it lies in `[0, dims[i])`; coordinates may be negative or past the end. The
    /// box is always delivered whole — out-of-bound elements are filled — so the byte count is
    /// always [`TensorMap::box_bytes`].
    ///
    /// Granularity: runs are listed in shared-memory order of the unswizzled tile; each lies in
    /// one 16-byte chunk (the swizzle's unit), and a chunk is split where its elements cross a
    /// bound of dimension 0, so a chunk gives one to three runs.
    ///
    /// Errors: an invalid map (see [`TensorMap::validate`]); `coords.len() != rank`; `smem_dst`
    /// not aligned to [`TmaSwizzle::smem_alignment`]; a tile or global address that overflows.
    pub fn box_plan(&self, coords: &[i32], smem_dst: u32) -> Result<Vec<BoxRun>, String> {
        self.validate()?;
        let rank = self.rank as usize;
        if coords.len() != rank {
            return Err(format!("tensor copy has {} coordinates, the tensor map has rank {rank}", coords.len()));
        }
        let align = self.swizzle.smem_alignment();
        if !smem_dst.is_multiple_of(align) {
            return Err(format!(
                "tensor copy shared destination {smem_dst:#x} not {align}-byte aligned (swizzle \
                 {:?})",
                self.swizzle
            ));
        }
        if smem_dst.checked_add(self.box_bytes()).is_none() {
            return Err(format!("tensor copy shared destination {smem_dst:#x} + box overflows"));
        }
        let eb = self.elem_bytes;
        let pitch = self.box_dims[0] * eb;
        let per_chunk = 16 / eb;
        let rows: u32 = self.box_dims[1..rank].iter().product();
        let dim0 = i64::try_from(self.dims[0]).unwrap_or(i64::MAX);
        let mut runs = Vec::new();
        for row in 0..rows {
            // Byte offset of the row's global start (dimensions ≥ 1), or None if out of bounds.
            let mut row_offset = Some(0u128);
            let mut rest = row;
            for (d, &origin) in coords.iter().enumerate().skip(1) {
                let c = i64::from(origin) + i64::from(rest % self.box_dims[d]);
                rest /= self.box_dims[d];
                row_offset = match u64::try_from(c) {
                    Ok(c) if c < self.dims[d] => row_offset.map(|o| o + u128::from(c) * u128::from(self.strides[d])),
                    _ => None,
                };
            }
            for chunk in 0..pitch / 16 {
                let smem = self.swizzle.apply(smem_dst + row * pitch + 16 * chunk);
                let x0 = i64::from(coords[0]) + i64::from(chunk * per_chunk);
                // Elements j in [lo, hi) of the chunk are in bounds.
                let n = i64::from(per_chunk);
                let (lo, hi) = match row_offset {
                    Some(_) => {
                        let lo = (-x0).clamp(0, n);
                        (lo, (dim0 - x0).clamp(0, n).max(lo))
                    }
                    None => (n, n),
                };
                let span = |a: i64, b: i64, global: Option<u64>| BoxRun {
                    smem_addr: smem + a as u32 * eb,
                    global_addr: global,
                    bytes: (b - a) as u32 * eb,
                };
                if lo > 0 {
                    runs.push(span(0, lo, None));
                }
                if let (true, Some(offset)) = (hi > lo, row_offset) {
                    let x = (x0 + lo) as u128; // ≥ 0: lo ≥ -x0
                    let addr = u128::from(self.global_addr) + offset + x * u128::from(eb);
                    let addr = u64::try_from(addr)
                        .map_err(|_| format!("tensor copy global address {addr:#x} overflows 64 bits"))?;
                    runs.push(span(lo, hi, Some(addr)));
                }
                if hi < n {
                    runs.push(span(hi, n, None));
                }
            }
        }
        Ok(runs)
    }

    /// Encodes the map into the emulator's 128-byte tensor-map object (the size and role of a
    /// `CUtensorMap`, not its layout). Like `cuTensorMapEncodeTiled`, it validates first.
    ///
    /// Format (little-endian): bytes 0..8 the tag `b"emuTMAP1"`; 8 elem_bytes (u8); 9 rank (u8);
    /// 10 swizzle (u8, `CUtensorMapSwizzle` value 0..=3); 11 OOB fill (u8,
    /// `CUtensorMapFloatOOBfill` value 0..=1); 16..24 global address; 24..64 dims[0..5] (u64);
    /// 64..96 strides[1..5] (u64); 96..106 box_dims (u16); 106..111 elem_strides (u8). Entries
    /// at index ≥ rank, bytes 12..16 and 111..128 are zero.
    pub fn encode(&self) -> Result<[u8; 128], String> {
        self.validate()?;
        let rank = self.rank as usize;
        let mut out = [0u8; 128];
        out[..8].copy_from_slice(&MAGIC);
        out[OFF_ELEM_BYTES] = self.elem_bytes as u8;
        out[OFF_RANK] = self.rank as u8;
        out[OFF_SWIZZLE] = match self.swizzle {
            TmaSwizzle::None => 0,
            TmaSwizzle::B32 => 1,
            TmaSwizzle::B64 => 2,
            TmaSwizzle::B128 => 3,
        };
        out[OFF_OOB] = match self.oob_fill {
            OobFill::Zero => 0,
            OobFill::NanRequestZeroFma => 1,
        };
        out[OFF_GLOBAL..OFF_GLOBAL + 8].copy_from_slice(&self.global_addr.to_le_bytes());
        for i in 0..rank {
            let at = OFF_DIMS + 8 * i;
            out[at..at + 8].copy_from_slice(&self.dims[i].to_le_bytes());
            if i > 0 {
                let at = OFF_STRIDES + 8 * (i - 1);
                out[at..at + 8].copy_from_slice(&self.strides[i].to_le_bytes());
            }
            // validate() bounds these to 256 and 1.
            let at = OFF_BOX + 2 * i;
            out[at..at + 2].copy_from_slice(&(self.box_dims[i] as u16).to_le_bytes());
            out[OFF_ELEM_STRIDES + i] = self.elem_strides[i] as u8;
        }
        Ok(out)
    }

    /// Decodes a 128-byte tensor-map object written by [`TensorMap::encode`]. Fails with
    /// "not a tensor map" when the tag is missing (a stray pointer), and with "corrupt tensor
    /// map" when the tag is present but a field is out of range, a reserved or unused byte is
    /// non-zero, or the result fails [`TensorMap::validate`].
    pub fn decode(bytes: &[u8; 128]) -> Result<TensorMap, String> {
        if bytes[..8] != MAGIC {
            return Err(format!(
                "not a tensor map: bytes 0..8 are {:02x?}, expected the tag {:02x?}",
                &bytes[..8],
                MAGIC
            ));
        }
        let corrupt = |what: String| format!("corrupt tensor map: {what}");
        let rank = bytes[OFF_RANK];
        if !(1..=5).contains(&rank) {
            return Err(corrupt(format!("rank {rank} not in 1..=5")));
        }
        let rank = usize::from(rank);
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let mut used = [false; 128];
        let mut mark = |at: usize, len: usize| used[at..at + len].fill(true);
        mark(0, 12);
        mark(OFF_GLOBAL, 8);
        let mut map = TensorMap {
            elem_bytes: u32::from(bytes[OFF_ELEM_BYTES]),
            rank: rank as u32,
            global_addr: u64_at(OFF_GLOBAL),
            dims: [0; 5],
            strides: [0; 5],
            box_dims: [0; 5],
            elem_strides: [0; 5],
            swizzle: match bytes[OFF_SWIZZLE] {
                0 => TmaSwizzle::None,
                1 => TmaSwizzle::B32,
                2 => TmaSwizzle::B64,
                3 => TmaSwizzle::B128,
                code => return Err(corrupt(format!("swizzle code {code} not in 0..=3"))),
            },
            oob_fill: match bytes[OFF_OOB] {
                0 => OobFill::Zero,
                1 => OobFill::NanRequestZeroFma,
                code => return Err(corrupt(format!("OOB fill code {code} not in 0..=1"))),
            },
        };
        for i in 0..rank {
            map.dims[i] = u64_at(OFF_DIMS + 8 * i);
            mark(OFF_DIMS + 8 * i, 8);
            if i > 0 {
                map.strides[i] = u64_at(OFF_STRIDES + 8 * (i - 1));
                mark(OFF_STRIDES + 8 * (i - 1), 8);
            }
            let at = OFF_BOX + 2 * i;
            map.box_dims[i] = u32::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
            mark(at, 2);
            map.elem_strides[i] = u32::from(bytes[OFF_ELEM_STRIDES + i]);
            mark(OFF_ELEM_STRIDES + i, 1);
        }
        if let Some(at) = (0..128).find(|&at| !used[at] && bytes[at] != 0) {
            let reserved = (12..16).contains(&at) || at >= END_FIELDS;
            let region = if reserved { "reserved" } else { "unused entry" };
            return Err(corrupt(format!("{region} byte {at} is {:#04x}, must be 0", bytes[at])));
        }
        map.validate().map_err(corrupt)?;
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::super::wgmma;
    use super::*;

    /// A 2-D map with all unused entries zero (the form decode returns).
    fn map2d(elem_bytes: u32, dims: [u64; 2], stride: u64, box_dims: [u32; 2]) -> TensorMap {
        TensorMap {
            elem_bytes,
            rank: 2,
            global_addr: 0x10_0000,
            dims: [dims[0], dims[1], 0, 0, 0],
            strides: [0, stride, 0, 0, 0],
            box_dims: [box_dims[0], box_dims[1], 0, 0, 0],
            elem_strides: [1, 1, 0, 0, 0],
            swizzle: TmaSwizzle::None,
            oob_fill: OobFill::Zero,
        }
    }

    fn run(smem_addr: u32, global_addr: Option<u64>, bytes: u32) -> BoxRun {
        BoxRun { smem_addr, global_addr, bytes }
    }

    /// Performs a load plan: global memory is `global` at `map.global_addr`, shared memory is
    /// `smem` at address 0.
    fn load(map: &TensorMap, coords: &[i32], dst: u32, global: &[u8], smem: &mut [u8]) {
        let fill = map.fill_element().unwrap();
        let runs = map.box_plan(coords, dst).unwrap();
        assert_eq!(runs.iter().map(|r| r.bytes).sum::<u32>(), map.box_bytes());
        for r in runs {
            let s = r.smem_addr as usize;
            let dst = &mut smem[s..s + r.bytes as usize];
            match r.global_addr {
                Some(g) => {
                    let g = (g - map.global_addr) as usize;
                    dst.copy_from_slice(&global[g..g + r.bytes as usize]);
                }
                None => dst.chunks_exact_mut(fill.len()).for_each(|e| e.copy_from_slice(&fill)),
            }
        }
    }

    #[test]
    fn u8_box_in_bounds() {
        // 100 × 50 bytes, rows 112 B apart; box 32 × 4 at (16, 3) into 0x400.
        let map = map2d(1, [100, 50], 112, [32, 4]);
        map.validate().unwrap();
        assert_eq!(map.box_bytes(), 128);
        let runs = map.box_plan(&[16, 3], 0x400).unwrap();
        let g = |x: u64, y: u64| Some(0x10_0000 + y * 112 + x);
        assert_eq!(runs.len(), 8);
        assert_eq!(runs[0], run(0x400, g(16, 3), 16));
        assert_eq!(runs[1], run(0x410, g(32, 3), 16));
        assert_eq!(runs[2], run(0x420, g(16, 4), 16));
        assert_eq!(runs[7], run(0x470, g(32, 6), 16));
    }

    #[test]
    fn u8_box_negative_coordinates() {
        // Box 32 × 4 at (-8, -1): row y = -1 is filled; x in [-8, 0) is filled.
        let map = map2d(1, [100, 50], 112, [32, 4]);
        let runs = map.box_plan(&[-8, -1], 0x400).unwrap();
        let g = |x: u64, y: u64| Some(0x10_0000 + y * 112 + x);
        assert_eq!(
            runs[..5],
            [
                run(0x400, None, 16),
                run(0x410, None, 16),
                run(0x420, None, 8),
                run(0x428, g(0, 0), 8),
                run(0x430, g(8, 0), 16),
            ]
        );
        assert_eq!(runs.len(), 2 + 3 * 3);
    }

    #[test]
    fn u8_box_past_the_end() {
        // Box 32 × 4 at (80, 48): x in [100, 112) and rows 50, 51 are out of bounds.
        let map = map2d(1, [100, 50], 112, [32, 4]);
        let runs = map.box_plan(&[80, 48], 0).unwrap();
        let g = |x: u64, y: u64| Some(0x10_0000 + y * 112 + x);
        assert_eq!(
            runs,
            [
                run(0x00, g(80, 48), 16),
                run(0x10, g(96, 48), 4),
                run(0x14, None, 12),
                run(0x20, g(80, 49), 16),
                run(0x30, g(96, 49), 4),
                run(0x34, None, 12),
                run(0x40, None, 16),
                run(0x50, None, 16),
                run(0x60, None, 16),
                run(0x70, None, 16),
            ]
        );
        // A box entirely outside still delivers its full size.
        let far = map.box_plan(&[1000, -1000], 0).unwrap();
        assert!(far.iter().all(|r| r.global_addr.is_none()));
        assert_eq!(far.iter().map(|r| r.bytes).sum::<u32>(), 128);
    }

    #[test]
    fn f16_box_with_zero_and_nan_fill() {
        // 20 × 3 f16 (rows 48 B apart), box 16 × 4 at (12, 1): elements x ≥ 20, row 3 are OOB.
        let mut map = map2d(2, [20, 3], 48, [16, 4]);
        let global: Vec<u8> = (0..3 * 48).map(|i| i as u8).collect();
        let mut smem = vec![0xEEu8; 128];
        load(&map, &[12, 1], 0, &global, &mut smem);
        let at = |x: usize, y: usize| smem[(y * 16 + x) * 2];
        assert_eq!(at(0, 0), (48 + 24) as u8); // element (12, 1)
        assert_eq!(at(7, 0), (48 + 38) as u8); // element (19, 1)
        assert_eq!(at(8, 0), 0); // element (20, 1): OOB
        assert_eq!(at(0, 1), (96 + 24) as u8);
        assert!(smem[96..].iter().all(|&b| b == 0)); // row 3
        map.oob_fill = OobFill::NanRequestZeroFma;
        load(&map, &[12, 1], 0, &global, &mut smem);
        assert_eq!(smem[16..18], [0xF7, 0x7F]); // the H100's f16 NaN fill 0x7FF7, little-endian
        assert_eq!(smem[126..128], [0xF7, 0x7F]);
        assert_eq!(smem[0], (48 + 24) as u8);
    }

    #[test]
    fn f32_nan_fill_and_rank3() {
        // 4 × 2 × 2 f32, box 4 × 2 × 2 at (0, 0, 1): the z = 2 plane is OOB.
        let map = TensorMap {
            elem_bytes: 4,
            rank: 3,
            global_addr: 0x2000,
            dims: [4, 2, 2, 0, 0],
            strides: [0, 16, 32, 0, 0],
            box_dims: [4, 2, 2, 0, 0],
            elem_strides: [1, 1, 1, 0, 0],
            swizzle: TmaSwizzle::None,
            oob_fill: OobFill::NanRequestZeroFma,
        };
        assert_eq!(map.fill_element().unwrap(), [0xFF, 0xFF, 0xFF, 0x7F]);
        let runs = map.box_plan(&[0, 0, 1], 0x80).unwrap();
        assert_eq!(
            runs,
            [run(0x80, Some(0x2020), 16), run(0x90, Some(0x2030), 16), run(0xA0, None, 16), run(0xB0, None, 16),]
        );
    }

    #[test]
    fn rank1_box() {
        // 40 bytes, box of 32 at 24: [24, 40) in bounds, [40, 56) filled.
        let map = TensorMap {
            elem_bytes: 1,
            rank: 1,
            global_addr: 0x40,
            dims: [40, 0, 0, 0, 0],
            strides: [0; 5],
            box_dims: [32, 0, 0, 0, 0],
            elem_strides: [1, 0, 0, 0, 0],
            swizzle: TmaSwizzle::None,
            oob_fill: OobFill::Zero,
        };
        assert_eq!(map.box_plan(&[24], 0x100).unwrap(), [run(0x100, Some(0x58), 16), run(0x110, None, 16)]);
        assert_eq!(TensorMap::decode(&map.encode().unwrap()).unwrap(), map);
    }

    #[test]
    fn swizzle128_f16_box_matches_the_tile_formula_and_wgmma() {
        // A 256 × 64 f16 tensor (K-major, 128-B rows), box 64 × 64 at (0, 64) into a 1024-aligned
        // tile: element (r, k) of the box lands at 128r + 16((k/8) ^ (r%8)) + 2(k%8), which is
        // where a SW128 wgmma descriptor reads it (start + 32j for k16 step j).
        let mut map = map2d(2, [64, 256], 128, [64, 64]);
        map.swizzle = TmaSwizzle::B128;
        let value = |r: usize, k: usize| (r * 64 + k) as u16;
        let global: Vec<u8> = (0..256 * 64).flat_map(|i| value(i / 64, i % 64).to_le_bytes()).collect();
        let tile = 0x2400usize;
        let mut smem = vec![0u8; tile + 64 * 128];
        load(&map, &[0, 64], tile as u32, &global, &mut smem);
        let read = |addr: usize| u16::from_le_bytes([smem[addr], smem[addr + 1]]);
        for r in 0..64 {
            for k in 0..64 {
                let off = 128 * r + 16 * ((k / 8) ^ (r % 8)) + 2 * (k % 8);
                assert_eq!(read(tile + off), value(64 + r, k), "r {r} k {k}");
                let j = (k / 16) as u64;
                let desc = ((tile as u64 + 32 * j) >> 4) | (1 << 16) | (64 << 32) | (1 << 62);
                let d = wgmma::decode_desc(desc).unwrap();
                let addr = d.k_major_addr(r as u32, 2 * (k as u32 % 16)).unwrap();
                assert_eq!(addr as usize, tile + off);
            }
        }
    }

    #[test]
    fn swizzle64_and_32_placement() {
        for (swizzle, span, align) in [(TmaSwizzle::B64, 64u32, 512u32), (TmaSwizzle::B32, 32, 256)] {
            let mut map = map2d(1, [span as u64, 16], span as u64, [span, 16]);
            map.swizzle = swizzle;
            assert_eq!(swizzle.smem_alignment(), align);
            let runs = map.box_plan(&[0, 0], align).unwrap();
            for r in runs {
                let g = r.global_addr.unwrap() - map.global_addr;
                let (row, chunk) = ((g / span as u64) as u32, (g % span as u64) as u32 / 16);
                let phase = if span == 64 { (row / 2) % 4 } else { (row / 4) % 2 };
                assert_eq!(r.smem_addr, align + row * span + 16 * (chunk ^ phase));
            }
        }
    }

    #[test]
    fn validate_rejects_each_bad_parameter() {
        let good = map2d(2, [64, 256], 128, [64, 64]);
        good.validate().unwrap();
        type Mutation = fn(&mut TensorMap);
        let cases: [(&str, Mutation); 16] = [
            ("rank 0", |m| m.rank = 0),
            ("rank 6", |m| m.rank = 6),
            ("elem_bytes 3", |m| m.elem_bytes = 3),
            ("global_addr 0x100008", |m| m.global_addr += 8),
            ("dims[1] = 0", |m| m.dims[1] = 0),
            ("dims[0] = 4294967297", |m| m.dims[0] = (1 << 32) + 1),
            ("strides[1] = 136", |m| m.strides[1] = 136),
            ("strides[1] = 1099511627776", |m| m.strides[1] = 1 << 40),
            ("strides[1] = 112 is below", |m| m.strides[1] = 112),
            ("box_dims[1] = 0", |m| m.box_dims[1] = 0),
            ("box_dims[1] = 257", |m| m.box_dims[1] = 257),
            ("box bytes", |m| m.box_dims[0] = 4),
            ("elem_strides[0] = 2", |m| m.elem_strides[0] = 2),
            ("must equal the span 64", |m| m.swizzle = TmaSwizzle::B64),
            ("NaN OOB fill with elem_bytes 1", |m| {
                m.elem_bytes = 1;
                m.box_dims[0] = 128;
                m.oob_fill = OobFill::NanRequestZeroFma;
            }),
            ("exceeds", |m| {
                m.rank = 3;
                m.dims[2] = 4;
                m.strides[2] = 128 * 256;
                m.box_dims[2] = 64;
                m.elem_strides[2] = 1;
            }),
        ];
        for (want, mutate) in cases {
            let mut m = good;
            mutate(&mut m);
            let err = m.validate().unwrap_err();
            assert!(err.contains(want), "expected {want:?} in {err:?}");
            assert_eq!(m.encode().unwrap_err(), err);
            assert!(m.box_plan(&[0, 0], 0).is_err());
        }
        // Rank-3 strides are checked against the previous stride, not the element size.
        let mut m = good;
        m.rank = 3;
        m.dims[2] = 2;
        m.strides[2] = 128 * 255;
        m.box_dims[2] = 1;
        m.elem_strides[2] = 1;
        assert!(m.validate().unwrap_err().contains("strides[2]"));
        m.strides[2] = 128 * 256;
        m.validate().unwrap();
        // Unused entries are ignored.
        m.box_dims[4] = 9999;
        m.validate().unwrap();
    }

    #[test]
    fn box_plan_argument_errors() {
        let mut map = map2d(2, [64, 256], 128, [64, 64]);
        assert!(map.box_plan(&[0], 0).unwrap_err().contains("1 coordinates"));
        assert!(map.box_plan(&[0, 0], 0x440).unwrap_err().contains("128-byte aligned"));
        map.box_plan(&[0, 0], 0x480).unwrap();
        map.swizzle = TmaSwizzle::B128;
        assert!(map.box_plan(&[0, 0], 0x480).unwrap_err().contains("1024-byte aligned"));
        assert!(map.box_plan(&[0, 0], 0xFFFF_FC00).unwrap_err().contains("overflows"));
        // Global address overflow: a huge tensor near the top of the address space.
        map.global_addr = u64::MAX - 15;
        assert!(map.box_plan(&[0, 0], 0).unwrap_err().contains("overflows 64 bits"));
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut map = map2d(2, [7168, 128], 7168 * 2, [64, 128]);
        map.swizzle = TmaSwizzle::B128;
        let bytes = map.encode().unwrap();
        assert_eq!(bytes[..8], *b"emuTMAP1");
        assert_eq!(bytes[10], 3);
        assert_eq!(TensorMap::decode(&bytes).unwrap(), map);
        let map5 = TensorMap {
            elem_bytes: 8,
            rank: 5,
            global_addr: 0xABCD_EF00,
            dims: [2, 3, 4, 5, 1 << 32],
            strides: [0, 16, 48, 192, 960],
            box_dims: [2, 3, 4, 5, 1],
            elem_strides: [1; 5],
            swizzle: TmaSwizzle::None,
            oob_fill: OobFill::Zero,
        };
        assert_eq!(TensorMap::decode(&map5.encode().unwrap()).unwrap(), map5);
        // Ignored fields are not stored.
        let mut noisy = map;
        noisy.strides[0] = 2;
        noisy.dims[3] = 77;
        assert_eq!(TensorMap::decode(&noisy.encode().unwrap()).unwrap(), map);
    }

    #[test]
    fn decode_rejects_garbage_and_corruption() {
        assert!(TensorMap::decode(&[0; 128]).unwrap_err().starts_with("not a tensor map"));
        let junk: [u8; 128] = std::array::from_fn(|i| (i * 37 + 11) as u8);
        assert!(TensorMap::decode(&junk).unwrap_err().starts_with("not a tensor map"));
        let good = map2d(1, [100, 50], 112, [32, 4]).encode().unwrap();
        let corrupt = |at: usize, value: u8, want: &str| {
            let mut b = good;
            b[at] = value;
            let err = TensorMap::decode(&b).unwrap_err();
            assert!(err.starts_with("corrupt tensor map") && err.contains(want), "{err}");
        };
        corrupt(9, 0, "rank 0");
        corrupt(9, 9, "rank 9");
        corrupt(10, 4, "swizzle code 4");
        corrupt(11, 2, "OOB fill code 2");
        corrupt(12, 1, "reserved byte 12");
        corrupt(127, 1, "reserved byte 127");
        corrupt(OFF_DIMS + 16, 1, "unused entry byte 40");
        corrupt(OFF_ELEM_BYTES, 3, "elem_bytes 3");
        corrupt(OFF_BOX, 0, "box_dims[0] = 0");
    }
}
