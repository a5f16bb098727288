"""Kernels vs hand-derived values, the plain-Python reference, limits, invariants and gradients."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from specjax.inputs import hardware, models
from specjax.cost.acceptance import alpha_from_tokens, tokens_per_step
from specjax.cost.roofline import comm_time, expected_experts, operator_costs, pass_cost, token_time
from specjax.cost.speculative import Decode, Deployment, step

F64 = jnp.float64


@pytest.fixture(autouse=True)
def _strict(strict_promotion):
    """Every kernel test runs under strict dtype promotion (the one dtype policy, `specjax.precision`)."""


def hw64(slug="h200", mode="operator", **kw):
    return hardware.load(slug).resolve("bf16", F64, mode).replace(**{k: jnp.asarray(v, F64) for k, v in kw.items()})


def dep64(tp=1.0, memory_fraction=0.9):
    return Deployment.single(F64).replace(tp=F64(tp), memory_fraction=F64(memory_fraction))


def model64(slug, **kw):
    return models.target(models.load_architecture(slug), dtype=F64, **kw)


# ---- acceptance -------------------------------------------------------------------------

@pytest.mark.parametrize("alpha,k,expected", [(0.0, 3, 1.0), (0.5, 1, 1.5), (0.5, 3, 1.875), (0.8, 2, 2.44),
                                              (1.0, 4, 5.0), (0.9, 0, 1.0)])
def test_tokens_per_step_hand_values(alpha, k, expected):
    assert float(tokens_per_step(jnp.float64(alpha), jnp.float64(k))) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("dtype,tol", [(jnp.float32, 2e-5), (jnp.float64, 1e-11)])
def test_tokens_per_step_near_one_matches_reference(dtype, tol):
    for alpha in [0.99, 0.998, 0.9999, 0.999999, 1.0 - 1e-9]:
        for k in [1, 2, 5, 16]:
            exact = sum(alpha**i for i in range(k + 1))
            got = float(tokens_per_step(jnp.asarray(alpha, dtype), jnp.asarray(k, dtype)))
            assert got == pytest.approx(exact, rel=tol)


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_tau_gradient_at_alpha_one(k):
    g = jax.grad(tokens_per_step)(jnp.float64(1.0), jnp.float64(k))
    assert float(g) == pytest.approx(k * (k + 1) / 2, rel=1e-12)
    g32 = jax.grad(tokens_per_step)(jnp.float32(1.0), jnp.float32(k))
    assert float(g32) == pytest.approx(k * (k + 1) / 2, rel=1e-6)


def test_tau_gradients_finite_and_match_finite_differences():
    for alpha, k in itertools.product([0.0, 1e-6, 0.3, 0.999, 1.0], [0.0, 1.0, 2.5, 7.0]):
        ga, gk = jax.grad(tokens_per_step, argnums=(0, 1))(jnp.float64(alpha), jnp.float64(k))
        assert np.isfinite(float(ga)) and np.isfinite(float(gk))
    h = 1e-6
    for alpha, k in [(0.3, 2.0), (0.7, 3.5), (0.95, 1.0)]:
        ga, gk = jax.grad(tokens_per_step, argnums=(0, 1))(jnp.float64(alpha), jnp.float64(k))
        fd_a = (ref.tau(alpha + h, k) - ref.tau(alpha - h, k)) / (2 * h)
        fd_k = (ref.tau(alpha, k + h) - ref.tau(alpha, k - h)) / (2 * h)
        assert float(ga) == pytest.approx(fd_a, rel=1e-7) and float(gk) == pytest.approx(fd_k, rel=1e-7)


def test_alpha_from_tokens_inverts():
    alphas = jnp.linspace(0.0, 1.0, 41, dtype=F64)
    for k in [1.0, 3.0, 7.0]:
        taus = tokens_per_step(alphas, k)
        back = jax.vmap(lambda t: alpha_from_tokens(t, jnp.float64(k)))(taus)
        np.testing.assert_allclose(np.asarray(back), np.asarray(alphas), atol=1e-9)
    # SpecDecode-Bench blog: tau = 2.25 at k = 3 (the quoted 0.415 is (tau-1)/k, not alpha)
    a = float(alpha_from_tokens(jnp.float64(2.25), jnp.float64(3.0)))
    assert ref.tau(a, 3) == pytest.approx(2.25, rel=1e-10) and 0.6 < a < 0.65


# ---- roofline -----------------------------------------------------------------------------

def test_expected_experts_limits():
    f = lambda n, e, r: float(expected_experts(jnp.float64(n), jnp.float64(e), jnp.float64(r)))  # noqa: E731
    assert f(1, 128, 4) == pytest.approx(4.0)
    assert f(3, 128, 4) == pytest.approx(128 * (1 - (1 - 4 / 128) ** 3))
    assert f(1e6, 128, 4) == pytest.approx(128.0)
    assert f(7, 8, 8) == 8.0 and f(5, 0, 0) == 0.0
    g = jax.grad(expected_experts, argnums=(0, 1, 2))(jnp.float64(5.0), jnp.float64(8.0), jnp.float64(8.0))
    assert all(np.isfinite(float(x)) for x in g)


def test_scaling_book_golden_number():
    """inference.md quiz: 30B int8 params + 4 x 819 MB KV over 16 chips at 8.1e11 B/s ~ 2.57 ms."""
    m = models.Model.zeros(F64).replace(p_dense=jnp.float64(30e9), b_dense=jnp.float64(1.0),
                                        n_full_layers=jnp.float64(1.0), kv_elems_per_tok=jnp.float64(819e6),
                                        b_kv=jnp.float64(1.0), d_model=jnp.float64(1.0), n_layers=jnp.float64(0.0),
                                        kv_heads=jnp.float64(16.0))  # enough KV heads to split 16 ways
    hw = hw64("tpu-v5e", "pass", hbm_bytes_per_s=8.1e11, flops_per_s=1.97e14, link_latency_s=0.0)
    # one cached token of 819 MB per sequence, 4 sequences, no write term contribution to speak of
    c = pass_cost(hw, dep64(16.0), m, jnp.float64(4.0), jnp.float64(1e-12), jnp.float64(1.0))
    assert float(c.t_mem_s) == pytest.approx((30e9 + 4 * 819e6) / (16 * 8.1e11), rel=1e-9)
    assert float(c.t_mem_s) * 1e3 == pytest.approx(2.57, abs=0.01)
    assert float(hw.critical_intensity) == pytest.approx(243, rel=0.01)


def test_llama70b_hand_pass_time():
    """Pass-mode T(B, q) for Llama-3-70B bf16 on an H200 with fp8 KV, derived by hand."""
    m = model64("llama-3-70b", kv_dtype="fp8")
    hw = hw64(mode="pass")
    p_read = 80 * (8192 * 8192 * 2 + 8192 * 1024 * 2) + 80 * 3 * 8192 * 28672 + 128256 * 8192
    kv_tok = 80 * 2 * 8 * 128 * 1.0
    for b, q, L in [(1, 1, 2048), (224, 3, 2048), (64, 1, 8000)]:
        n = b * q
        flops = 2 * n * p_read + 80 * 4 * 64 * 128 * n * L
        nbytes = 2 * p_read + b * kv_tok * L + n * kv_tok
        t = max(flops / 989.5e12, nbytes / 4.8e12)
        got = pass_cost(hw, dep64(), m, jnp.float64(b), jnp.float64(q), jnp.float64(L)).t_s
        assert float(got) == pytest.approx(t, rel=1e-12)


def test_comm_time_by_hand():
    m = model64("llama-3-70b")
    hw = hw64()
    t = float(comm_time(hw, dep64(4.0), m, jnp.float64(8.0), jnp.float64(3.0)))
    payload = 24 * 8192 * 2.0
    assert t == pytest.approx(2 * 80 * (2 * 3 / 4 * payload / 450e9 + 5e-6), rel=1e-12)
    assert float(comm_time(hw, dep64(), m, jnp.float64(8.0), jnp.float64(3.0))) == 0.0


POINT_MODELS = ["llama-3-70b", "gpt-oss-120b", "deepseek-v3", "mixtral-8x7b", "llama-3.1-8b", "qwen3-30b-a3b",
                "llama-4-scout", "t5-xxl"]


@pytest.mark.parametrize("slug", POINT_MODELS)
@pytest.mark.parametrize("mode", ["operator", "pass"])
def test_pass_cost_matches_reference(slug, mode):
    m = model64(slug)
    rng = np.random.default_rng(hash(slug) % 2**32)
    for _ in range(12):
        hw = hw64(rng.choice(["h100-sxm", "h200", "mi300x", "a100-80gb", "b200"]), mode,
                  flops_efficiency=rng.uniform(0.3, 1), hbm_efficiency=rng.uniform(0.5, 1),
                  fixed_overhead_s=rng.choice([0.0, 1e-4]), layer_overhead_s=rng.choice([0.0, 3e-5]),
                  kernel_overhead_s=rng.choice([0.0, 4e-6]), non_overlap=rng.choice([0.0, 0.4]),
                  activation_traffic=rng.choice([0.0, 37.0]), expert_traffic=rng.choice([0.0, 11.0]))
        lam = rng.choice([0.0, 0.3, 1.0])
        b, q, L, tp = rng.integers(1, 2048), rng.integers(1, 9), rng.uniform(0, 32768), rng.choice([1, 2, 8])
        got = pass_cost(hw, dep64(tp), m, F64(b), F64(q), F64(L), F64(lam)).t_s
        want = ref.t_pass(ref.as_floats(m), ref.as_floats(hw), b, q, L, tp, mode, lam)
        assert float(got) == pytest.approx(want, rel=1e-12)


def test_token_traffic_by_hand():
    """docs/model.md §2.7's per-token term on one point, by hand: gpt-oss-120b (36 layers, all MoE, top-4,
    d_model 2880) on an H200 at 90% of 4.8 TB/s, 256 sequences verifying 4 tokens each, TP 2 x EP 2:
    (1024 tokens x 36 layers x 30 vectors + 1024 x 4 / 2 pairs x 36 x 12) x 2880 x 2 B / (0.9 x 4.8e12).
    Zero in the pure roofline, and the pass time grows by exactly that much."""
    m = model64("gpt-oss-120b")
    hw0 = hw64(hbm_efficiency=0.9)
    hw = hw0.replace(activation_traffic=F64(30.0), expert_traffic=F64(12.0))
    dep = dep64(2.0).replace(ep=F64(2.0))
    want = (1024 * 36 * 30 + 1024 * 4 / 2 * 36 * 12) * 2880 * 2 / (0.9 * 4.8e12)
    assert float(token_time(hw, dep, m, F64(1024.0))) == pytest.approx(want, rel=1e-12)
    assert want * 1e3 == pytest.approx(2.654, abs=0.001)  # ms: the size of the term at this load
    assert float(token_time(hw0, dep, m, F64(1024.0))) == 0.0
    with_t, without = (pass_cost(h, dep, m, F64(256.0), F64(4.0), F64(2048.0)) for h in (hw, hw0))
    assert float(with_t.t_s - without.t_s) == pytest.approx(want, rel=1e-9)
    assert float(with_t.t_token_s) == pytest.approx(want, rel=1e-12)
    # a dense model has no expert term; attention-DP ranks each hold a share of the tokens
    d = model64("llama-3.1-8b")
    dense = float(token_time(hw, dep64().replace(dp_attention=F64(4.0)), d, F64(64.0)))
    assert dense == pytest.approx(64 / 4 * 32 * 30 * 4096 * 2 / (0.9 * 4.8e12), rel=1e-12)
    assert float(token_time(hw, dep, models.Model.zeros(F64), F64(64.0))) == 0.0


def test_operator_mode_bounds_pass_mode():
    """sum of maxes >= max of sums >= half the sum of maxes (scaling book: at most 2x apart)."""
    m, hw = model64("gpt-oss-120b"), hw64()
    for b in [1, 16, 256, 4096]:
        op = pass_cost(hw, dep64(), m, F64(b), F64(3), F64(4096)).t_s
        ps = pass_cost(hw.replace(roofline="pass"), dep64(), m, F64(b), F64(3), F64(4096)).t_s
        assert float(ps) <= float(op) <= 2 * float(ps) + 1e-15


# ---- speculative step -----------------------------------------------------------------------

def dec64(**kw):
    base = dict(batch=1.0, k=3.0, alpha=0.8, context=1024.0, draft_cost_ratio=0.0)
    base.update(kw)
    return Decode(**{k: jnp.asarray(v, F64) for k, v in base.items()})


def test_leviathan_limit_exact_without_kv():
    """Memory-bound passes, ratio drafter: S = (1 - a^(k+1)) / ((1 - a)(k c + 1))."""
    m = model64("llama-3-70b").replace(kv_elems_per_tok=F64(0.0), attn_flops_per_ctx=F64(0.0))
    hw = hw64()
    for alpha, k, c in itertools.product([0.0, 0.5, 0.8, 0.95, 1.0], [1, 2, 4, 8], [0.0, 0.02, 0.145, 0.5]):
        r = step(hw, dep64(), m, models.Model.zeros(F64), dec64(alpha=alpha, k=k, draft_cost_ratio=c, batch=1.0))
        assert float(r.speedup) == pytest.approx(ref.tau(alpha, k) / (k * c + 1), rel=1e-12)


def test_leviathan_limit_small_batch_with_kv():
    m, hw = model64("llama-3-70b"), hw64()
    for alpha, k, c in [(0.8, 4, 0.05), (0.6, 2, 0.145), (0.9, 6, 0.02)]:
        r = step(hw, dep64(), m, models.Model.zeros(F64), dec64(alpha=alpha, k=k, draft_cost_ratio=c, batch=1.0))
        assert float(r.speedup) == pytest.approx(ref.tau(alpha, k) / (k * c + 1), rel=2e-3)


def test_k_zero_is_plain_decoding():
    hw = hw64()
    for slug in ["gpt-oss-120b", "llama-3.1-8b"]:
        m = model64(slug)
        d = models.target(models.load_architecture("llama-3.2-1b"), dtype=F64)
        for b in [1.0, 64.0, 1024.0]:
            r = step(hw, dep64(), m, d, dec64(k=0.0, batch=b))
            assert float(r.speedup) == pytest.approx(1.0, rel=1e-12)
            assert float(r.t_sd_step_s) == pytest.approx(float(r.t_target_s), rel=1e-12)


@pytest.mark.parametrize("drafter", ["model", "eagle3", "ratio"])
def test_step_matches_reference(drafter):
    hw = hw64()
    tgt = model64("llama-3.1-8b")
    if drafter == "model":
        draft = model64("llama-3.2-1b")
    elif drafter == "eagle3":
        draft = models.eagle_head(models.load_architecture("eagle3-llama-3.1-8b"),
                                  models.load_architecture("llama-3.1-8b"), dtype=F64)
    else:
        draft = models.Model.zeros(F64)
    rng = np.random.default_rng(0)
    for _ in range(20):
        b, k, a, L = rng.integers(1, 1024), rng.integers(1, 8), rng.uniform(0, 1), rng.uniform(0, 16000)
        c = 0.1 if drafter == "ratio" else 0.0
        r = step(hw, dep64(), tgt, draft, dec64(batch=b, k=k, alpha=a, context=L, draft_cost_ratio=c))
        want = ref.speedup(ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(draft), b, k, a, L, c=c)
        assert float(r.speedup) == pytest.approx(want, rel=1e-12)
        assert float(r.throughput_sd_tok_s) / float(r.throughput_base_tok_s) == pytest.approx(want, rel=1e-12)
        mb = ref.max_batch(ref.as_floats(hw), [ref.as_floats(tgt), ref.as_floats(draft)], L + k + 1)
        assert float(r.max_batch_sd) == mb


def test_memory_statuses():
    hw = hw64(mode="pass")
    llama = model64("llama-3-70b")
    r = step(hw, dep64(), llama, models.Model.zeros(F64), dec64())
    assert float(r.status) == 3 and float(r.feasible) == 0  # 141 GB of bf16 weights > 0.9 x 141 GB
    r = step(hw, dep64(2.0), llama, models.Model.zeros(F64), dec64())
    assert float(r.status) == 0 and float(r.max_batch_base) > 100
    g = model64("gpt-oss-120b", kv_dtype="fp8")
    d = model64("llama-3.2-1b")
    big = step(hw, dep64(), g, d, dec64(batch=1e6))
    assert float(big.status) == 2
    mb_sd = float(step(hw, dep64(), g, d, dec64()).max_batch_sd)
    mb_base = float(step(hw, dep64(), g, d, dec64()).max_batch_base)
    assert mb_sd < mb_base
    mid = step(hw, dep64(), g, d, dec64(batch=mb_sd + 1))
    assert float(mid.status) == 1


def test_scalar_equals_vmapped():
    hw, tgt = hw64(), model64("gpt-oss-120b")
    draft = model64("llama-3.2-1b")
    batches = jnp.array([1.0, 7.0, 64.0, 300.0, 2000.0], F64)
    alphas = jnp.array([0.0, 0.5, 0.8, 0.95, 1.0], F64)
    decs = jax.tree.map(lambda x: jnp.broadcast_to(x, (5,)), dec64()).replace(batch=batches, alpha=alphas)
    vm = jax.jit(jax.vmap(lambda d: step(hw, dep64(), tgt, draft, d)))(decs)
    assert vm.speedup.shape == (5,)
    for i in range(5):
        one = step(hw, dep64(), tgt, draft, dec64(batch=batches[i], alpha=alphas[i]))
        for f in one._fields:
            np.testing.assert_allclose(np.asarray(getattr(vm, f)[i]), np.asarray(getattr(one, f)), rtol=1e-12)


def test_float32_close_to_float64():
    tgt32 = models.target(models.load_architecture("gpt-oss-120b"))
    hw32 = hardware.load("h200").resolve("bf16")
    d32 = Decode(*(jnp.float32(v) for v in (256.0, 3.0, 0.8, 4096.0, 0.1)))
    s32 = step(hw32, Deployment.single(), tgt32, models.Model.zeros(), d32).speedup
    s64 = step(hw64(), dep64(), model64("gpt-oss-120b"), models.Model.zeros(F64),
               dec64(batch=256.0, k=3.0, alpha=0.8, context=4096.0, draft_cost_ratio=0.1)).speedup
    assert s32.dtype == jnp.float32
    assert float(s32) == pytest.approx(float(s64), rel=1e-5)


def _speedup_of(alpha, batch, k):
    hw, tgt = hw64(mode="pass"), model64("llama-3-70b", kv_dtype="fp8")
    return step(hw, dep64(), tgt, models.Model.zeros(F64),
                dec64(alpha=alpha, batch=batch, k=k, context=2048.0, draft_cost_ratio=0.145)).speedup


def test_gradients_finite_at_edges_and_knee():
    grad = jax.grad(_speedup_of, argnums=(0, 1, 2))
    # pass-mode knee of the plain pass: 2 n P / F = P b / W  ->  n ~ F/W (weights dominate)
    knee = 989.5e12 / 4.8e12
    for alpha, batch, k in [(0.0, 1.0, 2.0), (1.0, 1.0, 2.0), (0.814, knee, 1.0), (0.814, knee / 3, 2.0),
                            (1.0, 500.0, 1.0)]:
        g = grad(F64(alpha), F64(batch), F64(k))
        assert all(np.isfinite(float(x)) for x in g), (alpha, batch, k, g)


def test_gradients_match_finite_differences_away_from_knees():
    from jax.test_util import check_grads
    for alpha, batch, k in [(0.7, 8.0, 2.0), (0.9, 600.0, 3.0), (0.5, 100.0, 1.5)]:
        check_grads(_speedup_of, (F64(alpha), F64(batch), F64(k)), order=1, modes=["rev"], eps=1e-4)


def test_invariants_over_grid():
    """More bandwidth is never slower; higher alpha never lowers speedup; S <= k+1."""
    tgt, draft = model64("qwen3-30b-a3b"), model64("qwen3-0.6b")
    rng = np.random.default_rng(1)
    for _ in range(30):
        b, k, L = F64(rng.integers(1, 4096)), F64(rng.integers(1, 9)), F64(rng.uniform(0, 60000))
        hw = hw64(rng.choice(["h100-sxm", "mi300x", "l40s"]))
        faster = hw.replace(hbm_bytes_per_s=hw.hbm_bytes_per_s * 1.5)
        for q in [1.0, 4.0]:
            assert float(pass_cost(faster, dep64(), tgt, b, F64(q), L).t_s) <= float(
                pass_cost(hw, dep64(), tgt, b, F64(q), L).t_s)
        s_lo = step(hw, dep64(), tgt, draft, dec64(batch=b, k=k, alpha=0.5, context=L)).speedup
        s_hi = step(hw, dep64(), tgt, draft, dec64(batch=b, k=k, alpha=0.9, context=L)).speedup
        assert float(s_hi) >= float(s_lo) and 0 < float(s_hi) <= float(k) + 1


def test_moe_with_all_experts_routed_equals_dense():
    """E = top-r: every expert is read and computed for every token, like a dense FFN."""
    moe = model64("mixtral-8x7b").replace(top_k=F64(8.0))
    dense = moe.replace(p_dense=moe.p_dense + moe.n_moe_layers * 8 * moe.p_expert, n_moe_layers=F64(0.0))
    hw = hw64(mode="pass")
    for b, q in [(1.0, 1.0), (64.0, 4.0), (1024.0, 3.0)]:
        a = pass_cost(hw, dep64(), moe, F64(b), F64(q), F64(2048.0)).t_s
        d = pass_cost(hw, dep64(), dense, F64(b), F64(q), F64(2048.0)).t_s
        assert float(a) == pytest.approx(float(d), rel=1e-12)


def test_expert_locality_limits():
    """lambda = 1: all B sequences route alike, so a verify pass touches the experts of k+1 tokens."""
    m, hw = model64("gpt-oss-120b"), hw64()
    t_local = pass_cost(hw, dep64(), m, F64(64.0), F64(4.0), F64(1000.0), F64(1.0)).t_s
    t_one = pass_cost(hw, dep64(), m, F64(1.0), F64(4.0), F64(1000.0))
    t_indep = pass_cost(hw, dep64(), m, F64(64.0), F64(4.0), F64(1000.0)).t_s
    assert float(t_local) < float(t_indep)
    _, w_local = operator_costs(hw, dep64(), m, F64(64.0), F64(4.0), F64(1000.0), F64(1.0))
    _, w_one = operator_costs(hw, dep64(), m, F64(1.0), F64(4.0), F64(1000.0))
    assert float(w_local[2]) == pytest.approx(float(w_one[2]), rel=1e-12)  # same expert bytes as 1 sequence
    assert float(t_one.t_s) > 0


# ---- engine overheads (docs/model.md §2.6) --------------------------------------------------------------

def test_each_engine_overhead_by_hand():
    """T_pass_fixed, t_layer and t_kernel on every pass of every model; T_draft_fixed per draft pass of
    a model drafter; T_step_fixed once per step; none of them without their cause."""
    tgt = model64("llama-3.1-8b")
    head = models.eagle_head(models.load_architecture("eagle3-llama-3.1-8b"), models.load_architecture("llama-3.1-8b"),
                             dtype=F64)
    # kernels by hand: 32 x (attention 5 + dense FFN 4) + head 3; the EAGLE-3 head 1 x 9 + 3 + its fc 1
    assert float(tgt.n_kernels) == 291 and float(head.n_kernels) == 13
    pure = hw64("h100-sxm")
    over = dict(fixed_overhead_s=4e-4, layer_overhead_s=2e-5, kernel_overhead_s=5e-6, draft_overhead_s=3e-4,
                step_overhead_s=6e-4)
    hw = pure.replace(**{k: F64(v) for k, v in over.items()})
    dec = dec64(batch=4.0, k=3.0, alpha=0.7, context=500.0)
    r0, r = step(pure, dep64(), tgt, head, dec), step(hw, dep64(), tgt, head, dec)
    per_pass_target = 4e-4 + 32 * 2e-5 + 291 * 5e-6
    per_pass_head = 4e-4 + 1 * 2e-5 + 13 * 5e-6
    assert float(r.t_target_s) == pytest.approx(float(r0.t_target_s) + per_pass_target, rel=1e-12)
    assert float(r.t_verify_s) == pytest.approx(float(r0.t_verify_s) + per_pass_target, rel=1e-12)
    assert float(r.t_draft_s) == pytest.approx(float(r0.t_draft_s) + per_pass_head + 3e-4, rel=1e-12)
    assert float(r.t_sd_step_s) == pytest.approx(3 * float(r.t_draft_s) + float(r.t_verify_s) + 6e-4, rel=1e-12)
    # n-gram: no draft pass, so no draft overhead; the step overhead remains
    ng = step(hw, dep64(), tgt, models.Model.zeros(F64), dec)
    assert float(ng.t_draft_s) == 0.0 and float(ng.t_sd_step_s) == pytest.approx(float(ng.t_verify_s) + 6e-4)
    # k = 0 is plain decoding whatever the overheads
    assert float(step(hw, dep64(), tgt, head, dec64(k=0.0)).speedup) == pytest.approx(1.0, rel=1e-12)
    want = ref.speedup(ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(head), 4.0, 3.0, 0.7, 500.0)
    assert float(r.speedup) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("slug, kernels", [
    ("llama-3.1-8b", 32 * (5 + 4) + 3),
    ("deepseek-v3", 61 * 10 + 3 * 4 + 58 * (7 + 3) + 3),  # MLA; 3 dense layers, 58 MoE with a shared expert
    ("qwen3-30b-a3b", 48 * (5 + 7) + 3),                 # MoE without shared experts
    ("t5-xxl", 24 * (5 + 4 + 4) + 3),                    # decoder layers with cross-attention
])
def test_kernel_counts_by_hand(slug, kernels):
    """The pinned kernel count (config.KERNELS) of a full model, as t_kernel multiplies it."""
    assert float(model64(slug).n_kernels) == kernels
    mtp = models.mtp_head(models.load_architecture("deepseek-v3"), dtype=F64)
    assert float(mtp.n_kernels) == 10 + 7 + 3 + 3 + 1  # one MoE layer, the head, eh_proj


def test_leviathan_limit_exact_with_overheads_zero():
    m = model64("llama-3-70b").replace(kv_elems_per_tok=F64(0.0), attn_flops_per_ctx=F64(0.0))
    hw = hw64().replace(fixed_overhead_s=F64(0.0), layer_overhead_s=F64(0.0), kernel_overhead_s=F64(0.0),
                        draft_overhead_s=F64(0.0), step_overhead_s=F64(0.0))
    for alpha, k, c in [(0.6, 3, 0.1), (0.9, 5, 0.02)]:
        r = step(hw, dep64(), m, models.Model.zeros(F64), dec64(alpha=alpha, k=k, draft_cost_ratio=c))
        assert float(r.speedup) == pytest.approx(ref.tau(alpha, k) / (k * c + 1), rel=1e-12)
