"""Property-based tests (hypothesis) over random valid configurations, and numerical edge cases."""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specjax.inputs import hardware, models
from specjax.cost.roofline import pass_cost
from specjax.cost.speculative import Decode, Deployment, step

F64 = jnp.float64
TARGETS = ["llama-3.1-8b", "llama-3-70b", "gpt-oss-120b", "gpt-oss-20b", "deepseek-v3", "mixtral-8x7b",
           "qwen3-30b-a3b", "llama-4-scout", "glm-4.5-air", "t5-xxl"]
DRAFTS = [None, "llama-3.2-1b", "qwen3-0.6b", "gpt-oss-20b"]
HW = ["h100-sxm", "h200", "b200", "mi300x", "l40s", "tpu-v5e", "rtx-3090", "gaudi3"]
# 60 examples per property in the suite (fixed examples under CI=true, so CI is reproducible);
# SPECJAX_HYPOTHESIS_EXAMPLES=600 for a deeper local search (passed on 2026-11-29).
SETTINGS = settings(max_examples=int(os.environ.get("SPECJAX_HYPOTHESIS_EXAMPLES", "60")), deadline=None,
                    derandomize=os.environ.get("CI") == "true", suppress_health_check=[HealthCheck.too_slow])


@functools.lru_cache(maxsize=None)
def model(slug, dtype=F64):
    return models.target(models.load_architecture(slug), dtype=dtype) if slug else models.Model.zeros(dtype)


@functools.lru_cache(maxsize=None)
def hw(slug, dtype=F64):
    return hardware.load(slug).resolve("bf16", dtype)


jstep = jax.jit(step)


points = st.fixed_dictionaries(dict(
    target=st.sampled_from(TARGETS), draft=st.sampled_from(DRAFTS), hw=st.sampled_from(HW),
    batch=st.floats(1, 1e5), k=st.integers(0, 16), alpha=st.floats(0, 1), context=st.floats(0, 1e6),
    tp=st.sampled_from([1.0, 2.0, 8.0]), c=st.floats(0, 0.5), mode=st.sampled_from(["operator", "pass"]),
    eta_f=st.floats(0.1, 1), eta_w=st.floats(0.1, 1), fixed=st.sampled_from([0.0, 1e-5, 1e-3])))


def build(p, dtype=F64):
    h = hw(p["hw"], dtype).replace(flops_efficiency=jnp.asarray(p["eta_f"], dtype),
                                   hbm_efficiency=jnp.asarray(p["eta_w"], dtype),
                                   fixed_overhead_s=jnp.asarray(p["fixed"], dtype), roofline=p["mode"])
    dec = Decode(*(jnp.asarray(v, dtype) for v in (p["batch"], p["k"], p["alpha"], p["context"],
                                                  0.0 if p["draft"] else p["c"], 0.0)))
    dep = Deployment.single(dtype).replace(tp=jnp.asarray(p["tp"], dtype))
    return h, dep, model(p["target"], dtype), model(p["draft"], dtype), dec


@SETTINGS
@given(points)
def test_speedup_finite_positive_and_at_most_k_plus_1(p):
    r = jstep(*build(p))
    s = float(r.speedup)
    assert np.isfinite(s) and s > 0
    assert s <= p["k"] + 1 + 1e-9
    for f in r._fields:
        assert np.isfinite(float(getattr(r, f))) or f.startswith("max_batch"), f


@SETTINGS
@given(points, st.floats(1.01, 10))
def test_more_bandwidth_never_slows_a_pass(p, factor):
    h, dep, t, _, dec = build(p)
    faster = h.replace(hbm_bytes_per_s=h.hbm_bytes_per_s * factor)
    for q in (1.0, p["k"] + 1.0):
        slow = pass_cost(h, dep, t, dec.batch, F64(q), dec.context).t_s
        fast = pass_cost(faster, dep, t, dec.batch, F64(q), dec.context).t_s
        assert float(fast) <= float(slow) * (1 + 1e-12)


@SETTINGS
@given(points, st.floats(0, 1))
def test_higher_alpha_never_lowers_speedup(p, other):
    lo, hi = sorted([p["alpha"], other])
    h, dep, t, d, dec = build(p)
    s_lo = jstep(h, dep, t, d, dec.replace(alpha=F64(lo))).speedup
    s_hi = jstep(h, dep, t, d, dec.replace(alpha=F64(hi))).speedup
    assert float(s_hi) >= float(s_lo) * (1 - 1e-12)


@SETTINGS
@given(points)
def test_k_zero_equals_plain_decoding(p):
    h, dep, t, d, dec = build(p)
    r = jstep(h, dep, t, d, dec.replace(k=F64(0.0)))
    assert float(r.speedup) == pytest.approx(1.0, rel=1e-12)
    assert float(r.t_sd_step_s) == pytest.approx(float(r.t_target_s), rel=1e-12)


@SETTINGS
@given(points, st.integers(1, 8))
def test_moe_with_all_experts_routed_equals_dense(p, e):
    """An MoE layer whose E experts are all routed (r = E) costs what a dense FFN of E experts does."""
    t = model("mixtral-8x7b").replace(n_experts=F64(e), top_k=F64(e))
    dense = t.replace(p_dense=t.p_dense + t.n_moe_layers * e * t.p_expert, n_moe_layers=F64(0.0))
    h, dep, _, _, dec = build(p)
    for q in (1.0, p["k"] + 1.0):
        a = pass_cost(h, dep, t, dec.batch, F64(q), dec.context).t_s
        b = pass_cost(h, dep, dense, dec.batch, F64(q), dec.context).t_s
        assert float(a) == pytest.approx(float(b), rel=1e-12)


@SETTINGS
@given(points)
def test_float32_agrees_with_float64(p):
    r64 = jstep(*build(p, F64))
    r32 = jstep(*build(p, jnp.float32))
    assert r32.speedup.dtype == jnp.float32
    # stated tolerance: 1e-4 relative on speedups and step times (float32 has 24 bits; sums of ~10 terms)
    for f in ("speedup", "t_target_s", "t_verify_s", "t_sd_step_s"):
        assert float(getattr(r32, f)) == pytest.approx(float(getattr(r64, f)), rel=1e-4), f


@settings(max_examples=15, deadline=None)
@given(st.lists(points, min_size=2, max_size=6))
def test_scalar_equals_vmapped(ps):
    """Vmapped over points that share a target and hardware (structure), values all different."""
    ps = [dict(q, target=ps[0]["target"], draft=ps[0]["draft"], hw=ps[0]["hw"], mode=ps[0]["mode"]) for q in ps]
    built = [build(q) for q in ps]
    h, _, t, d, _ = built[0]
    decs = jax.tree.map(lambda *xs: jnp.stack(xs), *[b[4] for b in built])
    hws = jax.tree.map(lambda *xs: jnp.stack(xs), *[b[0] for b in built])
    deps = jax.tree.map(lambda *xs: jnp.stack(xs), *[b[1] for b in built])
    vm = jax.jit(jax.vmap(lambda hh, dd, x: step(hh, dd, t, d, x)))(hws, deps, decs)
    for i, b in enumerate(built):
        one = jstep(b[0], b[1], t, d, b[4])
        for f in one._fields:
            np.testing.assert_allclose(np.asarray(getattr(vm, f)[i]), np.asarray(getattr(one, f)), rtol=1e-12)


# ---- numerical edge cases -----------------------------------------------------------------------

EDGES = [
    dict(alpha=0.0), dict(alpha=1.0), dict(k=0), dict(batch=1.0), dict(context=0.0), dict(context=1e6),
    dict(alpha=1.0, k=16, batch=1.0), dict(batch=1e5, context=1e6),
]


@pytest.mark.parametrize("edge", EDGES, ids=[str(e) for e in EDGES])
@pytest.mark.parametrize("target", ["gpt-oss-120b", "llama-3.1-8b", "deepseek-v3"])
@pytest.mark.parametrize("dtype", [jnp.float32, F64])
def test_edges_are_finite(edge, target, dtype):
    p = dict(target=target, draft="llama-3.2-1b", hw="h200", batch=64.0, k=3, alpha=0.7, context=2048.0, tp=1.0,
             c=0.0, mode="operator", eta_f=1.0, eta_w=1.0, fixed=0.0)
    p.update(edge)
    r = jstep(*build(p, dtype))
    for f in r._fields:
        v = float(getattr(r, f))
        assert np.isfinite(v) or f.startswith("max_batch"), (f, v)
    if p["alpha"] == 0.0 or p["k"] == 0:
        assert float(r.tokens_per_step) == pytest.approx(1.0)
    if p["alpha"] == 1.0:
        assert float(r.tokens_per_step) == pytest.approx(p["k"] + 1.0)
    g = jax.grad(lambda a: jstep(*build(dict(p, alpha=0.5), dtype)[:4],
                                 build(p, dtype)[4].replace(alpha=a)).speedup)(jnp.asarray(p["alpha"], dtype))
    assert np.isfinite(float(g))


def test_single_expert_and_extreme_hardware():
    t = model("gpt-oss-120b").replace(n_experts=F64(1.0), top_k=F64(1.0))
    base = dict(target="gpt-oss-120b", draft=None, hw="h200", batch=8.0, k=3, alpha=0.7, context=100.0, tp=1.0,
                c=0.1, mode="operator", eta_f=1.0, eta_w=1.0, fixed=0.0)
    h, dep, _, d, dec = build(base)
    r = jstep(h, dep, t, d, dec)
    assert np.isfinite(float(r.speedup)) and float(r.speedup) > 0
    for scale in (1e-9, 1e9):
        big = h.replace(flops_per_s=h.flops_per_s * scale, hbm_bytes_per_s=h.hbm_bytes_per_s * scale,
                        hbm_bytes=h.hbm_bytes * scale, link_bytes_per_s=h.link_bytes_per_s * scale)
        for dtype_tree in (big, jax.tree.map(lambda x: x.astype(jnp.float32), big)):
            cast = lambda tree: jax.tree.map(lambda x: jnp.asarray(x).astype(dtype_tree.flops_per_s.dtype), tree)  # noqa: E731
            rr = jstep(dtype_tree, cast(dep), cast(t), cast(d), cast(dec))
            assert np.isfinite(float(rr.speedup)) and float(rr.speedup) > 0


def test_sweep_output_has_no_nan_for_valid_points(tmp_path):
    from specjax.outputs import io
    from specjax.inputs import spec
    from specjax.engine import sweep

    text = """
hardware = ["h200", "rtx-3090"]
[[pairs]]
target = "gpt-oss-120b"
drafter = "model"
draft = "gpt-oss-20b"
[[pairs]]
target = "llama-3.1-8b"
drafter = "ngram"
[fixed]
k = 4
[axes]
alpha = [0.0, 0.5, 1.0]
batch = [1, 1000, 100000]
context = [0, 1000000]
top_k = [1, 4, 200]
"""
    s = spec.from_text(text, "edge.toml")
    sweep.run(s, tmp_path)
    df = io.read_results(tmp_path).collect()
    import polars as pl

    floats = [c for c, t in df.schema.items() if t in (pl.Float32, pl.Float64)]
    assert df.select(pl.any_horizontal(pl.col(floats).is_nan()).any()).item() is False  # NaN never written
    valid = df.filter(pl.col("valid"))
    assert valid.height > 0 and valid.select(pl.col("speedup").is_null().any()).item() is False
    invalid = df.filter(pl.col("speedup").is_null())
    assert (invalid["status"].cast(pl.String) == "invalid_input").all()  # dense target or top_k > E
    assert set(invalid["pair"]) >= {"llama-3.1-8b+ngram"}


# ---- random config.json dictionaries: refused with a clear error, or numbers that keep the invariants ----

CONFIG_KEYS = {  # key -> strategy of (often hostile) values
    "hidden_size": st.one_of(st.integers(-10, 16384), st.sampled_from([4096, 1e3, 2.5, "4096", True, None])),
    "num_hidden_layers": st.one_of(st.integers(-3, 96), st.sampled_from([10**15, "32", None])),
    "num_attention_heads": st.one_of(st.integers(-2, 128), st.sampled_from([32, 0, None])),
    "num_key_value_heads": st.one_of(st.integers(-2, 64), st.sampled_from([8, None])),
    "vocab_size": st.one_of(st.integers(-5, 200000), st.sampled_from([128256, None])),
    "intermediate_size": st.one_of(st.integers(-5, 40000), st.sampled_from([14336, None])),
    "num_local_experts": st.one_of(st.integers(-3, 256), st.sampled_from([0, None, 8.5])),
    "num_experts_per_tok": st.one_of(st.integers(-3, 300), st.sampled_from([2, None])),
    "moe_intermediate_size": st.one_of(st.integers(-5, 8192), st.sampled_from([None])),
    "n_shared_experts": st.one_of(st.integers(-3000, 4), st.sampled_from([None])),
    "draft_vocab_size": st.one_of(st.integers(-5, 300000), st.sampled_from([None, 0])),
    "sliding_window": st.one_of(st.integers(-5, 8192), st.sampled_from([None])),
    "tie_word_embeddings": st.sampled_from([True, False, "false", 0, None]),
    "first_k_dense_replace": st.one_of(st.integers(-2, 100), st.sampled_from([None])),
}


@SETTINGS
@given(st.fixed_dictionaries({}, optional=CONFIG_KEYS), st.sampled_from(["target", "draft"]),
       st.sampled_from([1.0, 64.0, 4096.0]))
def test_random_configs_are_refused_or_keep_the_invariants(tmp_path_factory, cfg, role, batch):
    """Any config.json, as target or as draft model: a `SpecError` naming a field, or a point whose
    numbers keep the model's invariants (times > 0, 0 < S <= tau <= k+1) whenever its status is ok."""
    import json as _json

    from specjax import api
    from specjax.errors import SpecError
    from specjax.inputs.scenario import Scenario

    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(_json.dumps({k: v for k, v in cfg.items() if v is not None}))
    kw = dict(target=str(path)) if role == "target" else dict(target="llama-3.1-8b", drafter="model", draft=str(path))
    try:
        r = api.point(Scenario(hardware="h200", k=3, alpha=0.8, batch=batch, engine="roofline", **kw))
    except SpecError as e:
        assert str(e) and "\n" not in str(e)
        return
    if r["status"] == "ok":
        assert r["t_target_s"] > 0 and r["t_verify_s"] >= r["t_target_s"] * (1 - 1e-5) and r["t_draft_s"] >= 0
        assert 0 < r["speedup"] <= r["tokens_per_step"] * (1 + 1e-5) <= 4 * (1 + 1e-5)


@pytest.mark.parametrize("key,value,field", [("n_shared_experts", -3000, "n_shared_experts"),
                                             ("n_shared_experts", -10000, "n_shared_experts"),
                                             ("draft_vocab_size", -5, "draft_vocab_size"),
                                             ("sliding_window", -1, "sliding_window"),
                                             ("num_hidden_layers", 10**15, "num_hidden_layers"),
                                             ("tie_word_embeddings", "false", "tie_word_embeddings"),
                                             ("num_experts_per_tok", 300, "num_experts_per_tok"),
                                             ("first_k_dense_replace", -2, "first_k_dense_replace")])
def test_absurd_config_values_are_refused_by_name(tmp_path, key, value, field):
    """The red-team cases: a draft model with a negative shared-expert count used to give S = 7.45 with
    k + 1 = 4 and status ok. Every count is an integer in a physical range, named when it is not."""
    import json as _json

    from specjax import api
    from specjax.errors import SpecError
    from specjax.inputs.scenario import Scenario

    cfg = _json.loads((models.PRESET_DIR / "qwen3-30b-a3b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(_json.dumps({**cfg, key: value}))
    with pytest.raises(SpecError, match=field):
        api.point(Scenario(target="qwen3-8b", hardware="h200", drafter="model", draft=str(path), k=3,
                           alpha=0.8, engine="roofline"))
    path.write_text(_json.dumps(cfg))  # the untouched config runs, and keeps the invariants (one vocabulary)
    r = api.point(Scenario(target="qwen3-8b", hardware="h200", drafter="model", draft=str(path), k=3, alpha=0.8,
                           engine="roofline"))
    assert r["status"] == "ok" and 0 < r["speedup"] <= r["tokens_per_step"]
