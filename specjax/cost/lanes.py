"""Reductions along a short, static leading axis (a curve's grid points, the k tried, the candidates of
a search) as unrolled elementwise trees, with the semantics of the `jnp` function each replaces.

Why: inside a vmapped sweep, XLA:CPU lowers `argmax`, `any`, `sum` and dynamic indexing along such an
axis to scalar reduction and gather loops that do not vectorise and that split the step computation
feeding them into many fusions with materialised intermediates. Measured (bench/reductions.py's
setup, 16,384 rows x 190 lanes): one `jnp.argmax` costs as much CPU time as 1.5M step evaluations of
the bare kernel, a `jnp.any` a quarter of that. A tree of `maximum`/`where`/`|` over static slices is
ordinary elementwise code: it fuses with the grid that produces it, vectorised across rows, and the
grid is never written to memory. The results are bit-identical to the `jnp` functions (same ties,
same NaN rule, same index dtype): only the program's shape changes.

Every function takes a 1-d array (one curve; under `vmap` one per row), an array whose leading axis is
the one reduced, or a list of same-shaped lanes (never concatenated), and returns what the `jnp`
counterpart returns along axis 0 of their stack.
"""

import jax
import jax.numpy as jnp


def index_dtype():
    """The integer dtype `jnp.argmax` and `jnp.sum` of booleans return (int64 with x64 on, else int32)."""
    return jax.dtypes.canonicalize_dtype(jnp.int64)


def tree(items, op):
    """`op` folded over a list of same-shaped lanes pairwise (depth log2 n): for associative ops."""
    items = list(items)
    while len(items) > 1:
        items = [op(items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
    return items[0]


def _lanes(x):
    if isinstance(x, (list, tuple)):
        return [jnp.asarray(lane) for lane in x]
    x = jnp.asarray(x)
    return [x[i] for i in range(x.shape[0])]


def any_(b):
    """`jnp.any(b, axis=0)`."""
    return tree([lane.astype(bool) for lane in _lanes(b)], jnp.logical_or)


def all_(b):
    """`jnp.all(b, axis=0)`."""
    return tree([lane.astype(bool) for lane in _lanes(b)], jnp.logical_and)


def count(b):
    """`jnp.sum(b, axis=0)` of a boolean array (the default integer dtype)."""
    return tree([lane.astype(bool).astype(index_dtype()) for lane in _lanes(b)], jnp.add)


def max_(x):
    """`jnp.max(x, axis=0)` (NaN propagates, as there)."""
    return tree(_lanes(x), jnp.maximum)


def argmax(x):
    """`jnp.argmax(x, axis=0)`: the first index of the largest value, or of the first NaN if there is one."""
    lanes = _lanes(x)
    if lanes[0].dtype == bool:
        return first_true(lanes)
    idx = index_dtype()
    pairs = [(lane, jnp.full(lane.shape, i, idx)) for i, lane in enumerate(lanes)]

    def pick(left, right):  # the left one on ties (the lower index); a NaN wins, the left one first
        (lv, li), (rv, ri) = left, right
        right_wins = (rv > lv) | (jnp.isnan(rv) & ~jnp.isnan(lv))
        return jnp.where(right_wins, rv, lv), jnp.where(right_wins, ri, li)

    return tree(pairs, pick)[1]


def first_true(b):
    """`jnp.argmax(b, axis=0)` of a boolean array: the first True index, 0 where none is True."""
    lanes = [lane.astype(bool) for lane in _lanes(b)]
    n, idx = len(lanes), index_dtype()
    first = tree([jnp.where(lane, jnp.asarray(i, idx), jnp.asarray(n, idx)) for i, lane in enumerate(lanes)],
                  jnp.minimum)
    return jnp.where(first == n, jnp.asarray(0, idx), first)


def last_true(b):
    """The last True index (`n - 1 - jnp.argmax(b[::-1])`): n - 1 where none is True."""
    lanes = [lane.astype(bool) for lane in _lanes(b)]
    n, idx = len(lanes), index_dtype()
    last = tree([jnp.where(lane, jnp.asarray(i, idx), jnp.asarray(-1, idx)) for i, lane in enumerate(lanes)],
                 jnp.maximum)
    return jnp.where(last < 0, jnp.asarray(n - 1, idx), last)


def take(x, i):
    """`x[i]` for a traced integer `i` (clamped to [0, n - 1], as an out-of-range gather is), by a binary tree
    of selects on the bits of `i`: exact, and elementwise."""
    lanes = _lanes(x)
    n = len(lanes)
    i = jnp.clip(jnp.asarray(i), 0, n - 1)
    bit = 0
    while len(lanes) > 1:
        odd = (i >> bit) & 1 == 1
        lanes = [jnp.where(odd, lanes[j + 1], lanes[j]) if j + 1 < len(lanes) else lanes[j]
                 for j in range(0, len(lanes), 2)]
        bit += 1
    return lanes[0]
