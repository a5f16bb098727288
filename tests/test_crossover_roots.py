"""The crossover search's root finder (issue 30): `_search.illinois` on functions with known roots (smooth,
a kink, a jump, a NaN end), and the sweep form of `crossover.find` (float32, vmapped over rows with dips,
no crossing, invalid and memory-limited rows) against 28-halving bisection (the search before issue 30) and
against a dense scan located by `reference.sign_change_points`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference
from specjax.cost._search import illinois
from specjax.cost.speculative import step
from specjax.inputs.scenario import Scenario
from specjax.search import crossover


def _root(f, lo, hi, iters, halvings):
    lo, hi = jnp.float64(lo), jnp.float64(hi)
    return float(illinois(f, lo, hi, f(lo), f(hi), iters, halvings=halvings))


@pytest.mark.parametrize("halvings,iters", [(0, 12), (10, 6), (12, 6)])
def test_illinois_reaches_the_resolution_on_a_smooth_crossing(halvings, iters):
    assert _root(lambda x: x ** 3 - 2.0, 1.0, 1.5, iters, halvings) == pytest.approx(2.0 ** (1 / 3), abs=1e-13)
    assert _root(lambda x: -(x ** 3 - 2.0), 1.0, 1.5, iters, halvings) == pytest.approx(2.0 ** (1 / 3), abs=1e-13)


def test_a_kink_or_a_jump_is_located_within_the_bracket_the_halvings_leave():
    """Interpolation gains little at a kink or a jump (12 Illinois steps alone leave a kink 1.7e-3 off): the
    halvings bound the error."""
    jump = lambda x: jnp.where(x < 1.234567, 1.0, -1.0)  # noqa: E731
    kink = lambda x: jnp.where(x < 1.3, 1.3 - x, 0.05 * (1.3 - x))  # noqa: E731
    for halvings in (4, 10):
        assert abs(_root(jump, 1.0, 1.5, 3, halvings) - 1.234567) <= 0.5 / 2 ** halvings
        assert abs(_root(kink, 1.0, 1.5, 3, halvings) - 1.3) <= 0.5 / 2 ** halvings
    assert abs(_root(kink, 1.0, 1.5, 12, 0) - 1.3) > 1e-3


def test_illinois_falls_back_to_bisection_at_a_nan_end():
    f = lambda x: jnp.where(x > 1.4, jnp.nan, x - 1.2)  # noqa: E731  (NaN counts as not below)
    x = float(illinois(f, jnp.float64(1.0), jnp.float64(1.5), f(jnp.float64(1.0)), f(jnp.float64(1.5)), 12))
    assert x == pytest.approx(1.2, abs=1e-12)


ROWS = dict(alpha=[0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97, np.nan, 0.7, 0.7, 0.7, 0.72],
            context=[2048.0] * 9 + [256.0, 32768.0, 131072.0, 32768.0])


def _rows(target, draft, dtype):
    sc = Scenario(target=target, hardware="h200", drafter="eagle", draft=draft, k=3, alpha=0.7, kv_dtype="fp8",
                  engine="roofline")
    hw, dep, t, d, dec = sc.build(dtype)
    n = len(ROWS["alpha"])
    decs = jax.tree.map(lambda v: jnp.broadcast_to(v, (n,)), dec).replace(
        alpha=jnp.asarray(ROWS["alpha"], dtype), context=jnp.asarray(ROWS["context"], dtype))
    return hw, dep, t, d, decs


# the MoE pair only (its curve has the dips and the memory limit): the dense pair's search is compared with the
# one-curve search in test_lanes and with hand-derived crossovers in test_crossover; each pair here compiles the
# sweep search twice (~15 s)
@pytest.mark.parametrize("target,draft", [("gpt-oss-120b", "eagle3-gpt-oss-120b")])
def test_sweep_crossover_matches_bisection_and_a_dense_scan(target, draft):
    hw, dep, t, d, decs = _rows(target, draft, jnp.float32)

    def run(n_bisect):
        return jax.jit(jax.vmap(lambda dec: crossover.find(hw, dep, t, d, dec, n_bisect=n_bisect)))(decs)

    new, old = run(None), run(28)
    np.testing.assert_array_equal(np.asarray(new.status), np.asarray(old.status))
    for field in ("crossover_batch", "first_crossing_batch", "pays_from", "pays_to", "n_dips", "beyond_memory",
                  "speedup_at_batch_1", "speedup_at_max_batch"):
        # the measured worst case on 24,160 sweep rows is 4.0e-5 (bench/README.md)
        np.testing.assert_allclose(np.asarray(getattr(new, field)), np.asarray(getattr(old, field)), rtol=1e-4,
                                   err_msg=field)
    statuses = set(np.asarray(new.status).tolist())
    assert len(statuses) >= 2 and np.isfinite(np.asarray(new.crossover_batch)).sum() >= 4
    # against a dense scan (float64 step, 20,000 log points): the last crossing down and the first one
    hw, dep, t, d, decs64 = _rows(target, draft, jnp.float64)
    grid = np.exp(np.linspace(0.0, np.log(65536.0), 20000))
    scan = jax.jit(jax.vmap(lambda dec: jax.vmap(lambda b: step(hw, dep, t, d, dec.replace(batch=b)).speedup)(
        jnp.asarray(grid))))(decs64)
    checked = 0
    for i, s in enumerate(np.asarray(scan)):
        down, up = reference.sign_change_points(grid, s - 1.0)
        b_off, first = float(new.crossover_batch[i]), float(new.first_crossing_batch[i])
        if np.isnan(ROWS["alpha"][i]):
            assert np.isnan(b_off) and np.isnan(first)  # (the sweep writes its status, invalid_input)
            continue
        if s[-1] < 1 and len(down):  # stops paying: B_off is the last crossing down
            assert b_off == pytest.approx(down[-1], rel=1e-3), i
            checked += 1
        else:
            assert np.isnan(b_off), i
        if s[0] >= 1 and len(down):
            assert first == pytest.approx(down[0], rel=1e-3), i
    assert checked >= 4, checked


def test_first_up_shares_the_root_loop_of_the_first_crossing_down():
    """`first_up_if_below` (the crossover's two root loops instead of three) gives the same flags, counts and
    crossings, and the first crossing up where the curve starts below (NaN elsewhere): float32, vmapped, on
    the rows above (curves that start below 1 and recover, that stop paying, that never pay or always pay, and
    a NaN alpha)."""
    from specjax.cost._search import sign_changes

    hw, dep, t, d, decs = _rows("gpt-oss-120b", "eagle3-gpt-oss-120b", jnp.float32)

    def search(dec, shared):
        return sign_changes(lambda b: step(hw, dep, t, d, dec.replace(batch=b)), lambda r: r.speedup - 1.0,
                            65536.0, 96, 28, jnp.float32, n_root=crossover.ROOT_STEPS_32,
                            first_up_if_below=shared)._replace(outputs=0.0)

    a, b = jax.jit(jax.vmap(lambda dec: (search(dec, True), search(dec, False))))(decs)
    for field in a._fields:
        if field != "first_up":
            np.testing.assert_array_equal(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)), err_msg=field)
    below = np.asarray(a.below_first)
    up_a, up_b = np.asarray(a.first_up), np.asarray(b.first_up)
    np.testing.assert_array_equal(up_a[below], up_b[below])
    assert np.isnan(up_a[~below]).all()
    assert np.isfinite(up_b[below]).any() and np.isfinite(np.asarray(a.first_below)[~below]).any()
