//! safetensors files in and out, so PyTorch users can bring their tensors and take C back.
//!
//! # Inputs (`a`, `b`, `sfa`, `sfb`)
//!
//! | tensor | dtype | shape | meaning |
//! |---|---|---|---|
//! | `a` | `U8` | `[L, M, K/2]` or `[M, K/2]` | two e2m1 codes per byte, low nibble = even k |
//! | `b` | `U8` | `[L, N, K/2]` or `[N, K/2]` | same, for B (C = A * B^T) |
//! | `sfa` | `F8_E4M3` or `U8` | `[L, M, K/16]` or `[M, K/16]` | e4m3fn scales of A, plain row-major |
//! | `sfb` | `F8_E4M3` or `U8` | `[L, N, K/16]` or `[N, K/16]` | e4m3fn scales of B, plain row-major |
//!
//! Rank-2 tensors mean L = 1. From PyTorch: `a` as `x.view(torch.uint8)` of a
//! `float4_e2m1fn_x2` tensor (or the packed bytes themselves), scales as
//! `torch.float8_e4m3fn` (saved as `F8_E4M3`) or their bits as `uint8`;
//! `safetensors.torch.save_file({"a": a, "b": b, "sfa": sfa, "sfb": sfb}, path)`.
//! M comes from `a`, N from `b`, K = 2 * `a.shape[-1]`; the loader converts the scales to
//! the blocked layout the kernels read ([`nvfp4::layout::to_blocked`]).
//!
//! # Output (`c`)
//!
//! `c`: `F16` (or `BF16` for a bf16 run), `[L, M, N]`, row-major (`safetensors.torch.load_file(path)["c"]`).
//!
//! Every error names the file, the tensor and what was expected, so a user can fix the
//! file without reading this code.

use std::path::{Path, PathBuf};

use nvfp4::{Shape, layout};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

use crate::problem::{Epilogue, Output, Problem};
use nvfp4::epilogue::OutDtype;

/// Why a file could not be read or written. Each message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The file could not be opened or read.
    #[error("cannot read `{}`: {source}", path.display())]
    Unreadable { path: PathBuf, source: std::io::Error },
    /// The bytes are not a valid safetensors file.
    #[error("`{}` is not a safetensors file ({reason}); write it with safetensors' `save_file`", path.display())]
    NotSafetensors { path: PathBuf, reason: String },
    /// A required tensor is absent.
    #[error("tensor `{name}` is missing from `{}`: expected {expected}", path.display())]
    MissingTensor { path: PathBuf, name: &'static str, expected: &'static str },
    /// A tensor has a dtype the loader does not take.
    #[error("tensor `{name}` has dtype {got}: expected {expected}")]
    WrongDtype { name: &'static str, got: String, expected: &'static str },
    /// A tensor has the wrong number of dimensions.
    #[error("tensor `{name}` has shape {got:?} (rank {rank}): expected {expected}", rank = got.len())]
    WrongRank { name: &'static str, got: Vec<usize>, expected: &'static str },
    /// Two tensors disagree about a dimension.
    #[error("tensors `{first}` and `{second}` disagree: {detail}")]
    Inconsistent { first: &'static str, second: &'static str, detail: String },
    /// The dimensions are consistent but the kernels do not take the shape.
    #[error("the tensors describe M = {m}, N = {n}, K = {k}, L = {l}, which is not accepted: {reason}")]
    ShapeRejected { m: usize, n: usize, k: usize, l: usize, reason: String },
    /// The file could not be written.
    #[error("cannot write `{}`: {reason}", path.display())]
    Unwritable { path: PathBuf, reason: String },
}

const A_EXPECTED: &str = "U8 with shape [L, M, K/2] or [M, K/2] (two e2m1 values per byte, \
                          low nibble = even k; from PyTorch: `.view(torch.uint8)`)";
const B_EXPECTED: &str = "U8 with shape [L, N, K/2] or [N, K/2] (two e2m1 values per byte, \
                          low nibble = even k; from PyTorch: `.view(torch.uint8)`)";
const SFA_EXPECTED: &str = "F8_E4M3 (torch.float8_e4m3fn) or U8 with shape [L, M, K/16] or \
                            [M, K/16] (one scale per 16 values of a row of `a`, row-major)";
const SFB_EXPECTED: &str = "F8_E4M3 (torch.float8_e4m3fn) or U8 with shape [L, N, K/16] or \
                            [N, K/16] (one scale per 16 values of a row of `b`, row-major)";
const C_EXPECTED: &str = "F16 with shape [L, M, N] or [M, N]";

/// A tensor's bytes, its dims as `[L, rows, cols]` (rank 2 read as L = 1) and its shape
/// as stored (for messages).
struct Loaded<'data> {
    dims: [usize; 3],
    shape: Vec<usize>,
    dtype: Dtype,
    data: &'data [u8],
}

/// Reads the whole file.
fn read(path: &Path) -> Result<Vec<u8>, IoError> {
    std::fs::read(path).map_err(|source| IoError::Unreadable { path: path.to_owned(), source })
}

/// Parses the safetensors header.
fn parse<'data>(path: &Path, bytes: &'data [u8]) -> Result<SafeTensors<'data>, IoError> {
    SafeTensors::deserialize(bytes)
        .map_err(|e| IoError::NotSafetensors { path: path.to_owned(), reason: e.to_string() })
}

/// Finds tensor `name`, checks its dtype is one of `dtypes` and its rank is 2 or 3.
fn tensor<'data>(
    path: &Path,
    file: &SafeTensors<'data>,
    name: &'static str,
    dtypes: &[Dtype],
    expected: &'static str,
) -> Result<Loaded<'data>, IoError> {
    let view = file.tensor(name).map_err(|_| IoError::MissingTensor { path: path.to_owned(), name, expected })?;
    if !dtypes.contains(&view.dtype()) {
        return Err(IoError::WrongDtype { name, got: view.dtype().to_string(), expected });
    }
    let dims = match *view.shape() {
        [rows, cols] => [1, rows, cols],
        [l, rows, cols] => [l, rows, cols],
        _ => {
            return Err(IoError::WrongRank { name, got: view.shape().to_vec(), expected });
        }
    };
    Ok(Loaded { dims, shape: view.shape().to_vec(), dtype: view.dtype(), data: view.data() })
}

/// Loads the inputs of one problem (see the module documentation for the format).
pub fn load_inputs(path: &Path) -> Result<Problem, IoError> {
    let bytes = read(path)?;
    let file = parse(path, &bytes)?;
    let a = tensor(path, &file, "a", &[Dtype::U8], A_EXPECTED)?;
    let b = tensor(path, &file, "b", &[Dtype::U8], B_EXPECTED)?;
    let scales = [Dtype::F8_E4M3, Dtype::U8];
    let sfa = tensor(path, &file, "sfa", &scales, SFA_EXPECTED)?;
    let sfb = tensor(path, &file, "sfb", &scales, SFB_EXPECTED)?;

    let [l, m, half_k] = a.dims;
    let [l_b, n, half_k_b] = b.dims;
    if l_b != l {
        return Err(IoError::Inconsistent {
            first: "a",
            second: "b",
            detail: format!("a has L = {l} batches but b has L = {l_b}"),
        });
    }
    if half_k_b != half_k {
        return Err(IoError::Inconsistent {
            first: "a",
            second: "b",
            detail: format!(
                "a has K = {} (last dim {half_k} bytes) but b has K = {} (last dim {half_k_b} \
                 bytes); both must be K/2",
                2 * half_k,
                2 * half_k_b
            ),
        });
    }
    let k = 2 * half_k;
    let shape = shape(m, n, k, l)?;
    for (name, scales, operand, rows, letter) in [("sfa", &sfa, "a", m, 'M'), ("sfb", &sfb, "b", n, 'N')] {
        let want = [l, rows, k / 16];
        if scales.dims != want {
            return Err(IoError::Inconsistent {
                first: operand,
                second: name,
                detail: format!(
                    "{operand} gives L = {l}, {letter} = {rows}, K = {k}, so {name} must have \
                     shape [L, {letter}, K/16] = {want:?}, but it has {:?}",
                    scales.shape
                ),
            });
        }
    }

    let blocked = |plain: &[u8], rows: u32| {
        let sf_cols = shape.sf_cols();
        let mut blocked = vec![0u8; (u64::from(shape.l) * layout::batch_bytes(rows, sf_cols)) as usize];
        layout::to_blocked(plain, rows, sf_cols, shape.l, &mut blocked);
        blocked
    };
    Ok(Problem {
        shape,
        a: a.data.to_vec(),
        a_format: crate::problem::AFormat::Nvfp4,
        b: b.data.to_vec(),
        sfa: blocked(sfa.data, shape.m),
        sfb: blocked(sfb.data, shape.n),
        epilogue: Epilogue::IDENTITY,
    })
}

/// Validates the dimensions the tensors describe as a [`Shape`].
fn shape(m: usize, n: usize, k: usize, l: usize) -> Result<Shape, IoError> {
    let rejected = |reason: String| IoError::ShapeRejected { m, n, k, l, reason };
    let dim = |value: usize, letter: char| {
        u32::try_from(value).map_err(|_| rejected(format!("{letter} = {value} exceeds {}", u32::MAX)))
    };
    Shape::new(dim(m, 'M')?, dim(n, 'N')?, dim(k, 'K')?, dim(l, 'L')?).map_err(|e| rejected(e.to_string()))
}

/// Writes `tensors` (name, dtype, shape, bytes) to `path`.
fn write(path: &Path, tensors: Vec<(&str, Dtype, Vec<usize>, &[u8])>) -> Result<(), IoError> {
    let unwritable = |reason: String| IoError::Unwritable { path: path.to_owned(), reason };
    let views = tensors
        .into_iter()
        .map(|(name, dtype, shape, data)| {
            TensorView::new(dtype, shape, data)
                .map(|view| (name, view))
                .map_err(|e| unwritable(format!("tensor `{name}`: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    safetensors::serialize_to_file(views, None, path).map_err(|e| unwritable(e.to_string()))
}

/// Writes a problem's inputs in the format [`load_inputs`] reads (rank 3, scales as
/// `F8_E4M3` in plain row-major order).
///
/// Precondition: `p`'s buffers have the lengths its shape gives; panics otherwise.
pub fn save_inputs(path: &Path, p: &Problem) -> Result<(), IoError> {
    crate::reference::check_lengths(p);
    let s = p.shape;
    let (l, m, n, k) = (s.l as usize, s.m as usize, s.n as usize, s.k as usize);
    let plain = |blocked: &[u8], rows: u32| {
        let mut plain = vec![0u8; l * rows as usize * (k / 16)];
        layout::from_blocked(blocked, rows, s.sf_cols(), s.l, &mut plain);
        plain
    };
    let (sfa, sfb) = (plain(&p.sfa, s.m), plain(&p.sfb, s.n));
    write(
        path,
        vec![
            ("a", Dtype::U8, vec![l, m, k / 2], p.a.as_slice()),
            ("b", Dtype::U8, vec![l, n, k / 2], p.b.as_slice()),
            ("sfa", Dtype::F8_E4M3, vec![l, m, k / 16], sfa.as_slice()),
            ("sfb", Dtype::F8_E4M3, vec![l, n, k / 16], sfb.as_slice()),
        ],
    )
}

/// The safetensors dtype of an output type.
fn out_dtype_tag(out: OutDtype) -> Dtype {
    match out {
        OutDtype::F16 => Dtype::F16,
        OutDtype::Bf16 => Dtype::BF16,
    }
}

/// Writes C (`[L][M][N]`) as tensor `c`, `F16` or `BF16`, shape `[L, M, N]`.
///
/// Precondition: `c.len()` is L * M * N; panics otherwise.
pub fn save_output(path: &Path, shape: Shape, c: &Output) -> Result<(), IoError> {
    let dims = vec![shape.l as usize, shape.m as usize, shape.n as usize];
    assert_eq!(c.len(), dims.iter().product::<usize>(), "C has the wrong length for {shape}");
    let bytes: Vec<u8> = c.bits.iter().flat_map(|x| x.to_le_bytes()).collect();
    write(path, vec![("c", out_dtype_tag(c.dtype), dims, &bytes)])
}

/// Reads tensor `c` back: its dims `[L, M, N]` (rank 2 read as L = 1) and its values.
pub fn load_output(path: &Path) -> Result<([usize; 3], Output), IoError> {
    let bytes = read(path)?;
    let file = parse(path, &bytes)?;
    let c = tensor(path, &file, "c", &[Dtype::F16, Dtype::BF16], C_EXPECTED)?;
    let dtype = if c.dtype == Dtype::BF16 { OutDtype::Bf16 } else { OutDtype::F16 };
    Ok((c.dims, Output::from_le_bytes(dtype, c.data)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Distribution, generate};
    use half::f16;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fresh, empty directory under the system temp dir; removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            static COUNT: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "host-io-test-{}-{}",
                std::process::id(),
                COUNT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).expect("create temp dir");
            TempDir(dir)
        }

        fn file(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A tensor to write in a test: name, dtype, shape, bytes.
    type Spec = (&'static str, Dtype, Vec<usize>, Vec<u8>);

    /// The four input tensors of an M x N x K problem, rank 2, all bytes zero.
    fn inputs(m: usize, n: usize, k: usize) -> Vec<Spec> {
        vec![
            ("a", Dtype::U8, vec![m, k / 2], vec![0; m * k / 2]),
            ("b", Dtype::U8, vec![n, k / 2], vec![0; n * k / 2]),
            ("sfa", Dtype::U8, vec![m, k / 16], vec![0; m * k / 16]),
            ("sfb", Dtype::F8_E4M3, vec![n, k / 16], vec![0; n * k / 16]),
        ]
    }

    /// Writes `specs` to a file in `dir` and returns the loader's error message.
    fn load_error(dir: &TempDir, specs: &[Spec]) -> String {
        let path = dir.file("in.safetensors");
        let tensors =
            specs.iter().map(|(name, dtype, shape, data)| (*name, *dtype, shape.clone(), data.as_slice())).collect();
        write(&path, tensors).expect("write test file");
        match load_inputs(&path) {
            Ok(p) => panic!("loaded {}", p.shape),
            Err(e) => e.to_string(),
        }
    }

    fn assert_contains(message: &str, parts: &[&str]) {
        for part in parts {
            assert!(message.contains(part), "`{part}` not in: {message}");
        }
    }

    #[test]
    fn inputs_round_trip() {
        let dir = TempDir::new();
        let path = dir.file("inputs.safetensors");
        let shape = Shape::new(130, 70, 192, 2).expect("valid shape");
        let p = generate(shape, Distribution::Wide, 42);
        save_inputs(&path, &p).expect("save");
        let q = load_inputs(&path).expect("load");
        assert_eq!(q.shape, shape);
        assert_eq!((p.a, p.b, p.sfa, p.sfb), (q.a, q.b, q.sfa, q.sfb));
    }

    #[test]
    fn rank_2_and_u8_scales_load_as_l_1() {
        let dir = TempDir::new();
        let path = dir.file("rank2.safetensors");
        let (m, n, k) = (3, 5, 64);
        let mut specs = inputs(m, n, k);
        specs[0].3[0] = 0x21; // a[0][0] = 0.5, a[0][1] = 1.0
        specs[2].3[m * k / 16 - 1] = 0x38; // sfa[M-1][K/16-1] = 1.0
        let tensors = specs.iter().map(|(name, d, s, data)| (*name, *d, s.clone(), data.as_slice())).collect();
        write(&path, tensors).expect("write");
        let p = load_inputs(&path).expect("load");
        assert_eq!(p.shape, Shape::new(3, 5, 64, 1).expect("valid"));
        assert_eq!(p.a[0], 0x21);
        let offset = layout::offset(m as u32 - 1, k as u32 / 16 - 1, k as u32 / 16);
        assert_eq!(p.sfa[offset as usize], 0x38);
        assert_eq!(p.sfa.iter().filter(|&&x| x != 0).count(), 1);
    }

    #[test]
    fn output_round_trip() {
        let dir = TempDir::new();
        let path = dir.file("c.safetensors");
        let shape = Shape::new(3, 4, 64, 2).expect("valid shape");
        let c: Vec<f16> = (0..24).map(|i| f16::from_f32(i as f32 * -0.75)).collect();
        let c = Output::from_f16(&c);
        save_output(&path, shape, &c).expect("save");
        assert_eq!(load_output(&path).expect("load"), ([2, 3, 4], c));
        let bf16 = Output { dtype: OutDtype::Bf16, bits: (0..24).map(|i| 0x3F80 + i).collect() };
        save_output(&path, shape, &bf16).expect("save bf16");
        assert_eq!(load_output(&path).expect("load bf16"), ([2, 3, 4], bf16));
    }

    #[test]
    fn missing_tensor() {
        let dir = TempDir::new();
        let specs: Vec<Spec> = inputs(4, 4, 64).into_iter().filter(|t| t.0 != "sfa").collect();
        let message = load_error(&dir, &specs);
        assert_contains(&message, &["tensor `sfa` is missing", "in.safetensors", "F8_E4M3", "[L, M, K/16]"]);
        let path = dir.file("c.safetensors");
        write(&path, vec![("d", Dtype::F16, vec![1], &[0u8, 0][..])]).expect("write");
        let message = load_output(&path).expect_err("no c").to_string();
        assert_contains(&message, &["tensor `c` is missing", "F16 with shape [L, M, N]"]);
    }

    #[test]
    fn wrong_dtype() {
        let dir = TempDir::new();
        let mut specs = inputs(4, 4, 64);
        specs[1].1 = Dtype::I8;
        let message = load_error(&dir, &specs);
        assert_contains(&message, &["tensor `b` has dtype I8", "expected U8 with shape [L, N, K/2]"]);
        let mut specs = inputs(4, 4, 64);
        specs[3] = ("sfb", Dtype::F16, vec![4, 2], vec![0; 16]);
        let message = load_error(&dir, &specs);
        assert_contains(&message, &["tensor `sfb` has dtype F16", "F8_E4M3"]);
    }

    #[test]
    fn wrong_rank() {
        let dir = TempDir::new();
        let mut specs = inputs(4, 4, 64);
        specs[0].2 = vec![1, 1, 4, 32];
        let message = load_error(&dir, &specs);
        assert_contains(&message, &["tensor `a` has shape [1, 1, 4, 32] (rank 4)", "[L, M, K/2] or [M, K/2]"]);
    }

    #[test]
    fn mismatched_k_and_l() {
        let dir = TempDir::new();
        let mut specs = inputs(4, 4, 64);
        specs[1] = ("b", Dtype::U8, vec![4, 64], vec![0; 256]);
        let message = load_error(&dir, &specs);
        assert_contains(&message, &["`a` and `b` disagree", "a has K = 64", "b has K = 128"]);

        let mut specs = inputs(4, 4, 64);
        specs[0] = ("a", Dtype::U8, vec![2, 4, 32], vec![0; 256]);
        let message = load_error(&dir, &specs);
        assert_contains(&message, &["a has L = 2 batches but b has L = 1"]);

        let mut specs = inputs(4, 4, 128);
        specs[2] = ("sfa", Dtype::U8, vec![4, 4], vec![0; 16]);
        let message = load_error(&dir, &specs);
        assert_contains(
            &message,
            &["`a` and `sfa` disagree", "K = 128", "sfa must have shape [L, M, K/16] = [1, 4, 8], but it has [4, 4]"],
        );
    }

    #[test]
    fn k_not_accepted() {
        let dir = TempDir::new();
        // K = 40: 20 bytes per row, 2 whole scale columns (K / 16 rounded down).
        let specs: Vec<Spec> = vec![
            ("a", Dtype::U8, vec![4, 20], vec![0; 80]),
            ("b", Dtype::U8, vec![4, 20], vec![0; 80]),
            ("sfa", Dtype::U8, vec![4, 2], vec![0; 8]),
            ("sfb", Dtype::U8, vec![4, 2], vec![0; 8]),
        ];
        let message = load_error(&dir, &specs);
        assert_contains(&message, &["M = 4, N = 4, K = 40, L = 1", "not accepted", "multiple of 16"]);
        let message = load_error(&dir, &inputs(0, 4, 64));
        assert_contains(&message, &["M = 0", "not accepted"]);
    }

    #[test]
    fn not_a_safetensors_file() {
        let dir = TempDir::new();
        let path = dir.file("junk.safetensors");
        std::fs::write(&path, b"this is not a safetensors file at all").expect("write");
        let message = load_inputs(&path).expect_err("junk").to_string();
        assert_contains(&message, &["junk.safetensors` is not a safetensors file"]);
    }

    #[test]
    fn unreadable_and_unwritable_paths() {
        let dir = TempDir::new();
        let path = dir.file("absent.safetensors");
        let message = load_inputs(&path).expect_err("absent").to_string();
        assert_contains(&message, &["cannot read", "absent.safetensors", "No such file"]);
        let path = dir.file("no-such-dir").join("c.safetensors");
        let shape = Shape::new(1, 1, 64, 1).expect("valid");
        let message = save_output(&path, shape, &Output::from_f16(&[f16::ZERO])).expect_err("no dir").to_string();
        assert_contains(&message, &["cannot write", "no-such-dir"]);
    }
}
