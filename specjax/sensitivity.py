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

from . import crossover as _crossover
from .speculative import step

# name -> (pytree, leaf names); a single leaf is a plain input, several are one uniform scaling.
INPUTS = {
    "hbm_bytes_per_s": ("hw", ("hbm_bytes_per_s",)),
    "flops_per_s": ("hw", ("flops_per_s",)),
    "link_bytes_per_s": ("hw", ("link_bytes_per_s",)),
    "link_latency_s": ("hw", ("link_latency_s",)),
    "flops_efficiency": ("hw", ("flops_efficiency",)),
    "hbm_efficiency": ("hw", ("hbm_efficiency",)),
    "fixed_overhead_s": ("hw", ("fixed_overhead_s",)),
    "expert_locality": ("hw", ("expert_locality",)),
    "non_overlap": ("hw", ("non_overlap",)),
    "alpha": ("dec", ("alpha",)),
    "k": ("dec", ("k",)),
    "context": ("dec", ("context",)),
    "draft_cost": ("dec", ("draft_cost_ratio",)),
    "tp": ("dec", ("tp",)),
    "n_experts": ("target", ("n_experts",)),
    "top_k": ("target", ("top_k",)),
    "expert_size": ("target", ("p_expert",)),
    "target_size": ("target", ("p_dense", "p_head", "p_expert")),
    "kv_bytes": ("target", ("b_kv",)),
    "draft_size": ("draft", ("p_dense", "p_head", "p_expert")),
}


def _speedup(batch, hw, target, draft, dec, mode):
    return step(hw, target, draft, dec.replace(batch=batch), mode).speedup


def at_batch(hw, target, draft, dec, batch, mode="operator"):
    """Implicit-function derivatives of B* at a known crossing `batch`.

    Returns:
      (derivatives, elasticities): dicts keyed by `INPUTS` names, scalars each.
    """
    grads = jax.grad(_speedup, argnums=(0, 1, 2, 3, 4))(batch, hw, target, draft, dec, mode)
    ds_db = grads[0]
    trees = {"hw": (hw, grads[1]), "target": (target, grads[2]), "draft": (draft, grads[3]), "dec": (dec, grads[4])}
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


def crossover_sensitivity(hw, target, draft, dec, mode="operator", batch_max=65536.0, n_grid=96):
    """Find B* and its sensitivities. Returns (Crossover, derivatives, elasticities); NaN where
    the status is not `crosses`."""
    c = _crossover.find(hw, target, draft, dec, mode, batch_max, n_grid)
    crosses = c.status == 0
    b = jax.lax.stop_gradient(jnp.where(crosses, c.crossover_batch, 1.0))
    deriv, elast = at_batch(hw, target, draft, dec, b, mode)
    nan = lambda d: {k: jnp.where(crosses, v, jnp.nan) for k, v in d.items()}  # noqa: E731
    return c, nan(deriv), nan(elast)
