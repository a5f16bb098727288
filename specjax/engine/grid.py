"""Grid coordinates on the device: flat point index -> one value per numeric axis -> pytrees.

No host-side meshgrid: each axis is a small value array; a chunk of flat indices
`start + arange(chunk)` is unravelled (row-major, last axis fastest) with integer division
inside the jitted kernel, and the values gathered per point. `apply` writes a point's axis
values into the pytrees, where the input catalogue says each one lives.
"""

import jax.numpy as jnp

from .. import catalogue
from ..cost.acceptance import TREE_MAX_DEPTH, alpha_from_tokens, alpha_from_tree_tokens, max_tree_tokens
from ..cost.trees import layout_divides


def unravel(flat, sizes):
    """Row-major digits of `flat` (int array) for axis `sizes` (static tuple). Returns a tuple."""
    digits = []
    rest = flat
    for size in reversed(sizes):
        digits.append(rest % size)
        rest = rest // size
    return tuple(reversed(digits))


def gather(flat, values):
    """Axis values of point `flat`; `values` is a dict name -> 1-d array (dict order = axis order)."""
    sizes = tuple(int(v.shape[0]) for v in values.values())
    digits = unravel(flat, sizes)
    return {name: v[d] for (name, v), d in zip(values.items(), digits)}


def apply(point, hw, deploy, target, dec, experts_hold="expert_size"):
    """Return (hw, deploy, target, dec, invalid) with the point's values written in.

    `invalid` is True where the combination is not physical (top_k > n_experts, an accepted
    length above k + 1); such points get status `invalid_input`, never a silent number.
    """
    trees = {"hw": hw, "deploy": deploy, "target": target, "op": dec, "load": dec.load}
    invalid = jnp.zeros((), bool)
    for name, value in point.items():
        inp = catalogue.INPUTS[name]
        if inp.leaf is None:
            continue
        tree = trees[inp.tree]
        trees[inp.tree] = tree.replace(**{inp.leaf: value.astype(getattr(tree, inp.leaf).dtype)})
    tgt, dec = trees["target"], trees["op"].replace(load=trees["load"])
    if "n_experts" in point and experts_hold == "footprint":
        tgt = tgt.replace(p_expert=target.p_expert * target.n_experts / tgt.n_experts)
    if "expert_granularity" in point:
        g = point["expert_granularity"].astype(tgt.p_expert.dtype)
        tgt = tgt.replace(n_experts=target.n_experts * g, top_k=target.top_k * g, p_expert=target.p_expert / g)
    if "n_experts" in point or "top_k" in point or "expert_granularity" in point:
        invalid = invalid | (tgt.top_k > tgt.n_experts) | (tgt.n_moe_layers == 0)
    if any(name in point for name in ("tp", "ep", "dp_attention", "draft_tp")):
        dep = trees["deploy"]  # a layout from several axes must still divide (`spec._check_layout_axes`)
        invalid = invalid | ~layout_divides(dep.tp, dep.ep, dep.dp_attention, dep.draft_tp, tgt.n_experts)
    if dec.is_tree and any(name in point for name in ("k", "tree_topk", "tree_tokens")):
        w, n, k = dec.tree_topk, dec.tree_tokens, dec.k  # a tree from several axes must still be a tree
        invalid = invalid | (n < k + 1.0) | (n > max_tree_tokens(w, k)) | ((w == 1.0) & (n != k + 1.0))
        invalid = invalid | (jnp.mod(k, 1.0) != 0) | ((w > 1.0) & (k > TREE_MAX_DEPTH))
    if "accepted_length" in point:
        tau = point["accepted_length"].astype(dec.alpha.dtype)
        invalid = invalid | (tau > dec.k + 1.0)
        tau = jnp.minimum(tau, dec.k + 1.0)
        alpha = alpha_from_tokens(tau, dec.k)
        if dec.is_tree:  # through the tree estimate, unless the tree is the chain
            wide = alpha_from_tree_tokens(tau, dec.tree_topk, dec.tree_tokens, dec.k)
            alpha = jnp.where(dec.tree_is_chain, alpha, wide)
        dec = dec.replace(alpha=alpha)
    return trees["hw"], trees["deploy"], tgt, dec, invalid
