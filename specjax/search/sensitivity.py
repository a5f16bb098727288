"""Sensitivity of the crossover batch B* to every continuous input (MODEL.md section 3).

At B*, S(B*, theta) = 1, so by the implicit function theorem
    dB*/dtheta = -(dS/dtheta) / (dS/dB),
with both partials from `jax.grad` of the one-point kernel. Elasticities are
(theta / B*) dB*/dtheta: percent change of B* per percent change of the input. Grouped inputs
(`draft_size`, `target_size`, `expert_size`) are uniform scalings of several leaves; their
derivative is dB*/ds at s = 1 and their elasticity the sum of the leaves' elasticities.

At a roofline knee (t_math == t_mem for some operator at B* or at the perturbed point)
`jnp.maximum` splits the gradient 0.5/0.5, so the value is the average of the two one-sided
derivatives; finite differences there disagree by design. Non-crossing points give NaN.
"""

import jax
import jax.numpy as jnp

from ..cost import catalogue
from . import crossover as _crossover
from ..cost.speculative import step
from ..cost.status import Curve

# name -> (pytree, leaf names); a single leaf is a plain input, several are one uniform scaling.
INPUTS = {n: (i.tree, i.leaves) for n, i in catalogue.SENSITIVITY.items()}


def _speedup(batch, hw, deploy, target, draft, dec):
    return step(hw, deploy, target, draft, dec.replace(batch=batch)).speedup


def at_batch(hw, deploy, target, draft, dec, batch):
    """Implicit-function derivatives of B* at a known crossing `batch`.

    Returns:
      (derivatives, elasticities): dicts keyed by `INPUTS` names, scalars each.
    """
    values = (hw, deploy, target, draft, dec)
    grads = jax.grad(_speedup, argnums=(0, 1, 2, 3, 4, 5))(batch, *values)
    ds_db = grads[0]
    trees = dict(zip(catalogue.TREES, zip(values, grads[1:])))
    deriv, elast = {}, {}
    for name, (tree, leaves) in INPUTS.items():
        values, g = trees[tree]
        if len(leaves) == 1:
            x = getattr(values, leaves[0])
            d = -getattr(g, leaves[0]) / ds_db
            deriv[name], elast[name] = d, d * x / batch
        else:  # uniform scaling s of several leaves, at s = 1
            d = -sum(getattr(values, leaf) * getattr(g, leaf) for leaf in leaves) / ds_db
            deriv[name], elast[name] = d, d / batch
    return deriv, elast


def crossover_sensitivity(hw, deploy, target, draft, dec, batch_max=65536.0, n_grid=96):
    """Find B* and its sensitivities. Returns (Crossover, derivatives, elasticities); NaN where
    the status is not `crosses`."""
    c = _crossover.find(hw, deploy, target, draft, dec, batch_max, n_grid)
    crosses = c.status == int(Curve.CROSSES)
    b = jax.lax.stop_gradient(jnp.where(crosses, c.crossover_batch, 1.0))
    deriv, elast = at_batch(hw, deploy, target, draft, dec, b)
    nan = lambda d: {k: jnp.where(crosses, v, jnp.nan) for k, v in d.items()}  # noqa: E731
    return c, nan(deriv), nan(elast)
