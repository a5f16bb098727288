"""Sensitivity of the switch-off batch B_off to every continuous input (docs/model.md §9).

At B_off, S(B_off, theta) = 1, so by the implicit function theorem
    dB_off/dtheta = -(dS/dtheta) / (dS/dB),
with both partials from `jax.grad` of the one-point kernel. Elasticities are
(theta / B_off) dB_off/dtheta: percent change of B_off per percent change of the input. Where the
curve has no switch-off batch (it helps throughout, never helps, or pays again at the bound), the same
gradient gives the elasticities of the speedup itself at a requested batch, (theta / S) dS/dtheta, and
`of` says which (`OF`). Grouped inputs
(`draft_size`, `target_size`, `expert_size`) are uniform scalings of several leaves; their
derivative is d/ds at s = 1 and their elasticity the sum of the leaves' elasticities.

At a roofline knee (t_math == t_mem for some operator at B* or at the perturbed point)
`jnp.maximum` splits the gradient 0.5/0.5, so the value is the average of the two one-sided
derivatives; finite differences there disagree by design.
"""

import jax
import jax.numpy as jnp

from .. import catalogue
from . import crossover as _crossover
from ..cost.speculative import step

def terms(inp):
    """(tree, leaf, gate) for each leaf an input moves (`catalogue.Input` leaf syntax): gate is the name
    of a 0/1 leaf of the same tree that says whether the leaf scales, or None."""
    out = []
    for spec in inp.leaves:
        leaf, _, gate = spec.partition("*")
        tree, _, name = leaf.rpartition(".")
        out.append((tree or inp.tree, name, gate or None))
    return tuple(out)


# name -> terms; one term without a gate is a plain input, anything else one uniform scaling at s = 1.
INPUTS = {n: terms(i) for n, i in catalogue.SENSITIVITY.items()}


def is_scaling(name):
    """True if the input is a uniform scaling of several leaves (its derivative is d/ds at s = 1)."""
    t = INPUTS[name]
    return len(t) > 1 or t[0][2] is not None


def _speedup(batch, hw, deploy, target, draft, dec):
    return step(hw, deploy, target, draft, dec.replace(batch=batch)).speedup


OF = ("crossover_batch", "speedup")  # what the elasticities are of: index 0 at B_off, 1 at a requested batch


def partials(f, hw, deploy, target, draft, dec, x, load_inputs=()):
    """df/dx and df/d(every sensitivity input) of a scalar f(x, hw, deploy, target, draft, dec) at x:
    (df/dx, {name: (value, df/dinput)}); `load_inputs` adds leaves of the serving load (`dec.load`)."""
    values = (hw, deploy, target, draft, dec)
    grads = jax.grad(f, argnums=(0, 1, 2, 3, 4, 5))(x, *values)
    trees = dict(zip(catalogue.TREES, zip(values, grads[1:])))
    out = {}
    for name, ts in INPUTS.items():
        if not is_scaling(name):
            (tree, leaf, _), = ts
            vals, g = trees[tree]
            out[name] = (getattr(vals, leaf), getattr(g, leaf))
        else:  # uniform scaling s of several leaves, at s = 1
            ds = 0.0
            for tree, leaf, gate in ts:
                vals, g = trees[tree]
                ds = ds + getattr(vals, leaf) * getattr(g, leaf) * (getattr(vals, gate) if gate else 1.0)
            out[name] = (jnp.ones_like(x), ds)
    for name in load_inputs:
        out[name] = (getattr(dec.load, name), getattr(grads[5].load, name))
    return grads[0], out


def crossover_sensitivity(hw, deploy, target, draft, dec, batch_max=65536.0, n_grid=96, max_dips=0):
    """Find B_off and its sensitivities; where there is no B_off, the sensitivities of S at `dec.batch`.

    Returns:
      (Crossover, derivatives, elasticities, of): `of` indexes `OF` (0: of B_off, 1: of the speedup).
    """
    c = _crossover.find(hw, deploy, target, draft, dec, batch_max, n_grid, max_dips=max_dips)
    has_off = jnp.isfinite(c.crossover_batch)
    b = jax.lax.stop_gradient(jnp.where(has_off, c.crossover_batch, dec.batch))
    ds_db, parts = partials(_speedup, hw, deploy, target, draft, dec, b)  # one gradient serves both meanings
    s = jnp.where(has_off, 1.0, _speedup(b, hw, deploy, target, draft, dec))
    deriv = {n: jnp.where(has_off, -ds / ds_db, ds) for n, (_, ds) in parts.items()}
    elast = {n: deriv[n] * x / jnp.where(has_off, b, s) for n, (x, _) in parts.items()}
    return c, deriv, elast, jnp.where(has_off, 0, 1).astype(jnp.int8)
