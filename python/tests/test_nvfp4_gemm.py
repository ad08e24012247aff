"""nvfp4_gemm against a float64 dequantize-and-matmul, on the CPU (always) and on CUDA
(when a GPU is present: there the CUDA result must equal the CPU reference bit for bit)."""

import math

import pytest
import torch

import nvfp4_gemm as g

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (the CPU reference path is tested without one)")
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])

# (M, N, K): tails in M and N, K = 96 (tensor parallelism), K % 32 = 16 (80, 1104), K = 16.
SHAPES = [(1, 1, 16), (64, 80, 96), (130, 72, 80), (128, 256, 512), (3, 5, 1104)]


def operands(m, n, k, seed=0, batch=None, device="cpu"):
    """Random bf16 activations and weights quantized by the package (global scales 1 and 2)."""
    gen = torch.Generator().manual_seed(seed)
    lead = () if batch is None else (batch,)
    x = torch.randn(*lead, m, k, generator=gen).to(torch.bfloat16)
    w = torch.randn(*lead, n, k, generator=gen).to(torch.bfloat16)
    if batch is None:
        a, a_sf = g.quantize(x, 1.0)
        b, b_sf = g.quantize(w, 2.0)
    else:
        qa = [g.quantize(t, 1.0) for t in x]
        qb = [g.quantize(t, 2.0) for t in w]
        a, a_sf = torch.stack([q[0] for q in qa]), torch.stack([q[1] for q in qa])
        b, b_sf = torch.stack([q[0] for q in qb]), torch.stack([q[1] for q in qb])
    return [t.to(device) for t in (a, b, a_sf, b_sf)]


def reference(a, b, a_sf, b_sf, alpha=1.0, bias=None):
    """alpha * (A @ B.T) + bias in float64 from the dequantized operands."""
    c = torch.matmul(g.dequantize(a.cpu(), a_sf.cpu(), torch.float64),
                     g.dequantize(b.cpu(), b_sf.cpu(), torch.float64).transpose(-1, -2))
    c = c * alpha
    if bias is not None:
        c = c + bias.cpu().double()
    return c


def assert_rounded_from(got, want):
    """got is want rounded to got's dtype: within half an ulp plus the fp32 steps."""
    ulp = 2.0 ** -7 if got.dtype == torch.bfloat16 else 2.0 ** -10
    torch.testing.assert_close(got.cpu().double(), want, rtol=ulp, atol=1e-6)


# ------------------------------------------------------------------------------------
# The layout
# ------------------------------------------------------------------------------------


def test_to_blocked_puts_each_scale_at_the_spec_offset():
    rows, cols = 130, 6  # a partial row block and a partial column block
    plain = (torch.arange(rows * cols) % 250 + 1).to(torch.uint8).reshape(rows, cols)
    blocked = g.to_blocked(plain)
    assert blocked.shape == (256, 8) and blocked.dtype == torch.uint8
    flat = blocked.flatten()
    col_blocks = 2
    for r in range(rows):
        for j in range(cols):
            tile = (r // 128) * col_blocks + j // 4
            offset = tile * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + j % 4
            assert flat[offset] == plain[r, j]
    assert int((flat == 0).sum()) == 256 * 8 - rows * cols, "the padding is zeros"
    assert torch.equal(g.from_blocked(blocked, rows, cols * 16), plain)


# ------------------------------------------------------------------------------------
# quantize
# ------------------------------------------------------------------------------------

GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def nearest_e2m1_code(v):
    """The e2m1 code nearest to v, ties to the even code, by brute force over the grid."""
    mag = min(abs(v), 6.0)
    dist = (GRID - mag).abs()
    best = [i for i in range(8) if dist[i] == dist.min()]
    code = best[0] if len(best) == 1 else [i for i in best if i % 2 == 0][0]
    return code | 8 if v < 0 else code


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("device", DEVICES)
def test_quantize_follows_the_recipe(dtype, device):
    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(37, 96, generator=gen) * 3).to(dtype)
    x[5, 16:32] = 0  # an all-zero block: scale 0, values 0
    gs = 448.0 * 6.0 / float(x.float().abs().max())
    packed, blocked = g.quantize(x.to(device), gs)
    assert packed.shape == (37, 48) and packed.dtype == torch.uint8
    assert blocked.shape == (128, 8) and blocked.dtype == torch.float8_e4m3fn
    packed, sf = packed.cpu(), g.from_blocked(blocked.cpu(), 37, 96).float()
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(37, 96)
    for r in range(37):
        for j in range(6):
            block = x[r, 16 * j:16 * j + 16].float()
            amax = float(block.abs().max())
            want_sf = torch.tensor(min(amax / 6.0 * gs, 448.0), dtype=torch.float32).to(torch.float8_e4m3fn).float()
            assert sf[r, j] == want_sf, (r, j)
            s = float(sf[r, j])
            for i in range(16):
                # The value scaled in float32, as the recipe says (then rounded to e2m1).
                factor = torch.tensor(gs, dtype=torch.float32) / torch.tensor(s, dtype=torch.float32)
                v = float(block[i] * factor) if s > 0 else 0.0
                got = int(codes[r, 16 * j + i])
                want = nearest_e2m1_code(v)
                assert got & 7 == want & 7 and (got & 7 == 0 or got >> 3 == want >> 3), (r, j, i, v, got, want)
    assert float(sf[5, 1]) == 0 and int(codes[5, 16:32].abs().sum()) == 0


@needs_cuda
def test_quantize_is_the_same_on_cpu_and_cuda():
    x = torch.randn(300, 1104, dtype=torch.bfloat16)
    cpu = g.quantize(x, 37.5)
    cuda = g.quantize(x.cuda(), 37.5)
    assert torch.equal(cpu[0], cuda[0].cpu())
    assert torch.equal(cpu[1].view(torch.uint8), cuda[1].cpu().view(torch.uint8))


# ------------------------------------------------------------------------------------
# mm
# ------------------------------------------------------------------------------------

EPILOGUES = ["identity", "alpha", "alpha_tensor", "bias"]


def epilogue(kind, n, out_dtype, device):
    if kind == "identity":
        return None, None, 1.0
    if kind == "alpha":
        return 0.375, None, 0.375
    if kind == "alpha_tensor":
        return torch.tensor([-2.5], dtype=torch.float32, device=device), None, -2.5
    bias = (torch.arange(n) % 17 - 8).to(out_dtype).to(device) / 4
    return 0.5, bias, 0.5


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", EPILOGUES)
def test_mm_matches_float64_on_cpu(shape, out_dtype, kind):
    m, n, k = shape
    a, b, a_sf, b_sf = operands(m, n, k, seed=m + n + k)
    alpha, bias, value = epilogue(kind, n, out_dtype, "cpu")
    c = g.mm(a, b, a_sf, b_sf, alpha=alpha, out_dtype=out_dtype, bias=bias)
    assert c.shape == (m, n) and c.dtype == out_dtype and c.device.type == "cpu"
    assert_rounded_from(c, reference(a, b, a_sf, b_sf, value, bias))


def test_mm_takes_a_batch_dimension_and_out():
    a, b, a_sf, b_sf = operands(33, 40, 96, batch=2)
    out = torch.full((2, 33, 40), float("nan"), dtype=torch.float16)
    got = g.mm(a, b, a_sf, b_sf, alpha=0.25, out=out)
    assert got is out
    assert_rounded_from(out, reference(a, b, a_sf, b_sf, 0.25))
    # The same bytes flattened to 1-D, as vLLM passes them.
    flat = g.mm(a, b, a_sf.flatten(), b_sf.flatten(), alpha=0.25, out_dtype=torch.float16)
    assert torch.equal(flat, out)


def test_mm_accepts_float4_e2m1fn_x2_operands():
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no float4_e2m1fn_x2")
    a, b, a_sf, b_sf = operands(16, 24, 64)
    want = g.mm(a, b, a_sf, b_sf)
    got = g.mm(a.view(torch.float4_e2m1fn_x2), b.view(torch.float4_e2m1fn_x2), a_sf, b_sf)
    assert torch.equal(got, want)


def test_mm_with_no_rows_is_empty():
    a, b, a_sf, b_sf = operands(1, 8, 64)
    c = g.mm(a[:0], b, g.to_blocked(torch.zeros(0, 4, dtype=torch.float8_e4m3fn)), b_sf)
    assert c.shape == (0, 8)


def test_mm_compiles_with_torch_compile():
    a, b, a_sf, b_sf = operands(32, 48, 64)
    bias = torch.ones(48, dtype=torch.bfloat16)

    def f(a, b, a_sf, b_sf, bias):
        return g.mm(a, b, a_sf, b_sf, alpha=0.5, bias=bias) * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(a, b, a_sf, b_sf, bias), f(a, b, a_sf, b_sf, bias))


# ------------------------------------------------------------------------------------
# w4a16_mm
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("device", DEVICES)
def test_w4a16_mm_matches_float64(dtype, device):
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 33, 96, generator=gen).to(dtype)
    w, w_sf = g.quantize(torch.randn(72, 96, generator=gen).to(dtype), 4.0)
    bias = (torch.arange(72) % 5).to(dtype)
    y = g.w4a16_mm(x.to(device), w.to(device), w_sf.to(device), alpha=0.25, bias=bias.to(device))
    assert y.shape == (2, 33, 72) and y.dtype == dtype
    want = x.double() @ g.dequantize(w, w_sf, torch.float64).t() * 0.25 + bias.double()
    assert_rounded_from(y, want)
    out = torch.empty(2, 33, 72, dtype=dtype, device=device)
    assert g.w4a16_mm(x.to(device), w.to(device), w_sf.to(device), alpha=0.25, bias=bias.to(device), out=out) is out
    assert torch.equal(out, y)


# ------------------------------------------------------------------------------------
# Rejected input: one test per mistake, each naming what was expected
# ------------------------------------------------------------------------------------


def _bad(case):
    a, b, a_sf, b_sf = operands(16, 24, 64)
    args = dict(a=a, b=b, a_sf=a_sf, b_sf=b_sf)
    kw = {}
    if case == "a_not_a_tensor":
        args["a"] = [1, 2]
    elif case == "a_fp16":
        args["a"] = a.to(torch.float16)
    elif case == "b_not_contiguous":
        args["b"] = torch.cat([b, b], dim=1)[:, ::2]
    elif case == "k_mismatch":
        args["b"] = torch.cat([b, b], dim=1)
    elif case == "k_not_16":
        args["a"], args["b"] = a[:, :4].contiguous(), b[:, :4].contiguous()
    elif case == "a_sf_uint8":
        args["a_sf"] = a_sf.view(torch.uint8)
    elif case == "a_sf_plain":
        args["a_sf"] = g.from_blocked(a_sf, 16, 64)
    elif case == "batch_mismatch":
        args["a"] = a.unsqueeze(0)
    elif case == "rank_4":
        args["a"] = a.reshape(1, 1, 16, 32)
    elif case == "bias_shape":
        kw["bias"] = torch.zeros(23, dtype=torch.bfloat16)
    elif case == "bias_dtype":
        kw["bias"] = torch.zeros(24, dtype=torch.float16)
    elif case == "out_shape":
        kw["out"] = torch.empty(16, 25, dtype=torch.bfloat16)
    elif case == "out_dtype":
        kw["out_dtype"] = torch.float32
    elif case == "alpha_nan":
        kw["alpha"] = float("nan")
    elif case == "alpha_tensor_dtype":
        kw["alpha"] = torch.tensor([1.0], dtype=torch.float64)
    elif case == "alpha_tensor_numel":
        kw["alpha"] = torch.ones(2)
    elif case == "alpha_string":
        kw["alpha"] = "1"
    return args, kw


REJECTIONS = [
    ("a_not_a_tensor", TypeError, "a must be a torch.Tensor"),
    ("a_fp16", TypeError, "a must have dtype torch.uint8"),
    ("b_not_contiguous", ValueError, "b must be contiguous"),
    ("k_mismatch", ValueError, "same K"),
    ("k_not_16", ValueError, "K = 8 must be a positive multiple of 16"),
    ("a_sf_uint8", TypeError, "a_sf must have dtype torch.float8_e4m3fn"),
    ("a_sf_plain", ValueError, "a_sf must hold the blocked scales"),
    ("batch_mismatch", ValueError, "same batch dimension"),
    ("rank_4", ValueError, "a must be 2-D"),
    ("bias_shape", ValueError, "bias must have shape [N] = [24]"),
    ("bias_dtype", TypeError, "bias must have dtype torch.bfloat16"),
    ("out_shape", ValueError, "out must have shape [16, 24]"),
    ("out_dtype", TypeError, "out_dtype must be torch.bfloat16 or torch.float16"),
    ("alpha_nan", ValueError, "alpha must be finite"),
    ("alpha_tensor_dtype", ValueError, "one-element float32 tensor"),
    ("alpha_tensor_numel", ValueError, "one-element float32 tensor"),
    ("alpha_string", TypeError, "alpha must be None, a float"),
]


@pytest.mark.parametrize("case,error,message", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_mm_rejects(case, error, message):
    args, kw = _bad(case)
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        g.mm(**args, **kw)


def test_w4a16_mm_rejects_a_k_mismatch_and_a_wrong_activation_dtype():
    w, w_sf = g.quantize(torch.randn(8, 64, dtype=torch.bfloat16), 1.0)
    with pytest.raises(ValueError, match="x has K = 32 but w holds K = 64"):
        g.w4a16_mm(torch.zeros(4, 32, dtype=torch.bfloat16), w, w_sf)
    with pytest.raises(TypeError, match="x must have dtype"):
        g.w4a16_mm(torch.zeros(4, 64), w, w_sf)
    with pytest.raises(ValueError, match="w must be 2-D"):
        g.w4a16_mm(torch.zeros(4, 64, dtype=torch.bfloat16), w.unsqueeze(0), w_sf)


def test_quantize_rejects_bad_input():
    with pytest.raises(TypeError, match="x must have dtype"):
        g.quantize(torch.zeros(4, 64), 1.0)
    with pytest.raises(ValueError, match="K = 40 must be a positive multiple of 16"):
        g.quantize(torch.zeros(4, 40, dtype=torch.bfloat16), 1.0)


# ------------------------------------------------------------------------------------
# CUDA: the kernels against the CPU reference, bit for bit; graphs; streams
# ------------------------------------------------------------------------------------


@needs_cuda
# (1, 4096, 7168) and (4, 130, 1056): sm90v2's CUDA-core GEMV on Hopper (M <= 4, K % 32 = 0).
@pytest.mark.parametrize("shape", SHAPES + [(128, 7168, 2048), (1, 4096, 7168), (4, 130, 1056)])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", EPILOGUES)
def test_mm_on_cuda_equals_the_cpu_reference(shape, out_dtype, kind):
    m, n, k = shape
    a, b, a_sf, b_sf = operands(m, n, k, seed=m + n + k)
    alpha, bias, _ = epilogue(kind, n, out_dtype, "cpu")
    want = g.mm(a, b, a_sf, b_sf, alpha=alpha, out_dtype=out_dtype, bias=bias)
    cuda = lambda t: t.cuda() if isinstance(t, torch.Tensor) else t  # noqa: E731
    got = g.mm(*(cuda(t) for t in (a, b, a_sf, b_sf)), alpha=cuda(alpha), out_dtype=out_dtype, bias=cuda(bias))
    torch.cuda.synchronize()
    assert got.is_cuda
    # Exact data would be bit-identical; with random bf16 data the fp32 sums of the
    # kernel and of the exact reference may differ in the last bit of the output.
    diff = (got.cpu().double() - want.double()).abs()
    ulp = 2.0 ** -7 if out_dtype == torch.bfloat16 else 2.0 ** -10
    assert bool((diff <= ulp * want.double().abs() + 1e-6).all()), float(diff.max())


@needs_cuda
def test_mm_on_cuda_is_bit_exact_on_exact_data():
    # Values and scales where every fp32 partial sum is exact: the kernel must equal the
    # exact reference bit for bit.
    m, n, k = 128, 4096, 7168
    gen = torch.Generator().manual_seed(1)
    a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, generator=gen)
    b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    sf = lambda rows: g.to_blocked(torch.randint(0, 4, (rows, k // 16), generator=gen).to(torch.float8_e4m3fn))  # noqa: E731
    a_sf, b_sf = sf(m), sf(n)
    for out_dtype, alpha in [(torch.float16, None), (torch.bfloat16, 0.375)]:
        want = g.mm(a, b, a_sf, b_sf, alpha=alpha, out_dtype=out_dtype)
        got = g.mm(a.cuda(), b.cuda(), a_sf.cuda(), b_sf.cuda(), alpha=alpha, out_dtype=out_dtype)
        assert torch.equal(got.cpu().view(torch.int16), want.view(torch.int16))


@needs_cuda
@pytest.mark.parametrize("m", [128, 1])  # on Hopper: wgmma tiles, the GEMV
def test_mm_replays_in_a_cuda_graph_with_the_current_alpha(m):
    a, b, a_sf, b_sf = (t.cuda() for t in operands(m, 512, 1024))
    alpha = torch.tensor([1.0], device="cuda")
    static_out = torch.empty(m, 512, dtype=torch.bfloat16, device="cuda")
    g.mm(a, b, a_sf, b_sf, alpha=alpha, out=static_out)  # warm-up: module load, workspace
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g.mm(a, b, a_sf, b_sf, alpha=alpha, out=static_out)
    for value in (0.5, -3.0):
        static_out.fill_(float("nan"))
        alpha.fill_(value)
        graph.replay()
        torch.cuda.synchronize()
        want = g.mm(a.cpu(), b.cpu(), a_sf.cpu(), b_sf.cpu(), alpha=value)
        diff = (static_out.cpu().double() - want.double()).abs()
        assert bool((diff <= 2.0 ** -7 * want.double().abs() + 1e-6).all()), value


@needs_cuda
def test_mm_on_a_side_stream_gives_the_same_result():
    a, b, a_sf, b_sf = (t.cuda() for t in operands(128, 7168, 2048))
    want = g.mm(a, b, a_sf, b_sf, alpha=0.5)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = g.mm(a, b, a_sf, b_sf, alpha=0.5)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert torch.equal(got, want)


@needs_cuda
def test_mm_compiles_on_cuda():
    a, b, a_sf, b_sf = (t.cuda() for t in operands(64, 256, 512))

    def f(a, b, a_sf, b_sf):
        return g.mm(a, b, a_sf, b_sf, alpha=0.5).float().sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    assert math.isclose(float(compiled(a, b, a_sf, b_sf)), float(f(a, b, a_sf, b_sf)), rel_tol=1e-6)


@needs_cuda
def test_cuda_rejects_operands_on_two_devices():
    a, b, a_sf, b_sf = operands(16, 24, 64)
    with pytest.raises(ValueError, match="but the operands are on cuda"):
        g.mm(a.cuda(), b, a_sf.cuda(), b_sf.cuda())


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "shape", [(33, 72, 96), (128, 4096, 7168), (1, 7168, 2048), (16, 4096, 2048), (3, 130, 80)]
)
def test_w4a16_on_cuda_matches_the_cpu_path(shape, dtype):
    # On Hopper this is the fused sm90v2 W4A16 mode (M <= 16 with K % 1024 == 0: its
    # one-launch mma.sync kernel); elsewhere the dequantizing fallback.
    m, n, k = shape
    gen = torch.Generator().manual_seed(m + n)
    x = (torch.randint(-8, 9, (m, k), generator=gen) / 4).to(dtype)  # exact in fp32 sums
    w, w_sf = g.quantize(torch.randn(n, k, generator=gen).to(torch.float16), 4.0)
    bias = (torch.arange(n) % 5).to(dtype)
    for alpha, b in [(None, None), (0.375, bias)]:
        want = g.w4a16_mm(x, w, w_sf, alpha=alpha, bias=b)
        got = g.w4a16_mm(x.cuda(), w.cuda(), w_sf.cuda(), alpha=alpha, bias=None if b is None else b.cuda())
        torch.cuda.synchronize()
        assert torch.equal(got.cpu(), want), (shape, alpha)
