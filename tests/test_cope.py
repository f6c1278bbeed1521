"""CoPE's tiled kernel (models/encodings/cope.py) against the plain autograd formula: forward, gradients, dropout
masks, what it keeps for the backward pass, autocast, torch.compile and its FLOP count; each on both of its CPU
routes (the fused row chain in C++ and the PyTorch operators: the `route` fixture)."""

from __future__ import annotations

import math

import pytest
import torch

from models import native
from models.encodings import build_encoding, cope_rows
from models.encodings import cope as cope_module
from models.encodings.cope import CoPEAttention, _plan, _setup
from models.gpt import GPT, GPTConfig
from tests.reference_encodings import cope_by_loops
from tests.training_fixtures import short_training_scores


def fused_kernel_or_skip():
    """The fused row kernel. Skips only where it cannot be had by design (no AVX2, no compiler); a failed build
    where both exist fails."""
    rows = cope_module.rows_kernel(torch.device("cpu"), torch.float64)
    if rows is None:
        why = cope_rows.why_not()
        if native.cpu_has_avx2() and (why is None or "no C++ compiler" not in why):
            pytest.fail(f"the fused row kernel did not build on a CPU with AVX2: {why}")
        pytest.skip(f"no fused row kernel on this machine: {why or 'no AVX2'}")
    return rows


@pytest.fixture(params=["fused", "operators"])
def route(request, monkeypatch):
    """CoPE's CPU route for the test: the fused row chain, or the PyTorch operators (its fallback)."""
    if request.param == "fused":
        fused_kernel_or_skip()
    else:
        monkeypatch.setattr(cope_module, "rows_kernel", lambda device, dtype: None)
    return request.param


def cope_reference(q, k, v, table, keep=None, dropout_p=0.0):
    """The definition as plain autograd ops on full (B, H, T, T) tensors (the pre-kernel implementation).
    `keep` (B, H, T, T) bool applies attention dropout with that mask."""
    T, npos = q.shape[-2], table.shape[1]
    scale = 1 / math.sqrt(q.shape[-1])
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    logits = q @ k.transpose(-1, -2)
    gates = torch.sigmoid(logits * scale).masked_fill(future, 0.0)
    positions = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=npos - 1)  # p_ij = sum_{t=j..i} g_it
    lower = positions.floor()
    weight = positions - lower
    lower = lower.long()
    upper = (lower + 1).clamp(max=npos - 1)
    table_logits = q @ table
    position_logits = torch.lerp(table_logits.gather(-1, lower), table_logits.gather(-1, upper), weight)
    attention = torch.softmax(((logits + position_logits) * scale).masked_fill(future, float("-inf")), dim=-1)
    if keep is not None:
        attention = attention * keep / (1 - dropout_p)
    return attention @ v


def inputs(B, H, T, d, npos, seed=0, spread=2.0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, T, d, generator=g, dtype=torch.float64) * spread for _ in range(3))
    table = torch.randn(d, npos, generator=g, dtype=torch.float64)
    return [t.requires_grad_() for t in (q, k, v, table)]


def kernel(q, k, v, table, tile_bytes, dropout_p=0.0):
    B, H, T, d = q.shape
    out = CoPEAttention.apply(
        q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), table, 1 / math.sqrt(d), dropout_p, tile_bytes
    )
    return out.view(B, H, T, -1)


def assert_gradients_equal(got, expected, wrt, grad_out):
    """`got`: the kernel's gradients w.r.t. q, k, v, table; compared with the reference output's."""
    want = torch.autograd.grad(expected, wrt, grad_out)
    for name, a, b in zip(["q", "k", "v", "table"], got, want, strict=True):
        assert torch.allclose(a, b, rtol=0, atol=1e-11), name


def tiles_of(B, H, T, tile_bytes):
    """The kernel's tile plan for fp64 inputs of that size on the CPU."""
    return _setup(torch.empty(B * H, T, 1, dtype=torch.float64), tile_bytes)[1]


# (B, H, T, d, context, tile_bytes): T > context makes positions clamp at npos - 1; with T < context no position
# clamps and the kernel uses only the table columns the rows can reach.
CASES = [
    (2, 3, 13, 4, 5, 4000),  # clamped, tiles of a few rows and slices
    (1, 4, 20, 8, 40, 9000),  # never clamped
    (2, 2, 33, 4, 8, 1 << 30),  # clamped, one tile for everything
    (3, 1, 9, 4, 9, 1),  # one row of one slice per tile
]


@pytest.mark.parametrize("B, H, T, d, context, tile_bytes", CASES)
def test_forward_and_gradients_equal_the_autograd_formula(B, H, T, d, context, tile_bytes, route):
    q, k, v, table = inputs(B, H, T, d, context + 1)
    out = kernel(q, k, v, table, tile_bytes)
    expected = cope_reference(q, k, v, table)
    assert torch.allclose(out, expected, rtol=0, atol=1e-12)
    grad_out = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v, table), grad_out)
    assert_gradients_equal(got, expected, (q, k, v, table), grad_out)


def test_cases_cover_clamping_head_groups_and_row_blocks():
    """The cases above must exercise what they claim: clamped positions, several head groups, several row blocks."""
    B, H, T, d, context, tile_bytes = CASES[0]
    tiles = tiles_of(B, H, T, tile_bytes)
    assert len({(g0, g1) for g0, g1, _, _ in tiles}) > 1 and len({(r0, r1) for _, _, r0, r1 in tiles}) > 1
    q, k, _, _ = inputs(B, H, T, d, context + 1)
    gates = torch.sigmoid(q @ k.transpose(-1, -2) / math.sqrt(d)).tril()
    assert (gates.sum(-1) > context).any()  # some p_i0 exceeds npos - 1
    assert len(tiles_of(*CASES[3][:3], CASES[3][5])) == CASES[3][0] * CASES[3][2]
    assert len(tiles_of(*CASES[2][:3], CASES[2][5])) == 1


def test_tiles_cover_every_slice_and_row_once_within_the_budget():
    for slices, T, capacity in [(7, 50, 400), (3, 300, 10**5), (16, 64, 10**9), (2, 40, 1)]:
        tiles = _plan(slices, T, capacity, rows=16)
        covered = torch.zeros(slices, T, dtype=torch.long)
        for g0, g1, r0, r1 in tiles:
            covered[g0:g1, r0:r1] += 1
            assert (g1 - g0) * (r1 - r0) * (r1 + 1) <= capacity or (g1 - g0, r1 - r0) == (1, 1)
            assert r1 - r0 <= 16
        assert torch.all(covered == 1)


def test_module_matches_the_double_loop_with_a_tiny_tile_budget(route):
    cope = build_encoding("cope", {"tile_bytes": 500}, n_layer=2, n_head=2, d_model=8, context=4).double()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        cope.table.normal_(generator=g)
    T = 9
    q, k, v = (torch.randn(2, 2, T, 4, generator=g, dtype=torch.float64) * 2 for _ in range(3))
    out = cope.attend(q, k, v, cope.prepare(torch.arange(T)), layer=1, dropout_p=0.0)
    for b in range(2):
        for h in range(2):
            expected = cope_by_loops(q[b, h], k[b, h], v[b, h], cope.table[1].detach(), npos=5)
            assert torch.allclose(out[b, h], expected, atol=1e-10)


def test_gradcheck(route):
    q, k, v, table = inputs(1, 2, 5, 3, 3, seed=5, spread=1.5)
    gates = torch.sigmoid(q @ k.transpose(-1, -2) / math.sqrt(3)).tril()
    assert (gates.sum(-1) > 2).any() and len(tiles_of(1, 2, 5, 1000)) > 1  # clamped positions, several tiles
    assert torch.autograd.gradcheck(lambda *x: kernel(*x, tile_bytes=1000), (q, k, v, table))


def test_table_gradient_reaches_the_layers_own_table():
    cope = build_encoding("cope", {}, n_layer=3, n_head=2, d_model=8, context=6).double()
    q, k, v, _ = inputs(1, 2, 5, 4, 7)
    cope.attend(q, k, v, None, layer=1, dropout_p=0.0).sum().backward()
    grad = cope.table.grad
    assert grad[1].abs().sum() > 0 and torch.all(grad[0] == 0) and torch.all(grad[2] == 0)


def dropout_masks(B, H, T, tile_bytes, dropout_p):
    """The masks the kernel draws: one bool `bernoulli_` per tile, in tile order, from the global RNG."""
    keep = torch.zeros(B * H, T, T, dtype=torch.bool)
    for g0, g1, r0, r1 in tiles_of(B, H, T, tile_bytes):
        keep[g0:g1, r0:r1, :r1] = torch.empty(g1 - g0, r1 - r0, r1, dtype=torch.bool).bernoulli_(1 - dropout_p)
    return keep.view(B, H, T, T)


def test_dropout_replays_the_forward_masks_in_the_backward_pass(route):
    B, H, T, d, p, tile_bytes = 2, 2, 11, 4, 0.3, 3000
    q, k, v, table = inputs(B, H, T, d, 6)
    torch.manual_seed(7)
    out = kernel(q, k, v, table, tile_bytes, dropout_p=p)
    torch.randn(5)  # the global stream moves on between the forward and the backward pass
    grad_out = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v, table), grad_out)
    after_backward = torch.rand(3)

    torch.manual_seed(7)
    keep = dropout_masks(B, H, T, tile_bytes, p)
    expected = cope_reference(q, k, v, table, keep=keep, dropout_p=p)
    torch.randn(5)
    assert torch.equal(torch.randn_like(out), grad_out)  # the backward pass restored the global RNG
    assert torch.equal(torch.rand(3), after_backward)
    assert 0.5 < keep.tril().sum() / torch.ones(T, T).tril().sum() / (B * H) < 0.9  # about 70% kept
    assert torch.allclose(out, expected, rtol=0, atol=1e-12)
    assert_gradients_equal(got, expected, (q, k, v, table), grad_out)

    torch.manual_seed(8)
    assert not torch.allclose(kernel(q, k, v, table, tile_bytes, dropout_p=p), out)  # another seed, other masks


def saved_bytes(fn):
    sizes = []

    def pack(t):
        sizes.append((tuple(t.shape), t.numel() * t.element_size()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sizes


@pytest.mark.parametrize("dropout_p", [0.0, 0.1])
def test_backward_keeps_only_linear_size_tensors(dropout_p, route):
    B, H, T, d = 2, 2, 256, 8
    cope = build_encoding("cope", {}, n_layer=1, n_head=H, d_model=H * d, context=T)
    q, k, v = (torch.randn(B, H, T, d, requires_grad=True) for _ in range(3))
    sizes = saved_bytes(lambda: cope.attend(q, k, v, None, layer=0, dropout_p=dropout_p))
    shapes = sorted(shape for shape, _ in sizes)
    rng_bytes = torch.get_rng_state().numel() if dropout_p else 0
    assert shapes == sorted([(B * H, T, d)] * 4 + [(B * H, T, 1), (d, T + 1), (rng_bytes,)])  # q k v out, lse
    one_score_matrix = B * H * T * T * 4
    assert sum(n for _, n in sizes) < one_score_matrix / 6


def test_bf16_autocast_computes_in_fp32_and_returns_bf16(route):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=32, context=48, n_layer=2, n_head=2, d_model=32, pe="cope"))
    with torch.no_grad():
        model.encoding.table.normal_(std=0.5)
    tokens = torch.randint(0, 32, (3, 49))

    def loss_and_grads(autocast):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        return loss.detach(), model.encoding.table.grad.clone()

    loss32, grad32 = loss_and_grads(False)
    loss16, grad16 = loss_and_grads(True)
    assert grad16.dtype == torch.float32
    assert abs(loss16 - loss32) < 1e-2
    assert (grad16 - grad32).norm() < 0.05 * grad32.norm()
    q = torch.randn(1, 2, 8, 16, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model.encoding.attend(q, q, q, None, layer=0, dropout_p=0.0)
    assert out.dtype == torch.bfloat16


@pytest.mark.slow
def test_compiled_model_trains_without_graph_break(route):
    """Dynamo traces through the Function (the kernel's custom ops stay opaque) with fullgraph=True; aot_eager
    keeps the test fast (inductor compiles the same graph)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=32, context=16, n_layer=1, n_head=2, d_model=16, pe="cope", dropout=0.1))
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tokens = torch.randint(0, 32, (4, 17))
    losses = []
    for _ in range(15):
        loss = torch.nn.functional.cross_entropy(compiled(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert model.encoding.table.abs().sum() > 0  # the table trained
    assert losses[-1] < 0.8 * losses[0]


def test_flops_per_token_hand_count():
    """d = 4, npos = 4, one layer and head. Per key 12 FLOPs; table columns min(i + 2, npos) per query i.
    T = 2: keys 1.5 on average -> 18; columns (2 + 3) / 2 -> 2 * 4 * 2.5 = 20.            Total 38.
    T = 6: keys 3.5 -> 42; columns (2 + 3 + 4 + 4 + 4 + 4) / 6 = 3.5 -> 2 * 4 * 3.5 = 28.   Total 70."""
    cope = build_encoding("cope", {}, n_layer=1, n_head=1, d_model=4, context=3)
    assert cope.flops_per_token(2) == pytest.approx(38.0)
    assert cope.flops_per_token(6) == pytest.approx(70.0)
    bigger = build_encoding("cope", {}, n_layer=3, n_head=2, d_model=16, context=10)
    for T in (1, 5, 10, 11, 30):
        per_query = [12 * (i + 1) + 2 * 8 * min(i + 2, 11) for i in range(T)]
        assert bigger.flops_per_token(T) == pytest.approx(3 * 2 * sum(per_query) / T)


def test_tile_budget_must_be_positive():
    with pytest.raises(ValueError, match="tile_bytes"):
        build_encoding("cope", {"tile_bytes": 0}, n_layer=1, n_head=1, d_model=4, context=3)


@pytest.mark.parametrize("gates", ["open", "closed"])
def test_saturated_gates_on_either_route(gates, route):
    """Gates all near 1 (every position reached, T past the table: clamped) or all near 0 (positions near 0: the
    fused route's table product covers a few columns only): values and gradients equal the formula in fp64."""
    q, k, v, table = inputs(2, 2, 40, 4, 31, seed=4)
    with torch.no_grad():
        q.abs_()
        k.abs_() if gates == "open" else k.copy_(-3 * k.abs())
    g = torch.sigmoid(q @ k.transpose(-1, -2) / 2).tril()
    assert (g.sum(-1)[..., -1] > 30).all() if gates == "open" else (g.sum(-1) < 2).all()
    out = kernel(q, k, v, table, tile_bytes=6000)
    expected = cope_reference(q, k, v, table)
    assert torch.allclose(out, expected, rtol=0, atol=1e-12)
    grad_out = torch.randn_like(out)
    assert_gradients_equal(torch.autograd.grad(out, (q, k, v, table), grad_out), expected, (q, k, v, table), grad_out)


@pytest.mark.parametrize("gates", ["open", "mixed", "closed"])
def test_fp32_fused_chain_against_fp64(gates):
    """The fp32 chain's own paths (8 keys a step from two loads of the table, one key a step near the table's end
    or past T's clamp), against the formula in fp64: gates near 1 (positions clamp at npos - 1 = 47 for T 100),
    mixed, near 0 (a few table columns)."""
    fused_kernel_or_skip()
    q, k, v, table = inputs(2, 2, 100, 8, 48, seed=9, spread=1.0)
    with torch.no_grad():
        if gates != "mixed":
            q.abs_()
            k.abs_().mul_(3 if gates == "open" else -3)
    grad_out = torch.randn(2, 2, 100, 8, dtype=torch.float64)
    expected = cope_reference(q, k, v, table)
    want = [expected, *torch.autograd.grad(expected, (q, k, v, table), grad_out)]
    single = [t.detach().float().requires_grad_() for t in (q, k, v, table)]
    out = kernel(*single, tile_bytes=1 << 16)
    got = [out, *torch.autograd.grad(out, single, grad_out.float())]
    for name, a, b in zip(["out", "q", "k", "v", "table"], got, want, strict=True):
        assert (a.double() - b).abs().max() <= 1e-5 * b.abs().max(), name


def test_fp32_routes_against_fp64():
    """In fp32, at a row length where the sums matter (T 300), both routes are near the fp64 values, and the
    fused chain (sums of gates in double, Cephes' exp) is no farther from them than the operators are."""
    fused_kernel_or_skip()
    q, k, v, table = inputs(2, 2, 300, 16, 301, seed=6, spread=1.0)
    grad_out = torch.randn(2, 2, 300, 16, dtype=torch.float64)

    def values(*tensors):
        out = kernel(*tensors, tile_bytes=1 << 20)
        return [out, *torch.autograd.grad(out, tensors, grad_out.to(out.dtype))]

    exact = values(q, k, v, table)
    single = [t.detach().float().requires_grad_() for t in (q, k, v, table)]
    fused = values(*single)
    real = cope_module.rows_kernel
    try:
        cope_module.rows_kernel = lambda device, dtype: None
        operators = values(*single)
    finally:
        cope_module.rows_kernel = real
    for name, want, a, b in zip(["out", "q", "k", "v", "table"], exact, fused, operators, strict=True):
        scale = want.abs().max()
        error_fused, error_operators = ((x.double() - want).abs().max() / scale for x in (a, b))
        assert error_fused < 1e-4 and error_operators < 1e-3, name
        assert error_fused <= 1.5 * error_operators, (name, error_fused, error_operators)


def test_a_short_training_on_either_route_scores_every_example_alike(monkeypatch):
    """Twenty AdamW steps of a small CoPE model on the fused row chain and on the operators (revision 2's
    arithmetic), from one initialisation on the same batches: each example's mean NLL agrees within 1e-4 nats,
    ten times inside the cross-machine bound a run of another revision is reproduced within."""
    fused_kernel_or_skip()

    def route(fused: bool) -> None:
        if not fused:
            monkeypatch.setattr(cope_module, "rows_kernel", lambda device, dtype: None)

    scores = short_training_scores("cope", route)
    assert (scores[0] - scores[1]).abs().max() < 1e-4, (scores[0] - scores[1]).abs().max()


def test_a_run_records_the_route_it_took(monkeypatch):
    cope = build_encoding("cope", {}, n_layer=1, n_head=1, d_model=4, context=3)
    if cope_module.rows_kernel(torch.device("cpu"), torch.float32) is not None:
        assert cope.describe()["cpu_route"] == "fused row chain (cope_rows.cpp)"
    monkeypatch.setattr(cope_module, "rows_kernel", lambda device, dtype: None)
    assert cope.describe()["cpu_route"].startswith("PyTorch operators (")
    assert cope.describe()["revision"] == 4


@pytest.mark.parametrize("last", [1000, 40])
def test_fp32_positions_equal_the_scalar_walk(last):
    """The fp32 suffix sums run four keys a step in vector lanes of doubles (cope_rows.cpp, suffix_positions): every
    position must be the float of the scalar walk's double sums, p_j from the query down, four keys a step as
    sum + g0, sum + (g0 + g1), sum + ((g0 + g1) + g2), sum + ((g0 + g1) + (g2 + g3)), then one key a step, each
    clamped at `last` (40: past a third of the row), read back from the recomputation's lo and w. Exact, so a lane
    out of place, a key of the tail missed or a clamp gone fails (another order of the double sums would not: the
    orders differ below float precision)."""
    fused_kernel_or_skip()
    rows = cope_module.rows_kernel(torch.device("cpu"), torch.float32)
    m = 103  # 25 steps of four keys and three keys one at a time
    gates = torch.rand(m, generator=torch.Generator().manual_seed(3), dtype=torch.float32)
    expected, total = [0.0] * m, 0.0
    g = [float(x) for x in gates]

    def put(j, value):
        expected[j] = value if value < last else float(last)

    j = m - 1
    while j >= 3:
        g01 = g[j] + g[j - 1]
        g0123 = g01 + (g[j - 2] + g[j - 3])
        put(j, total + g[j])
        put(j - 1, total + g01)
        put(j - 2, total + (g01 + g[j - 2]))
        put(j - 3, total + g0123)
        total += g0123
        j -= 4
    while j >= 0:
        total += g[j]
        put(j, total)
        j -= 1
    tcols = m + 2
    S, D = torch.zeros(m), torch.zeros(m)
    slopes, w, lo = gates.clone(), torch.zeros(m), torch.zeros(m, dtype=torch.int32)
    table, lse = torch.zeros(tcols), torch.zeros(1)
    buffers = cope_rows._address(S, slopes, lo, w, D, table, lse)
    shape = [cope_rows.ctypes.c_int64(x) for x in (1, 1, m, tcols, m - 1, last)]
    cope_rows._entry(rows, "cope_recompute_rows", torch.float32)(*buffers, *shape, cope_rows.ctypes.c_double(-80.0))
    got = lo.float() + w  # exact: w = p - floor(p) holds p's fraction bits
    assert torch.equal(got, torch.tensor(expected, dtype=torch.float32))
