"""The sweep reductions restructured for speed (issue 30) give what their definitions give, vmapped in float32
over rows with memory-bound batches, models that do not fit, NaN inputs and invalid rows:

- `max_speedup` (a scan that ranks the points that fit in memory, the step's status taken at the winner)
  against the grid evaluated as an array and reduced by `jnp.argmax`, also where the status at the winner
  is not ok (the step patched to fail its sanity checks at small batches: the exact loop runs);
- `optimize.brute_force` (a scan over k) against `jnp.argmax` over the k axis, with ties, NaNs and all -inf;
- `serving.batch` (one loop: the capacity, the halvings, the answer's step time) against `_search.bisect`
  and the step time evaluated at its answer, and `serving.serve` (each side solved apart) against `side`
  on the pair axis."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specjax.cost._search import bisect
from specjax.cost.speculative import step
from specjax.cost.status import Point, code
from specjax.inputs.scenario import Scenario
from specjax.search import optimize, reductions, serving

F32 = jnp.float32
BATCHES = np.geomspace(1.0, 65536.0, 24).astype(np.float32)


def _rows(n_alpha=24, **kw):
    """Rows of alpha (NaN in one) x k x context on one scenario: (hw, deploy, target, draft, decs, invalid)."""
    sc = Scenario(**{**dict(target="gpt-oss-120b", hardware="h200", drafter="eagle", draft="eagle3-gpt-oss-120b",
                            k=3, alpha=0.7, kv_dtype="fp8", engine="roofline"), **kw})
    hw, dep, t, d, dec = sc.build(F32)
    alphas = np.r_[np.linspace(0.0, 0.99, n_alpha - 1), np.nan]
    a, k, c = (x.ravel() for x in np.meshgrid(alphas, [1.0, 3.0, 8.0], [256.0, 8192.0, 131072.0], indexing="ij"))
    n = a.size
    decs = jax.tree.map(lambda v: jnp.broadcast_to(v, (n,)), dec).replace(
        alpha=jnp.asarray(a, F32), k=jnp.asarray(k, F32), context=jnp.asarray(c, F32))
    invalid = jnp.asarray(np.arange(n) % 7 == 3)
    return hw, dep, t, d, decs, invalid


def _max_speedup_by_definition(step_fn, hw, dep, t, d, dec, invalid, batches):
    rs = jax.vmap(lambda b: step_fn(hw, dep, t, d, dec.replace(batch=b)))(batches)
    ok = rs.status == int(Point.OK)
    s_ok = jnp.where(ok, rs.speedup, -jnp.inf)
    i, j, any_ok = jnp.argmax(rs.speedup), jnp.argmax(s_ok), jnp.any(ok)
    nan = jnp.nan
    return dict(max_speedup=jnp.where(invalid, nan, rs.speedup[i]),
                batch_at_max_speedup=jnp.where(invalid, nan, batches[i]),
                max_speedup_feasible=jnp.where(invalid | ~any_ok, nan, s_ok[j]),
                batch_at_max_speedup_feasible=jnp.where(invalid | ~any_ok, nan, batches[j]),
                status=jnp.where(invalid, code(Point.INVALID_INPUT), jnp.where(any_ok, code(Point.OK), rs.status[0])),
                valid=~invalid & any_ok)


def _max_speedup_both(step_fn, rows):
    hw, dep, t, d, decs, invalid = rows
    values = {"batch": jnp.asarray(BATCHES)}
    kernel = reductions.get("max_speedup").kernel
    got = jax.jit(jax.vmap(lambda dec, inv: kernel(hw, dep, t, d, dec, inv, values, None)))(decs, invalid)
    out, status, valid = got
    got = dict(out, status=status, valid=valid)
    want = jax.jit(jax.vmap(lambda dec, inv: _max_speedup_by_definition(step_fn, hw, dep, t, d, dec, inv,
                                                                        jnp.asarray(BATCHES))))(decs, invalid)
    return {k: np.asarray(v) for k, v in got.items()}, {k: np.asarray(v) for k, v in want.items()}


def _assert_same(got, want):
    for name, w in want.items():
        g = got[name]
        if name.startswith("batch") or w.dtype.kind != "f":  # indices and codes: exactly
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:  # the same evaluations, fused differently: float32 rounding
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=0, err_msg=name)


@pytest.mark.parametrize("kw", [{}, dict(target="llama-3-70b", drafter="model", draft="qwama-0.5b", hardware="h100-sxm",
                                         kv_dtype="bf16")])
def test_max_speedup_is_the_argmax_of_the_grid(kw):
    """MoE rows whose best batch does not fit in memory, and a dense model that does not fit on one H100
    (every point `model_does_not_fit`)."""
    got, want = _max_speedup_both(step, _rows(**kw))
    _assert_same(got, want)
    if not kw:
        ok = want["valid"]
        assert 0 < ok.sum() < len(ok)
        assert (want["batch_at_max_speedup_feasible"][ok] < want["batch_at_max_speedup"][ok]).any()  # memory binds
    else:
        assert (want["status"][~np.isnan(got["max_speedup"])] == int(Point.MODEL_DOES_NOT_FIT)).all()


def test_max_speedup_where_the_winner_fails_the_step_checks(monkeypatch):
    """The step's sanity checks fail at batches >= 64 (as float overflow or absurd inputs would): the point
    the scan ranks first is not ok on many rows, and the exact loop finds the feasible maximum below."""
    def failing(hw, dep, t, d, dec):
        r = step(hw, dep, t, d, dec)
        return r._replace(status=jnp.where(dec.batch >= 64.0, code(Point.INVALID_INPUT), r.status))

    rows = _rows(12)
    plain, _ = _max_speedup_both(step, rows)
    monkeypatch.setattr(reductions, "step", failing)
    got, want = _max_speedup_both(failing, rows)
    _assert_same(got, want)
    b_plain, b_got = plain["batch_at_max_speedup_feasible"], got["batch_at_max_speedup_feasible"]
    moved = np.isfinite(b_plain) & (b_got != b_plain)
    assert moved.sum() > len(moved) // 4 and (b_got[moved] < 64).all() and (b_plain[moved] >= 64).all()
    np.testing.assert_array_equal(got["batch_at_max_speedup"], plain["batch_at_max_speedup"])  # all points: unchanged


def test_brute_force_k_is_the_argmax_over_k(monkeypatch):
    """Real rows, and a table of S over k = 1..6 per row: ties (the first k), a NaN (no k: S = 1), all -inf."""
    hw, dep, t, d, decs, _ = _rows()
    ks = jnp.arange(1, 17, dtype=F32)

    def by_definition(dec):
        s = jax.vmap(lambda k: step(hw, dep, t, d, dec.replace(k=k)).speedup)(ks)
        i = jnp.argmax(s)
        return jnp.where(s[i] > 1.0, ks[i], 0.0), jnp.where(s[i] > 1.0, s[i], 1.0)

    got = jax.jit(jax.vmap(lambda dec: optimize.brute_force(hw, dep, t, d, dec, 16)))(decs)
    want = jax.jit(jax.vmap(by_definition))(decs)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=2e-6)
    assert len(set(np.asarray(got[0]).tolist())) >= 4  # k* varies over the rows

    inf, nan = np.inf, np.nan
    table = np.array([[1.0, 3.0, 3.0, 2.0, 0.5, 2.0], [0.5, 2.0, 4.0, 4.0, nan, 1.0], [nan, 5.0, 5.0, 1.0, 1.0, 1.0],
                      [-inf] * 6, [1.5, 1.5, 0.2, 0.2, 0.2, 0.2], [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]], np.float32)

    class Fake:
        def __init__(self, speedup):
            self.speedup = speedup

    monkeypatch.setattr(optimize, "step", lambda hw, dep, t, d, dec: Fake(jnp.asarray(table)[
        dec.alpha.astype(jnp.int32), dec.k.astype(jnp.int32) - 1]))
    rows = decs.replace(alpha=jnp.arange(6, dtype=F32), k=jnp.ones(6, F32))
    rows = jax.tree.map(lambda v: v[:6] if np.ndim(v) else v, rows)
    k_star, s_star = jax.jit(jax.vmap(lambda dec: optimize.brute_force(hw, dep, t, d, dec, 6)))(rows)
    np.testing.assert_array_equal(k_star, [2.0, 0.0, 0.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(s_star, [3.0, 1.0, 1.0, 1.0, 1.5, 1.0])


def test_serving_batch_is_the_bisection_and_serve_solves_each_side_apart():
    """Rates from far below one sequence to beyond both capacities, for k = 1, 3, 8 and alpha up to 0.99."""
    sc = Scenario(target="llama-3-70b", hardware="h100-sxm", drafter="model", draft="qwama-0.5b", tp=4, draft_tp=1,
                  k=4, alpha=0.7, engine="vllm", input_len=220, output_len=200, max_num_seqs=64)
    hw, dep, t, d, dec = sc.build(F32)
    qps, k, alpha = (x.ravel() for x in np.meshgrid(np.geomspace(0.01, 200.0, 40), [1.0, 3.0, 8.0],
                                                     [0.0, 0.6, 0.99], indexing="ij"))
    n = qps.size
    decs = jax.tree.map(lambda v: jnp.broadcast_to(v, (n,)), dec).replace(k=jnp.asarray(k, F32),
                                                                           alpha=jnp.asarray(alpha, F32))
    decs = decs.replace(load=decs.load.replace(qps=jnp.asarray(qps, F32)))
    iters = serving.solve_steps(F32)

    def one(dec):
        m = serving.sides(hw, dep, t, d, dec)
        q = dec.load.qps
        got = [serving.batch(m.t_side[i], m.tau[i], m.c_p[i], dec.load, m.cap[..., i], q, iters) for i in (0, 1)]
        want = []
        for i in (0, 1):  # the bisection and the evaluations one by one
            t_i, cap = m.t_side[i], m.cap[..., i]
            rate = lambda b: serving.rate_at(t_i(jnp.maximum(b, 1.0)), m.tau[i], m.c_p[i], dec.load, b)  # noqa: E731
            b = jnp.exp(bisect(lambda uu: rate(jnp.exp(uu)) < q, 0.0, jnp.log(jnp.maximum(cap, 1.0)), iters))
            lam_cap, lam_one = rate(cap), rate(jnp.ones_like(cap))
            below = q * dec.load.output_len / m.tau[i] * t_i(1.0) / (1.0 - q * dec.load.input_len * m.c_p[i])
            sat = (q > lam_cap) | (cap < 1.0)
            b = jnp.where(sat, cap, jnp.where(q <= lam_one, below, b))
            want.append((b, sat, lam_cap, t_i(jnp.maximum(b, 1.0))))
        pair = serving.side(m.t_of, m.tau, m.c_p, dec.load, m.cap, q, iters)
        return got, want, serving.serve(hw, dep, t, d, dec), pair

    got, want, served, pair = jax.jit(jax.vmap(one))(decs)
    for i in (0, 1):
        for name, g, w in zip(("batch", "saturated", "lambda(b_cap)", "t(B)"), got[i], want[i]):
            np.testing.assert_allclose(np.asarray(g, float), np.asarray(w, float), rtol=2e-6, err_msg=f"{name} {i}")
        sat = np.asarray(want[i][1])
        assert 0 < sat.sum() < n  # saturated and not
        for field in serving.Side._fields:  # `serve`'s side i, solved alone, against the pair axis
            np.testing.assert_allclose(np.asarray(getattr((served.base, served.sd)[i], field), float),
                                       np.asarray(getattr(pair, field)[..., i], float), rtol=2e-6, err_msg=field)
    assert (np.asarray(want[0][0]) < 1.0).any()  # rates served below one sequence
