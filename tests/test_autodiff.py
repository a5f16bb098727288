"""Crossover sensitivities vs central finite differences; optax k* vs brute force."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specjax import crossover
from specjax.search import optimize, sensitivity
from specjax.inputs.scenario import Scenario
from specjax.cost.speculative import Decode, step
from specjax.cost.status import Curve

F64 = jnp.float64


@pytest.fixture(autouse=True)
def _strict(strict_promotion):
    """Every kernel test runs under strict dtype promotion (the one dtype policy, `specjax.precision`)."""

CASES = {
    "dense-pass": dict(target="llama-3-70b", drafter="ratio", draft_cost=0.145, alpha=0.814, k=2,
                       kv_dtype="fp8", roofline="pass"),
    "moe-pass": dict(target="gpt-oss-120b", drafter="ratio", draft_cost=0.145, alpha=0.814, k=2,
                     kv_dtype="fp8", roofline="pass"),
    "moe-operator-draft-tp2": dict(target="qwen3-30b-a3b", drafter="model", draft="qwen3-0.6b", alpha=0.9, k=3,
                                   tp=2, roofline="operator", context=1500.0),
    "eagle-operator": dict(target="llama-3.1-8b", drafter="eagle", draft="eagle3-llama-3.1-8b", alpha=0.7, k=3,
                           roofline="operator", context=300.0),
    "moe-dp16-ep16-two-nodes": dict(target="gpt-oss-120b", drafter="eagle", draft="eagle3-gpt-oss-120b", alpha=0.8,
                                    k=3, kv_dtype="fp8", tp=1, dp_attention=16, ep=16, expert_imbalance=1.2),
    "moe-tp2-dp4-ep8": dict(target="gpt-oss-120b", drafter="eagle", draft="eagle3-gpt-oss-120b", alpha=0.8, k=3,
                            kv_dtype="fp8", tp=2, dp_attention=4, ep=8, expert_imbalance=1.2),
    "eagle1-operator": dict(target="llama-3.1-8b", drafter="eagle", draft="eagle-llama-3.1-8b", alpha=0.7, k=3,
                            roofline="operator", context=300.0),
}


@jax.jit
def _find(hw, dep, t, d, dec):
    return crossover.find(hw, dep, t, d, dec, 65536.0, 96, 70).crossover_batch


# The kernels jitted once for the module (as `specjax.api` jits them): run op by op, every call traced and
# compiled each loop again (5-17 s a call); jitted, a call with the same tree structure reuses the compile.
_sens = jax.jit(sensitivity.crossover_sensitivity)
_switch_off = jax.jit(optimize.switch_off_batch)
_brute = jax.jit(optimize.brute_force, static_argnames=("k_max",))
_search = jax.jit(optimize.search, static_argnames=("k_max",))
_step = jax.jit(step)


def _crossing(hw, dep, t, d, dec):
    return float(_find(hw, dep, t, d, dec))


def _perturbed(trees, name, eps):
    """(step, [trees + step, trees - step]) for input `name`: a plain leaf moves by a relative step, a
    scaling multiplies each of its leaves by 1 +- eps (a gated leaf only where its gate is 1)."""
    terms = sensitivity.INPUTS[name]
    if not sensitivity.is_scaling(name):
        (tree_name, leaf, _), = terms
        tree = trees[tree_name]
        x = float(getattr(tree, leaf))
        # a time that is 0 moves by a nanosecond: a microsecond per kernel is 0.3 ms per pass, not a small step
        h = eps * abs(x) if x != 0 else (eps * 1e-3 if name.endswith("_s") else eps)
        return h, [{**trees, tree_name: tree.replace(**{leaf: getattr(tree, leaf) + s * h})} for s in (1, -1)]
    out = []
    for s in (1, -1):
        new = dict(trees)
        for tree_name, leaf, gate in terms:
            tree = new[tree_name]
            g = getattr(tree, gate) if gate else 1.0
            new[tree_name] = tree.replace(**{leaf: getattr(tree, leaf) * (1 + s * eps * g)})
        out.append(new)
    return eps, out


@pytest.mark.parametrize("case", list(CASES))
def test_elasticities_match_finite_differences(case):
    sc = Scenario(engine="roofline", hardware="h200", **CASES[case])
    hw, dep, t, d, dec = sc.build(F64)
    hw = hw.replace(fixed_overhead_s=F64(2e-5))
    c, deriv, elast, of = _sens(hw, dep, t, d, dec)
    assert int(c.status) == Curve.STOPS_PAYING and int(of) == 0
    b0 = float(c.crossover_batch)
    checked = 0
    for name in sensitivity.INPUTS:
        trees = {"hw": hw, "deploy": dep, "target": t, "draft": d, "op": dec}
        if name in ("n_experts", "top_k", "expert_size") and float(t.n_moe_layers) == 0:
            assert float(deriv[name]) == 0.0
            continue
        if name == "tp" and (float(dep.tp) == 1 or float(dep.gpus) == float(hw.gpus_per_node)):
            continue  # comm switches on at tp > 1, and onto the network past a node: one-sided there
        h, (plus, minus) = _perturbed(trees, name, 1e-6)
        fd = (_crossing(*(plus[n] for n in ("hw", "deploy", "target", "draft", "op")))
              - _crossing(*(minus[n] for n in ("hw", "deploy", "target", "draft", "op")))) / (2 * h)
        got = float(deriv[name])
        assert got == pytest.approx(fd, rel=1e-4, abs=1e-9 * max(1.0, abs(b0))), name
        checked += 1
    assert checked >= 12
    # Homogeneity: S(sF, sW, T0) = S(F, W, s T0) when comm is off, so e_F + e_W = e_T0.
    if float(dep.gpus) == 1:
        e_sum = float(elast["flops_per_s"]) + float(elast["hbm_bytes_per_s"])
        assert e_sum == pytest.approx(float(elast["fixed_overhead_s"]), abs=1e-9)


def test_seed_elasticities_rank_alpha_and_roofline_first():
    sc = Scenario(engine="roofline", hardware="h200", **CASES["moe-pass"])
    _, _, el, _ = _sens(*sc.build(F64))
    top = sorted(el, key=lambda n: -abs(float(el[n])))[:5]
    assert {"alpha", "hbm_bytes_per_s", "flops_per_s"} <= set(top)
    assert float(el["top_k"]) < 0 < float(el["n_experts"])  # more experts per token: earlier crossover


def _speedup_at(trees, batch):
    h, dp, t, d, x = (trees[n] for n in ("hw", "deploy", "target", "draft", "op"))
    return float(_step(h, dp, t, d, x.replace(batch=F64(batch))).speedup)


@pytest.mark.parametrize("batch", [1.0, 48.0])
def test_no_switch_off_gives_elasticities_of_the_speedup(batch):
    """A curve with no switch-off batch (here: alpha 0, never helps) gets the elasticities of S at the
    requested batch, (x / S) dS/dx, checked against central finite differences; `of` says so."""
    sc = Scenario(engine="roofline", hardware="h200", batch=batch, **{**CASES["moe-operator-draft-tp2"], "alpha": 0.05})
    hw, dep, t, d, dec = sc.build(F64)
    c, deriv, el, of = _sens(hw, dep, t, d, dec)
    assert int(c.status) == Curve.NEVER_HELPS and int(of) == 1 and sensitivity.OF[1] == "speedup"
    trees = {"hw": hw, "deploy": dep, "target": t, "draft": d, "op": dec}
    s0 = _speedup_at(trees, batch)
    for name in ("alpha", "hbm_bytes_per_s", "context", "draft_size", "k"):
        h, (plus, minus) = _perturbed(trees, name, 1e-6)
        fd = (_speedup_at(plus, batch) - _speedup_at(minus, batch)) / (2 * h)
        assert float(deriv[name]) == pytest.approx(fd, rel=1e-5, abs=1e-12), name
        tree_name, leaf, _ = sensitivity.INPUTS[name][0]
        x = 1.0 if sensitivity.is_scaling(name) else float(getattr(trees[tree_name], leaf))
        assert float(el[name]) == pytest.approx(fd * x / s0, rel=1e-5, abs=1e-12), name


def _random_grid(n, seed=0):
    rng = np.random.default_rng(seed)
    f = lambda lo, hi, log=False: jnp.asarray(  # noqa: E731
        np.exp(rng.uniform(np.log(lo), np.log(hi), n)) if log else rng.uniform(lo, hi, n), F64)
    dec = Decode(batch=f(1, 4096, True), k=jnp.ones(n, F64), alpha=f(0.0, 1.0), context=f(0, 32768),
                 draft_cost_ratio=f(0.0, 0.3), expert_locality=jnp.zeros(n, F64))
    return dec, f(0.5, 4.0, True)


@jax.jit
def _search_and_brute_force(hw, dep, t, d, dec, bw_scale):
    def one(dec_i, s):
        h = hw.replace(hbm_bytes_per_s=hw.hbm_bytes_per_s * s)
        return optimize.search(h, dep, t, d, dec_i, 16), optimize.brute_force(h, dep, t, d, dec_i, 16)

    return jax.vmap(one)(dec, bw_scale)


@pytest.mark.parametrize("pair", [("gpt-oss-120b", None), ("llama-3.1-8b", "llama-3.2-1b")])
def test_optax_k_star_equals_brute_force_on_random_grid(pair):
    """5,000 random configurations per model pair (10,000 in all); target: no mismatches."""
    target, draft = pair
    sc = Scenario(engine="roofline",
                  target=target, hardware="h100-sxm", drafter="model" if draft else "ratio", draft=draft,
                  draft_cost=None if draft else 0.1, alpha=0.5)
    hw, dep, t, d, _ = sc.build(F64)
    dec, bw_scale = _random_grid(5000, seed=len(target))
    if draft:
        dec = dec.replace(draft_cost_ratio=jnp.zeros_like(dec.alpha))

    opt, (k_bf, s_bf) = _search_and_brute_force(hw, dep, t, d, dec, bw_scale)
    s_opt = np.asarray(opt.speedup)
    # compare speedups (ties between neighbouring k are allowed); k must agree otherwise
    worse = s_opt < np.asarray(s_bf) * (1 - 1e-9)
    assert worse.sum() == 0, f"{worse.sum()} of {len(s_opt)} configurations below brute force"
    k_diff = np.asarray(opt.k_star) != np.asarray(k_bf)
    tie = np.isclose(s_opt, np.asarray(s_bf), rtol=1e-9)
    assert np.all(~k_diff | tie)
    assert (np.asarray(k_bf) == 0).any() and (np.asarray(k_bf) >= 8).any()  # grid spans both regimes


def test_switch_off_batch_is_where_best_k_stops_paying():
    sc = Scenario(engine="roofline", hardware="h200", **CASES["dense-pass"])
    hw, dep, t, d, dec = sc.build(F64)
    b = float(_switch_off(hw, dep, t, d, dec))
    below = _brute(hw, dep, t, d, dec.replace(batch=F64(b * 0.999)))
    above = _brute(hw, dep, t, d, dec.replace(batch=F64(b * 1.001)))
    assert float(below[0]) >= 1 and float(above[0]) == 0
    # k=1 beats k=2 past B*: B* is `crossover.find` at its defaults, the search `_sens` runs first (its first
    # output), compiled for this tree structure by test_elasticities_match_finite_differences[dense-pass]
    assert b > float(_sens(hw, dep, t, d, dec)[0].crossover_batch)


KINK_CASES = [  # found by a random search: the relaxed optimum sits past a roofline kink of S(k)
    dict(engine="roofline", alpha=0.9903855323791504, context=11.024250030517578, batch=469.9017333984375),
    # an engine profile with overheads (vllm's sigma = 1 sums math and memory: no kink to find there)
    dict(engine="trtllm", alpha=0.9715197682380676, context=1417.8438720703125, batch=220.6402587890625),
]


@pytest.mark.parametrize("case", KINK_CASES)
def test_optax_k_star_equals_brute_force_on_a_roofline_kink(case, monkeypatch):
    """Qwen3-235B with n-gram drafting on 8 MI300X (one roofline per pass): without the integer hill
    climb the gradient search stops one k past the optimum; with it, k* equals brute force."""
    sc = Scenario(**{"engine": "roofline", **case}, target="qwen3-235b-a22b", hardware="mi300x", drafter="ngram",
                  tp=8, k=3, roofline="pass")
    trees = sc.build(jnp.float32)
    k_bf, s_bf = _brute(*trees, k_max=16)
    got = _search(*trees, k_max=16)
    assert float(got.k_star) == float(k_bf) and float(got.speedup) == pytest.approx(float(s_bf), rel=1e-6)
    monkeypatch.setattr(optimize, "CLIMB_STEPS", 0)  # read while tracing: a new function, traced afresh
    plain = jax.jit(lambda *trees: optimize.search(*trees, 16))(*trees)
    assert float(plain.k_star) != float(k_bf) and float(plain.speedup) < float(s_bf) * (1 - 1e-5)  # the defect


def test_kv_bytes_scales_the_drafter_kv_and_draft_size_leaves_a_borrowed_head_alone():
    """kv_bytes moves the draft model's KV too (a target-only derivative differs); an EAGLE-1 head's
    draft_size is its own weights only (it reads the target's LM head, which the scaling leaves alone)."""
    sc = Scenario(engine="roofline", hardware="h200", **CASES["moe-operator-draft-tp2"])
    hw, dep, t, d, dec = sc.build(F64)
    _, deriv, _, _ = _sens(hw, dep, t, d, dec)
    b = lambda tt, dd: _crossing(hw, dep, tt, dd, dec)  # noqa: E731
    eps = 1e-6
    both = (b(t.replace(b_kv=t.b_kv * (1 + eps)), d.replace(b_kv=d.b_kv * (1 + eps)))
            - b(t.replace(b_kv=t.b_kv * (1 - eps)), d.replace(b_kv=d.b_kv * (1 - eps)))) / (2 * eps)
    target_only = (b(t.replace(b_kv=t.b_kv * (1 + eps)), d) - b(t.replace(b_kv=t.b_kv * (1 - eps)), d)) / (2 * eps)
    assert float(deriv["kv_bytes"]) == pytest.approx(both, rel=1e-4)
    assert abs(both - target_only) > 1e-3 * abs(both)
    sc = Scenario(engine="roofline", hardware="h200", **CASES["eagle1-operator"])
    hw, dep, t, d, dec = sc.build(F64)
    assert float(d.head_resident) == 0.0 and float(d.p_head) > 0  # reads the target's head
    _, deriv, _, _ = _sens(hw, dep, t, d, dec)
    own = (_crossing(hw, dep, t, d.replace(p_dense=d.p_dense * (1 + eps)), dec)
           - _crossing(hw, dep, t, d.replace(p_dense=d.p_dense * (1 - eps)), dec)) / (2 * eps)
    assert float(deriv["draft_size"]) == pytest.approx(own, rel=1e-4)
