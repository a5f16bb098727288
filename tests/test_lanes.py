"""`cost.lanes` (reductions along a short axis as elementwise trees) gives exactly what the `jnp` function
it replaces gives: ties, NaNs, all-False, index dtype; the sweep form of the curve search
(`sign_changes(batched=False)`, sequential loops) gives bit-identical numbers to the one-curve form
(vmapped loops), vmapped in float32 over rows with dips, no crossing and invalid inputs; and a derivative
through a search raises `NotDifferentiable` naming what to use instead."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specjax.cost import lanes
from specjax.cost._search import sign_changes
from specjax.cost.speculative import step
from specjax.errors import NotDifferentiable
from specjax.inputs.scenario import Scenario
from specjax.search import crossover, optimize

X = np.array([[1.0, 3.0, 3.0, -1.0, np.nan, 2.0],
              [np.nan, np.nan, 0.0, 5.0, 5.0, 1.0],
              [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf],
              [0.0, -0.0, 0.0, 2.0, 7.0, 7.0]], np.float32).T  # lanes along axis 0, 4 "rows"
B = np.array([[False, True, False, True, False], [False] * 5, [True] * 5, [False, False, False, False, True]]).T


def test_lanes_match_jnp():
    x, b = jnp.asarray(X), jnp.asarray(B)
    np.testing.assert_array_equal(lanes.argmax(x), jnp.argmax(x, axis=0))  # first max; first NaN wins
    assert lanes.argmax(x).dtype == jnp.argmax(x, axis=0).dtype
    np.testing.assert_array_equal(lanes.max_(x), jnp.max(x, axis=0))
    np.testing.assert_array_equal(lanes.first_true(b), jnp.argmax(b, axis=0))  # 0 where none
    np.testing.assert_array_equal(lanes.last_true(b), b.shape[0] - 1 - jnp.argmax(b[::-1], axis=0))
    np.testing.assert_array_equal(lanes.any_(b), jnp.any(b, axis=0))
    np.testing.assert_array_equal(lanes.all_(b), jnp.all(b, axis=0))
    np.testing.assert_array_equal(lanes.count(b), jnp.sum(b, axis=0))
    for i in range(x.shape[0]):
        np.testing.assert_array_equal(lanes.take(x, jnp.full(4, i)), x[i])
    np.testing.assert_array_equal(jax.vmap(lanes.argmax, in_axes=1)(x), jnp.argmax(x, axis=0))  # per row
    np.testing.assert_array_equal(lanes.argmax([x[i] for i in range(6)]), jnp.argmax(x, axis=0))  # a list


def _rows(target, draft, alphas, contexts):
    sc = Scenario(target=target, hardware="h200", drafter="eagle", draft=draft, k=3, alpha=0.7, kv_dtype="fp8",
                  engine="roofline")
    hw, dep, t, d, dec = sc.build(jnp.float32)
    n = len(alphas)
    decs = jax.tree.map(lambda v: jnp.broadcast_to(v, (n,)), dec).replace(
        alpha=jnp.asarray(alphas, jnp.float32), context=jnp.asarray(contexts, jnp.float32))
    return hw, dep, t, d, decs


@pytest.mark.parametrize("target,draft", [("gpt-oss-120b", "eagle3-gpt-oss-120b"),
                                          ("llama-3.1-8b", "eagle3-llama-3.1-8b")])
def test_sweep_search_is_bit_identical_to_the_one_curve_search(target, draft):
    """MoE curves that dip below 1 near batch 1 and recover, dense ones with one crossing, curves that
    never pay (alpha 0) and invalid rows (NaN alpha) in one vmapped float32 chunk."""
    alphas = [0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97, np.nan, 0.7, 0.7, 0.7]
    contexts = [2048.0] * 9 + [256.0, 32768.0, 131072.0]
    hw, dep, t, d, decs = _rows(target, draft, alphas, contexts)

    def search(batched):
        def one(dec):
            c = sign_changes(lambda b: step(hw, dep, t, d, dec.replace(batch=b)), lambda r: r.speedup - 1.0,
                             65536.0, 96, 28, jnp.float32, batched=batched)
            return c._replace(outputs=0.0, dips_from=0.0, dips_to=0.0)
        return jax.jit(jax.vmap(one))(decs)

    a, b = search(True), search(False)
    for field in a._fields:
        np.testing.assert_array_equal(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)), err_msg=field)
    assert np.isfinite(np.asarray(a.last_down)).sum() >= 4  # the rows do cross
    assert np.isnan(np.asarray(a.last_down)[8]) and not bool(np.asarray(a.any_below)[7])  # invalid; pays to 65536
    if target == "gpt-oss-120b":
        assert np.asarray(a.n_up).max() >= 1 and np.isfinite(np.asarray(a.first_up)).any()  # dips that close


def test_gradient_through_a_search_raises_naming_sensitivity():
    hw, dep, t, d, dec = Scenario(engine="roofline", target="llama-3-70b", hardware="h200", drafter="ratio",
                                  draft_cost=0.145, k=2, alpha=0.814, context=2048.0, kv_dtype="fp8",
                                  roofline="pass").build(jnp.float32)
    b_off = lambda a: crossover.find(hw, dep, t, d, dec.replace(alpha=a)).crossover_batch  # noqa: E731
    assert np.isfinite(float(jax.jit(b_off)(jnp.float32(0.8))))  # evaluating it is unaffected
    for derivative in (jax.grad, jax.jacfwd):
        with pytest.raises(NotDifferentiable, match="crossover_sensitivity"):
            derivative(b_off)(jnp.float32(0.8))
    with pytest.raises(NotDifferentiable, match="sensitivity"):
        jax.grad(lambda a: optimize.best_k(hw, dep, t, d, dec.replace(alpha=a), 8, "brute").speedup)(
            jnp.float32(0.8))
    with pytest.raises(NotDifferentiable, match="switch_off_batch"):
        jax.grad(lambda a: optimize.switch_off_batch(hw, dep, t, d, dec.replace(alpha=a), 4))(jnp.float32(0.8))


def test_gradient_through_the_serving_searches_raises_naming_their_sensitivities():
    """The switch-off rate and the switch-off concurrency are searches too: a derivative through them raises
    and names the implicit-function sensitivity that gives it (`serve --sensitivity`); evaluating them, and
    that sensitivity itself, are unaffected."""
    from specjax.search import concurrency, serving

    sc = Scenario(target="llama-3-70b", hardware="h100-sxm", drafter="model", draft="qwama-0.5b", tp=4, draft_tp=1,
                  k=4, alpha=0.7, engine="vllm", input_len=256, output_len=256)
    hw, dep, t, d, dec = sc.build(jnp.float32)
    for curve, field, name in ((serving.rate_curve, "switch_off_qps", "serving.switch_off_sensitivity"),
                               (concurrency.concurrency_curve, "switch_off_concurrency",
                                "concurrency.switch_off_sensitivity")):
        with pytest.raises(NotDifferentiable, match=name):
            jax.grad(lambda a, c=curve, f=field: getattr(c(hw, dep, t, d, dec.replace(alpha=a)), f))(
                jnp.float32(0.7))
