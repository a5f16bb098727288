"""Crossover of S(B) = 1: statuses, S(B_off) = 1, and the switch-off batch, first crossing, dips and
paying range of non-monotone curves against fine scans; the seed."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specjax import api, crossover
from specjax.inputs import seed
from specjax.inputs.scenario import Scenario
from specjax.cost.speculative import step
from specjax.cost.status import Curve

F64 = jnp.float64


@pytest.fixture(autouse=True)
def _strict(strict_promotion):
    """Every kernel test runs under strict dtype promotion (the one dtype policy, `specjax.precision`)."""


# The kernels jitted once for the module (as `specjax.api` jits them): run op by op, every call traced and
# compiled each loop again; jitted, calls with the same tree structure and options reuse one compile.
_find = jax.jit(crossover.find, static_argnames=("batch_max", "n_grid", "n_bisect", "max_dips"))
_step = jax.jit(step)


def built(**kw):
    base = dict(target="llama-3-70b", hardware="h200", drafter="ratio", draft_cost=0.145, k=2, alpha=0.814,
                context=2048.0, kv_dtype="fp8", roofline="pass")
    base.update(kw)
    return Scenario(engine="roofline", **base).build(F64)


def test_crossover_speedup_is_one_there():
    hw, dep, t, d, dec = built()
    c = _find(hw, dep, t, d, dec)
    assert int(c.status) == Curve.STOPS_PAYING
    b = float(c.crossover_batch)
    s = lambda x: float(_step(hw, dep, t, d, dec.replace(batch=F64(x))).speedup)  # noqa: E731
    assert s(b) == pytest.approx(1.0, abs=1e-9)
    assert s(b * (1 - 1e-6)) >= 1.0 > s(b * (1 + 1e-6))
    assert float(c.crossover_batch_int) == np.ceil(b)


def test_statuses():
    hw, dep, t, d, dec = built(alpha=0.0)
    c = _find(hw, dep, t, d, dec)
    assert int(c.status) == Curve.NEVER_HELPS and np.isnan(float(c.crossover_batch))
    assert float(c.first_crossing_batch) == 1.0
    hw, dep, t, d, dec = built()
    c = _find(hw, dep, t, d, dec, batch_max=100.0)
    assert int(c.status) == Curve.HELPS_THROUGHOUT and np.isnan(float(c.crossover_batch))  # up to 100
    assert np.isnan(float(c.first_crossing_batch)) and float(c.n_dips) == 0 and float(c.batch_bound) == 100.0
    hw, dep, t, d, dec = built()
    c = _find(hw, dep, t, d, dec)
    assert int(c.status) == Curve.STOPS_PAYING and float(c.n_dips) == 0  # dense: one crossing, no dips
    assert float(c.first_crossing_batch) == pytest.approx(float(c.crossover_batch), rel=1e-12)
    assert Curve.names() == ("stops_paying", "helps_throughout", "never_helps", "hurts_at_small_batch",
                             "helps_with_dips", "invalid_input", "sd_does_not_fit")


def fine_scan(hw, dep, t, d, dec, n=40000, b_max=65536.0):
    grid = np.exp(np.linspace(0, np.log(b_max), n))
    s = np.asarray(jax.jit(jax.vmap(lambda b: step(hw, dep, t, d, dec.replace(batch=b)).speedup))(jnp.asarray(grid)))
    return grid, s


def crossings(grid, s):
    """(down, up) crossings of S = 1 on a fine scan: where S goes below 1, and where it comes back."""
    below = s < 1
    return grid[1:][~below[:-1] & below[1:]], grid[1:][below[:-1] & ~below[1:]]


def test_moe_dip_then_switch_off_matches_a_fine_scan():
    """The issue's command: gpt-oss-120b + EAGLE-3 on an H200, k 3, alpha 0.7, fp8 KV (pure roofline).
    S dips below 1 just above batch 1 (more experts per verify), pays 2x by batch 64, and stops paying
    for good near batch 1,300: B_off is the last crossing, the dip is reported, the status is
    stops_paying (not the first dip's B = 1.27)."""
    sc = Scenario(target="gpt-oss-120b", hardware="h200", drafter="eagle", draft="eagle3-gpt-oss-120b", k=3,
                  alpha=0.7, kv_dtype="fp8", engine="roofline")
    hw, dep, t, d, dec = sc.build(F64)
    grid, s = fine_scan(hw, dep, t, d, dec)
    down, up = crossings(grid, s)
    assert len(down) == 2 and len(up) == 1
    c = _find(hw, dep, t, d, dec, max_dips=4)
    assert int(c.status) == Curve.STOPS_PAYING
    assert float(c.crossover_batch) == pytest.approx(down[-1], rel=1e-3)
    assert 1250 < float(c.crossover_batch) < 1400
    assert float(c.first_crossing_batch) == pytest.approx(down[0], rel=1e-3)
    assert float(c.n_dips) == 1
    assert float(c.dips_from[0]) == pytest.approx(down[0], rel=1e-3)
    assert float(c.dips_to[0]) == pytest.approx(up[0], rel=1e-3)
    assert np.isnan(float(c.dips_from[1]))
    s_at = lambda b: float(_step(hw, dep, t, d, dec.replace(batch=F64(b))).speedup)  # noqa: E731
    assert s_at(64.0) > 2.0
    r = api.crossover(sc)
    assert r["status"] == "stops_paying" and len(r["dips"]) == 1 and r["pays_between"] is None


def test_hurts_at_small_batch_reports_where_it_pays():
    """Mixtral-8x22B + Mixtral-8x7B on 4 H200s: S(1) < 1, S >= 1 from batch ~2 until B_off."""
    sc = Scenario(target="mixtral-8x22b", hardware="h200", drafter="model", draft="mixtral-8x7b", tp=4, k=2,
                  alpha=0.814, engine="roofline")
    hw, dep, t, d, dec = sc.build(F64)
    grid, s = fine_scan(hw, dep, t, d, dec)
    down, up = crossings(grid, s)
    assert s[0] < 1 and len(up) == 1 and len(down) == 1
    c = _find(hw, dep, t, d, dec)
    assert int(c.status) == Curve.HURTS_AT_SMALL_BATCH
    assert float(c.pays_from) == pytest.approx(up[0], rel=1e-3) and float(c.pays_from) < 2.5
    assert float(c.pays_to) == pytest.approx(down[0], rel=1e-3) == float(c.crossover_batch)
    assert float(c.first_crossing_batch) == 1.0 and float(c.n_dips) == 1


def test_dip_narrower_than_one_grid_step_is_found():
    """Seed gpt-oss scenario at alpha 0.801982: S dips below 1 between two grid points near batch 5
    (too narrow for the 96-point grid alone); the derivative sign change inside that step is refined."""
    oss = dataclasses.replace(seed.scenarios()["gpt-oss-120b"], alpha=0.801982)
    hw, dep, t, d, dec = oss.build(F64)
    grid, s = fine_scan(hw, dep, t, d, dec, n=400000, b_max=64.0)
    down, up = crossings(grid, s)
    assert len(down) == 1 and len(up) == 1 and up[0] / down[0] < np.exp(np.log(65536) / 95)  # narrower than a step
    c = _find(hw, dep, t, d, dec, max_dips=2)
    assert float(c.first_crossing_batch) == pytest.approx(4.887, abs=2e-3)
    assert float(c.dips_to[0]) == pytest.approx(up[0], rel=1e-4)
    assert float(c.crossover_batch) == pytest.approx(1911.6, rel=2e-3) and int(c.status) == Curve.STOPS_PAYING
    # without refinement the grid alone misses it
    from specjax.cost import _search

    g = jax.jit(lambda: _search.sign_changes(lambda b: step(hw, dep, t, d, dec.replace(batch=b)),
                                             lambda r: r.speedup - 1.0, 65536.0, 96, 40, F64, n_refine=0))()
    assert float(g.first_below) == pytest.approx(1911.6, rel=2e-3)


def test_helps_with_dips_when_it_pays_again_at_the_bound():
    """Bound the same MoE curve inside its paying range: S >= 1 at both ends, S < 1 in the dip."""
    sc = Scenario(target="gpt-oss-120b", hardware="h200", drafter="eagle", draft="eagle3-gpt-oss-120b", k=3,
                  alpha=0.7, kv_dtype="fp8", engine="roofline")
    c = _find(*sc.build(F64), batch_max=512.0, max_dips=2)
    assert int(c.status) == Curve.HELPS_WITH_DIPS and np.isnan(float(c.crossover_batch))
    assert float(c.n_dips) == 1 and 1.0 < float(c.dips_from[0]) < float(c.dips_to[0]) < 512.0


def test_beyond_memory_flag():
    hw, dep, t, d, dec = built(target="gpt-oss-120b")
    c = _find(hw, dep, t, d, dec)
    assert int(c.status) == Curve.STOPS_PAYING and float(c.crossover_batch) > float(c.max_batch_sd)
    assert float(c.beyond_memory) == 1.0
    hw, dep, t, d, dec = built(target="llama-3.1-8b", context=512.0)
    c = _find(hw, dep, t, d, dec)
    assert int(c.status) == Curve.STOPS_PAYING and float(c.beyond_memory) == 0.0


def test_vmapped_crossover_matches_scalar():
    hw, dep, t, d, dec = built()
    alphas = jnp.array([0.6, 0.7, 0.814, 0.9], F64)
    decs = jax.tree.map(lambda x: jnp.broadcast_to(x, (4,)), dec).replace(alpha=alphas)
    out = jax.jit(jax.vmap(lambda x: _find(hw, dep, t, d, x)))(decs)
    for i in range(4):
        one = _find(hw, dep, t, d, dec.replace(alpha=alphas[i]))
        assert float(out.crossover_batch[i]) == pytest.approx(float(one.crossover_batch), rel=1e-10)
    assert np.all(np.diff(np.asarray(out.crossover_batch)) > 0)  # better acceptance, later crossover


def test_seed_reproduces_headline_within_2_percent():
    sc = seed.scenarios()
    llama, oss = sc["llama-3-70b"], sc["gpt-oss-120b"]
    assert api.point(llama)["speedup"] == pytest.approx(1.92, rel=0.02)
    assert api.point(dataclasses.replace(llama, batch=512.0))["speedup"] == pytest.approx(0.74, rel=0.02)
    assert api.crossover(llama)["crossover_batch"] == pytest.approx(224, rel=0.02)
    assert api.crossover(oss)["crossover_batch"] == pytest.approx(1981, rel=0.02)


def test_batched_search_gives_the_sequential_numbers():
    """`sign_changes(batched=True)` (one trace of the curve, for the CLI) and the sequential loops (sweeps)
    locate the same crossings and dips on the dip-then-switch-off curve (float64)."""
    from specjax.cost._search import sign_changes

    sc = Scenario(target="gpt-oss-120b", hardware="h200", drafter="eagle", draft="eagle3-gpt-oss-120b", k=3,
                  alpha=0.7, kv_dtype="fp8", engine="roofline")
    hw, dep, t, d, dec = sc.build(F64)

    def search(batched):
        return jax.jit(lambda: sign_changes(lambda b: step(hw, dep, t, d, dec.replace(batch=b)).speedup,
                                            lambda s: s - 1.0, 65536.0, 96, 40, F64, max_dips=4, batched=batched))()

    a, b = search(True), search(False)
    for field in ("first_below", "last_down", "first_up", "n_up", "dips_from", "dips_to"):
        np.testing.assert_allclose(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)), rtol=1e-12,
                                   err_msg=field)
    assert 1250 < float(a.last_down) < 1400 and int(a.n_up) == 1
