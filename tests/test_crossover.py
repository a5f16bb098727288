"""Crossover batch: statuses, S(B*) = 1, first crossing of a non-monotone curve, and the seed."""

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


def built(**kw):
    base = dict(target="llama-3-70b", hardware="h200", drafter="ratio", draft_cost=0.145, k=2, alpha=0.814,
                context=2048.0, kv_dtype="fp8", roofline="pass")
    base.update(kw)
    return Scenario(**base).build(F64)


def test_crossover_speedup_is_one_there():
    hw, dep, t, d, dec = built()
    c = crossover.find(hw, dep, t, d, dec)
    assert int(c.status) == 0
    b = float(c.crossover_batch)
    s = lambda x: float(step(hw, dep, t, d, dec.replace(batch=F64(x))).speedup)  # noqa: E731
    assert s(b) == pytest.approx(1.0, abs=1e-9)
    assert s(b * (1 - 1e-6)) >= 1.0 > s(b * (1 + 1e-6))
    assert float(c.crossover_batch_int) == np.ceil(b)


def test_statuses():
    hw, dep, t, d, dec = built(alpha=0.0)
    assert int(crossover.find(hw, dep, t, d, dec).status) == 1  # never helps
    hw, dep, t, d, dec = built()
    c = crossover.find(hw, dep, t, d, dec, batch_max=100.0)
    assert int(c.status) == 2 and np.isnan(float(c.crossover_batch))  # helps throughout up to 100
    assert np.isnan(float(c.pays_again_batch))
    hw, dep, t, d, dec = built()
    assert np.isnan(float(crossover.find(hw, dep, t, d, dec).pays_again_batch))  # dense: never recovers
    assert Curve.names() == ("crosses", "never_helps", "helps_throughout", "invalid_input")


def test_beyond_memory_flag():
    hw, dep, t, d, dec = built(target="gpt-oss-120b")
    c = crossover.find(hw, dep, t, d, dec)
    assert int(c.status) == 0 and float(c.crossover_batch) > float(c.max_batch_sd)
    assert float(c.beyond_memory) == 1.0
    hw, dep, t, d, dec = built(target="llama-3.1-8b", context=512.0)
    c = crossover.find(hw, dep, t, d, dec)
    assert int(c.status) == 0 and float(c.beyond_memory) == 0.0


def test_first_crossing_of_non_monotone_curve():
    """gpt-oss-120b at low alpha: S dips below 1 at small B (more experts per verify), rises above
    1 at medium B, and falls again; B* is the first crossing, found against a fine scan."""
    hw, dep, t, d, dec = built(target="gpt-oss-120b", alpha=0.6, roofline="operator", draft_cost=0.05)
    grid = np.exp(np.linspace(0, np.log(65536), 20000))
    s = np.asarray(jax.vmap(lambda b: step(hw, dep, t, d, dec.replace(batch=b)).speedup)(jnp.asarray(grid)))
    assert s[0] > 1 and (s < 1).any() and (s[np.argmax(s < 1):] > 1).any(), "curve must dip and recover"
    first = grid[np.argmax(s < 1)]
    c = crossover.find(hw, dep, t, d, dec)
    assert float(c.crossover_batch) == pytest.approx(first, rel=2e-3)
    # and where it pays again: the first grid point past B* with S >= 1
    again = grid[np.argmax((s >= 1) & (grid > first))]
    assert float(c.pays_again_batch) == pytest.approx(again, rel=2e-3)
    s_at = lambda b: float(step(hw, dep, t, d, dec.replace(batch=F64(b))).speedup)  # noqa: E731
    assert s_at(float(c.pays_again_batch) * 0.999) < 1.0 <= s_at(float(c.pays_again_batch) * 1.001)


def test_vmapped_crossover_matches_scalar():
    hw, dep, t, d, dec = built()
    alphas = jnp.array([0.6, 0.7, 0.814, 0.9], F64)
    decs = jax.tree.map(lambda x: jnp.broadcast_to(x, (4,)), dec).replace(alpha=alphas)
    out = jax.jit(jax.vmap(lambda x: crossover.find(hw, dep, t, d, x)))(decs)
    for i in range(4):
        one = crossover.find(hw, dep, t, d, dec.replace(alpha=alphas[i]))
        assert float(out.crossover_batch[i]) == pytest.approx(float(one.crossover_batch), rel=1e-10)
    assert np.all(np.diff(np.asarray(out.crossover_batch)) > 0)  # better acceptance, later crossover


def test_seed_reproduces_headline_within_2_percent():
    sc = seed.scenarios()
    llama, oss = sc["llama-3-70b"], sc["gpt-oss-120b"]
    assert api.point(llama)["speedup"] == pytest.approx(1.92, rel=0.02)
    assert api.point(dataclasses.replace(llama, batch=512.0))["speedup"] == pytest.approx(0.74, rel=0.02)
    assert api.crossover(llama)["crossover_batch"] == pytest.approx(224, rel=0.02)
    assert api.crossover(oss)["crossover_batch"] == pytest.approx(1981, rel=0.02)
