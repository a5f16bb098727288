"""Serving load: from a request rate to the batch it produces, for plain decoding and for speculation
(docs/model.md §10). Pure and vmappable functions of one point (hw, deploy, target, draft, dec) with
`dec.load` a `Load`.

At a rate lambda, each request needs N = L_out / tau engine iterations of decode (tau = 1 without
speculation) and L_in c_p of prefill work, c_p the time of one prompt token as prefill runs
(`cost.prefill`: its FLOPs at eta_P F, never less than its chunk's bytes amortised; the target's, plus the
drafter's own model under speculation: it reads the prompt too). With T the time of one iteration
(chunked prefill shares it), Little's law and the prefill share give the fixed point

    B = lambda N T,   T = t_step(max(B, 1)) / (1 - lambda L_in c_p),

i.e. lambda(B) = B / (N t_step(max(B, 1)) + B L_in c_p). lambda(B) is nondecreasing in B (t_step / B
never increases: every term of a pass is a constant plus a term at most linear in B), so the batch
of a rate is found by bisection of lambda(B) = lambda in log B on [1, B_cap] and in closed form below
one sequence (the engine then runs one sequence, busy a fraction B of the time). B_cap = min(max_num_seqs,
memory-feasible batch); a rate above lambda(B_cap) makes the queue grow: `saturated` (reported at the
engine's capacity lambda(B_cap)). The step is evaluated at the mean decode context L_in + L_out / 2
(paged KV: the mean, not the peak, is what the sequences of a batch hold).

Outputs per side: the batch, the iteration time T (= ITL), TPOT = T / tau, TTFT = T / 2 (the wait for
the iteration in progress) + ceil(L_in / chunk) T + L_in c_p (the iterations that carry the prompt, each
as long as any other, plus the prompt's own prefill: TTFT is never below its compute), E2E = TTFT +
(L_out - 1) TPOT, output throughput lambda L_out. The TPOT ratio at a rate compares two different batches:
TPOT_base(B_base) / TPOT_sd(B_sd).

Differentiable: `serve(..., differentiable=True)` bisects on stop-gradient inputs and adds one Newton
step whose value is the bisected batch and whose derivative is the implicit function theorem's,
-(d lambda/d theta) / (d lambda/dB).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..cost._search import bisect, sign_changes
from ..cost.precision import float_dtype
from ..cost.prefill import prefill_per_token
from ..cost.speculative import step, times
from ..cost.status import Curve, Serving, code
from . import crossover as _crossover
from . import sensitivity as _sensitivity
from .nograd import no_gradient

LOAD_SENSITIVITY = ("input_len", "output_len", "max_num_seqs")  # load leaves with elasticities of switch_off_qps
QPS_SPAN = 1e4      # the rate curve is searched on [lambda_top / QPS_SPAN, lambda_top]
N_GRID = 48         # log-grid points of the rate curve


def solve_steps(dtype):
    """Halvings of log B on [0, log B_cap] (at most 18.4 wide) that reach the dtype's resolution."""
    return 32 if jnp.finfo(dtype).bits <= 32 else 56


class Side(NamedTuple):
    """One side (plain decoding or speculation) at one request rate. Times in seconds."""

    batch: float          # mean sequences in the running batch
    iteration_s: float    # T: one engine iteration (ITL), prefill share included
    tpot_s: float         # T / tau
    ttft_s: float         # inf when saturated
    e2e_s: float          # inf when saturated
    throughput_tok_s: float  # output tokens/s actually served (capacity when saturated)
    saturated: bool
    fits: bool            # B_cap >= 1: the model (and the drafter) fit with one sequence


class Served(NamedTuple):
    """Both sides at one rate, and their comparison."""

    qps: float
    base: Side
    sd: Side
    speedup_tpot: float   # tpot_base / tpot_sd
    ratio_e2e: float      # e2e_base / e2e_sd (NaN when either is saturated)
    tokens_per_step: float
    status: int           # a `status.Serving` code


class Sides(NamedTuple):
    """The per-batch model of both sides, paired along a last axis of 2 (0: plain, 1: speculation)."""

    t_of: object      # (..., 2) batches -> (..., 2) step times: T_target(B[..., 0], 1), T_sd(B[..., 1])
    tau: object       # (2,) accepted tokens per step: 1, tau
    c_p: object       # (2,) prefill time per prompt token
    cap: object       # (2,) B_cap = min(each server's batch cap (`Load.caps`), memory-feasible batch)
    t_side: tuple = ()  # (T_target(., 1), T_sd(.)): each side's step time of batches of any shape
    t_one: object = None  # (2,) each side's step time at batch 1


def sides(hw, deploy, target, draft, dec):
    """`Sides` at the load's mean decode context. `t_of` evaluates both sides at once (one trace of the step);
    a solve inside a loop takes each side on its own with `t_side` (`serve`): on XLA:CPU a pair axis of 2
    inside a vmapped loop does not vectorise (about 8x the time of the two sides solved apart;
    bench/README.md, issue 30)."""
    dec = dec.replace(context=jnp.asarray(dec.load.decode_context, dec.context.dtype))

    def t_of(b2):  # one evaluation of the step at both batches (one trace), each side's time kept
        _, base, _, _, t_sd = times(hw, deploy, target, draft, dec.replace(batch=b2))
        return jnp.stack([base.t_s[..., 0], t_sd[..., 1]], axis=-1)

    t_side = (lambda b: times(hw, deploy, target, draft, dec.replace(batch=b))[1].t_s,
              lambda b: times(hw, deploy, target, draft, dec.replace(batch=b))[4])

    r1 = step(hw, deploy, target, draft, dec.replace(batch=jnp.ones_like(dec.batch)))
    cp = prefill_per_token(hw, deploy, target, dec.load, dec.expert_locality)
    cp_draft = prefill_per_token(hw, deploy.drafter(), draft, dec.load, dec.expert_locality)
    return Sides(t_of=t_of, tau=jnp.stack([jnp.ones_like(r1.tokens_per_step), r1.tokens_per_step]),
                 c_p=jnp.stack([cp, cp + cp_draft]),
                 cap=jnp.minimum(dec.load.caps, jnp.stack([r1.max_batch_base, r1.max_batch_sd])), t_side=t_side,
                 t_one=jnp.stack([r1.t_target_s, r1.t_sd_step_s]))


def rate_at(t, tau, c_p, load, b):
    """lambda(B) of batch `b` whose decode step takes `t` (Little's law with the prefill share)."""
    return b / (load.output_len / tau * t + b * load.input_len * c_p)


def rate_of(t_of, tau, c_p, load, b):
    """lambda(B): the request rate whose fixed point is batch `b`."""
    return rate_at(t_of(jnp.maximum(b, 1.0)), tau, c_p, load, b)


def batch(t_of, tau, c_p, load, b_cap, qps, iters, b0=None, slope=None, t_one=None):
    """The fixed-point batch of rate `qps` on [0, b_cap], whether the rate saturates (qps > lambda(b_cap)),
    lambda(b_cap) and the step time there, t_of(max(B, 1)). Elementwise: `t_of` maps batches to step times
    of the same shape. `t_one`: t_of(1), when the caller has it.

    The bisection is one loop of iters + 2 evaluations of `t_of`: at b_cap first (lambda(b_cap)), then the
    halvings, then at the answer (its step time), so that `t_of` is traced once (a sweep kernel compiles
    faster) and evaluated at full speed inside the loop.

    With `b0` and `slope` (the bisected batch and dlambda/dB there, found on stop-gradient inputs) one
    Newton step replaces the bisection: its value is b0 and its derivative the implicit function
    theorem's, -(dlambda/dtheta) / (dlambda/dB)."""
    one = jnp.ones_like(b_cap)
    t_one = t_of(one) if t_one is None else t_one
    lam_one = rate_at(t_one, tau, c_p, load, one)
    below_one = qps * load.output_len / tau * t_one / (1.0 - qps * load.input_len * c_p)  # B <= 1
    if b0 is None:
        def body(i, st):  # i = 0: at b_cap; 1..iters: a halving of [lo, hi] in log B; iters + 1: at the answer
            lo, hi, t_cap, _ = st
            u = 0.5 * (lo + hi)
            x = jnp.where(i == 0, b_cap, jnp.exp(u))
            t = t_of(jnp.maximum(x, 1.0))
            low = rate_at(t, tau, c_p, load, x) < qps
            halving = (i >= 1) & (i <= iters)
            return (jnp.where(halving & low, u, lo), jnp.where(halving & ~low, u, hi), jnp.where(i == 0, t, t_cap), t)

        top = jnp.log(jnp.maximum(b_cap, 1.0))
        t0 = t_one.astype(jax.eval_shape(t_of, b_cap).dtype)  # a given t_one may be narrower than the step's time
        lo, hi, t_cap, t_b = jax.lax.fori_loop(0, iters + 2, body, (jnp.zeros_like(top), top, t0, t0))
        b = jnp.exp(0.5 * (lo + hi))
    else:
        t_cap = t_of(jnp.maximum(b_cap, 1.0))
        step_ = (rate_of(t_of, tau, c_p, load, b0) - qps) / slope
        b = b0 - (step_ - jax.lax.stop_gradient(step_))
        t_b = t_of(jnp.maximum(b, 1.0))
    lam_cap = rate_at(t_cap, tau, c_p, load, b_cap)
    saturated = (qps > lam_cap) | (b_cap < 1.0)
    below = qps <= lam_one
    b = jnp.where(saturated, b_cap, jnp.where(below, below_one, b))
    return b, saturated, lam_cap, jnp.where(saturated, t_cap, jnp.where(below, t_one, t_b))


def admitted_latencies(iteration_s, tpot_s, load, c_p, wait=0.5):
    """(TTFT, E2E) of a request once it runs: `wait` iterations for the one in progress (half of one on
    average), then ceil(L_in / chunk) iterations that carry its prompt, each as long as the others plus
    its own prefill L_in c_p, then L_out - 1 TPOTs (no queue before it)."""
    ttft = (wait + jnp.ceil(load.input_len / load.chunk_tokens)) * iteration_s + load.input_len * c_p
    return ttft, ttft + (load.output_len - 1.0) * tpot_s


def side(t_of, tau, c_p, load, b_cap, qps, iters, b0=None, slope=None, t_one=None):
    """A `Side` at rate `qps` (elementwise, like `batch`)."""
    b, sat, lam_cap, t_b = batch(t_of, tau, c_p, load, b_cap, qps, iters, b0, slope, t_one)
    lam = jnp.where(sat, lam_cap, qps)  # a saturated engine serves at its capacity
    t = t_b / (1.0 - lam * load.input_len * c_p)
    tpot = t / tau
    ttft, e2e = admitted_latencies(t, tpot, load, c_p)
    inf = jnp.asarray(jnp.inf, t.dtype)
    fits = b_cap >= 1.0
    nan = jnp.asarray(jnp.nan, t.dtype)
    return Side(batch=jnp.where(fits, b, nan), iteration_s=jnp.where(fits, t, nan), tpot_s=jnp.where(fits, tpot, nan),
                ttft_s=jnp.where(fits, jnp.where(sat, inf, ttft), nan), e2e_s=jnp.where(fits, jnp.where(sat, inf, e2e),
                                                                                       nan),
                throughput_tok_s=jnp.where(fits, lam * load.output_len, 0.0), saturated=sat, fits=fits)


SIDE_COLUMNS = (("batch", "batch", ""), ("iteration_s", "itl", "_s"), ("tpot_s", "tpot", "_s"),
                ("ttft_s", "ttft", "_s"), ("e2e_s", "e2e", "_s"), ("throughput_tok_s", "throughput", "_tok_s"))


def side_columns(served, fields=None, columns=SIDE_COLUMNS):
    """Both sides' `fields` (default: every field of `columns`, a table of (field, stem, unit)) as flat
    named values: tpot_base_s, tpot_sd_s, batch_base, ... (the names of `specjax serve` JSON and of
    serving sweep columns; the closed loop passes its own table)."""
    return {f"{stem}_{which}{unit}": getattr(getattr(served, which), field) for which in ("base", "sd")
            for field, stem, unit in columns if fields is None or field in fields}


def pair_status(kind, base, sd, busy):
    """The code of two sides in status type `kind` (`status.Serving`, `status.Closed`), whose members for a
    side that cannot keep up are named after the sides' flag `busy` ("saturated": SD_SATURATED, ...)."""
    b, s = getattr(base, busy), getattr(sd, busy)
    member = lambda name: code(kind[name])  # noqa: E731
    word = busy.upper()
    return jnp.where(~base.fits, member("MODEL_DOES_NOT_FIT"),
                     jnp.where(~sd.fits, member("SD_DOES_NOT_FIT"),
                               jnp.where(b & s, member(f"BOTH_{word}"),
                                         jnp.where(s, member(f"SD_{word}"),
                                                   jnp.where(b, member(f"BASE_{word}"), member("OK"))))))


def status_of(base, sd):
    """The `status.Serving` code of two sides."""
    return pair_status(Serving, base, sd, "saturated")


def serve(hw, deploy, target, draft, dec, qps=None, differentiable=False, model=None):
    """Both sides at rate `qps` (default `dec.load.qps`): a `Served`. `model`: `sides(...)` when the
    caller already built it (a rate search reuses one)."""
    dtype = float_dtype(dec.alpha)
    qps = jnp.asarray(dec.load.qps if qps is None else qps, dtype)
    m = model or sides(hw, deploy, target, draft, dec)
    iters = solve_steps(dtype)
    if differentiable:  # bisect on constants (nothing to differentiate in the loop), then one Newton step
        const = jax.lax.stop_gradient((hw, deploy, target, draft, dec, qps))
        m0, ld = sides(*const[:5]), const[4].load

    def one(i):  # each side solved on its own batches, not on a pair axis (see `sides`)
        b0 = slope = None
        if differentiable:
            b0 = jnp.maximum(batch(m0.t_side[i], m0.tau[i], m0.c_p[i], ld, m0.cap[..., i], const[5], iters)[0], 1.0)
            slope = jax.jvp(lambda x: rate_of(m0.t_side[i], m0.tau[i], m0.c_p[i], ld, x), (b0,),
                            (jnp.ones_like(b0),))[1]
        t_one = None if m.t_one is None else m.t_one[i]
        return side(m.t_side[i], m.tau[i], m.c_p[i], dec.load, m.cap[..., i], qps, iters, b0, slope, t_one)

    base, sd = one(0), one(1)
    ok = ~base.saturated & ~sd.saturated
    return Served(qps=qps, base=base, sd=sd, speedup_tpot=base.tpot_s / sd.tpot_s,
                  ratio_e2e=jnp.where(ok, base.e2e_s / sd.e2e_s, jnp.nan), tokens_per_step=m.tau[1],
                  status=status_of(base, sd))


def capacities(hw, deploy, target, draft, dec, model=None):
    """(max_qps_base, max_qps_sd): lambda(B_cap) of each side (0 where it does not fit)."""
    m = model or sides(hw, deploy, target, draft, dec)
    lam = rate_of(m.t_of, m.tau, m.c_p, dec.load, m.cap)
    lam = jnp.where(m.cap >= 1.0, lam, 0.0)
    return lam[0], lam[1]


def paying_ratio(base_sustains, sd_sustains, speedup_tpot):
    """The TPOT ratio as it counts for paying: 0 where only plain decoding sustains the rate
    (speculation's queue grows without bound), 2 where only speculation does, else the ratio.
    Elementwise; also on a sweep's columns (the report, from each row's `status.Serving`)."""
    one_sided = base_sustains != sd_sustains
    return jnp.where(one_sided, jnp.where(sd_sustains, 2.0, 0.0), speedup_tpot)


def pays(served):
    """g(lambda) whose sign says whether speculation lowers TPOT at the rate: `paying_ratio` - 1 (a side
    which saturates where the other does not loses)."""
    return paying_ratio(~served.base.saturated, ~served.sd.saturated, served.speedup_tpot) - 1.0


class RateCurve(NamedTuple):
    """The TPOT ratio over request rates (docs/model.md §10): where speculation stops paying."""

    switch_off_qps: float       # last rate where speculation turns from lowering TPOT to not (NaN if none)
    first_crossing_qps: float   # first rate where it does not pay (the lowest rate searched if it never pays there)
    max_qps_base: float
    max_qps_sd: float
    speedup_tpot_low_qps: float  # the TPOT ratio at the lowest rate searched (-> S(1) as the rate -> 0)
    status: int                 # a `status.Curve` code (hurts_at_small_batch: hurts at low load)
    qps_low: float              # the lowest rate searched (just inside qps_top / QPS_SPAN)
    qps_top: float              # max(max_qps_base, max_qps_sd): the search ends just inside it


_RATE_GUARD = no_gradient("serving.rate_curve (the switch-off rate)", "serving.switch_off_sensitivity "
                          "(`specjax serve --sensitivity`): dlambda*/dinput by the implicit function theorem")


def rate_curve(hw, deploy, target, draft, dec, n_grid=N_GRID, batched=False):
    """Search the TPOT ratio on [lambda_top / QPS_SPAN, lambda_top] for its sign changes (the crossover
    search of docs/model.md §7, over rates; the top end just inside the larger capacity, so that beyond the
    smaller one a side that saturates alone is seen): a `RateCurve`. `batched`: one trace of the curve
    (for one answer; see `_search.sign_changes`). Not differentiable (a search): see `switch_off_sensitivity`."""
    hw, deploy, target, draft, dec = _RATE_GUARD((hw, deploy, target, draft, dec))
    dtype = float_dtype(dec.alpha)
    m = sides(hw, deploy, target, draft, dec)
    lam_b, lam_s = capacities(hw, deploy, target, draft, dec, m)
    top = jnp.maximum(lam_b, lam_s)
    low = top * (1.0 - 1e-4) / QPS_SPAN  # the last rate searched: just inside the larger capacity
    c = sign_changes(lambda x: serve(hw, deploy, target, draft, dec, low * x, model=m), pays, QPS_SPAN, n_grid,
                     _crossover.bisect_steps(dtype), dtype, n_refine=0, batched=batched)
    ok = top > 0
    nan = jnp.asarray(jnp.nan, dtype)
    return RateCurve(switch_off_qps=jnp.where(ok, c.last_down * low, nan),
                     first_crossing_qps=jnp.where(ok, c.first_below * low, nan), max_qps_base=lam_b, max_qps_sd=lam_s,
                     speedup_tpot_low_qps=jnp.where(ok, c.outputs.speedup_tpot[0], nan),
                     status=_crossover.unless_unfit(jnp.where(ok, _crossover.curve_status(c),
                                                              code(Curve.NEVER_HELPS)), m.cap[..., 1]),
                     qps_low=low, qps_top=top)


def max_qps_within(hw, deploy, target, draft, dec, tpot_slo=jnp.inf, ttft_slo=jnp.inf, model=None, tpot_factor=1.0):
    """The largest rate each side sustains with TPOT <= tpot_slo and TTFT <= ttft_slo (seconds; inf: no
    target), as (base, sd); 0 where even a vanishing rate misses a target. Both latencies rise with the
    rate, so the answer is a bisection in log rate on [capacity / 1e6, capacity]. `tpot_factor` ((2,) or
    a scalar, per side): the TPOT the target applies to over the mean TPOT, e.g. a percentile over requests
    (`cost.spread`: every request of a batch shares the iteration, so the factor does not depend on the rate)."""
    dtype = float_dtype(dec.alpha)
    m = model or sides(hw, deploy, target, draft, dec)
    cap = jnp.stack(capacities(hw, deploy, target, draft, dec, m))
    iters = solve_steps(dtype)

    def meets(lam):
        s = side(m.t_of, m.tau, m.c_p, dec.load, m.cap, lam, iters)
        return (s.tpot_s * tpot_factor <= tpot_slo) & (s.ttft_s <= ttft_slo) & ~s.saturated & s.fits

    hi = jnp.log(jnp.maximum(cap, jnp.finfo(dtype).tiny))
    lo = hi - jnp.log(jnp.asarray(1e6, dtype))
    lam = jnp.exp(bisect(lambda u: meets(jnp.exp(u)), lo, hi, _crossover.bisect_steps(dtype) + 8))
    lam = jnp.where(meets(cap), cap, jnp.where(meets(jnp.exp(lo)), lam, 0.0))
    return lam[0], lam[1]


def root_sensitivity(g, hw, deploy, target, draft, dec, root, fallback):
    """Derivatives and elasticities of a switch-off point x* (a rate, a concurrency) with respect to every
    sensitivity input, by the implicit function theorem: x* is a root of g(x, hw, deploy, target, draft,
    dec), so dx*/dtheta = -(dg/dtheta) / (dg/dx) there, and its elasticity is (theta / x*) dx*/dtheta. NaN
    where `root` is not finite (g is evaluated at `fallback` there instead, a point where it is finite).

    Returns:
      (derivatives, elasticities): dicts keyed by `catalogue.SENSITIVITY` name, context replaced by the
      load's `LOAD_SENSITIVITY` leaves (the lengths set the context).
    """
    has = jnp.isfinite(root)
    x = jax.lax.stop_gradient(jnp.where(has, root, fallback))
    dg_dx, parts = _sensitivity.partials(g, hw, deploy, target, draft, dec, x, LOAD_SENSITIVITY)
    del parts["context"]  # the load's lengths set the context
    nan = jnp.asarray(jnp.nan, x.dtype)
    deriv = {n: jnp.where(has, -d / dg_dx, nan) for n, (_, d) in parts.items()}
    elast = {n: deriv[n] * v / x for n, (v, _) in parts.items()}
    return deriv, elast


def switch_off_sensitivity(hw, deploy, target, draft, dec, n_grid=N_GRID, batched=False):
    """The rate curve and d switch_off_qps / d(every sensitivity input) (`root_sensitivity`).

    Where the TPOT ratio crosses 1 at lambda*, g(lambda, theta) = ratio - 1 = 0 and
    dlambda*/dtheta = -(dg/dtheta) / (dg/dlambda), with both sides' batches differentiated implicitly
    (`serve(differentiable=True)`). Where speculation stops paying because its own queue saturates first,
    lambda* = lambda_sd(B_cap), the root of g = lambda_sd(B_cap) - lambda, and its derivative is that of
    the capacity. NaN without a switch-off rate.

    Returns:
      (RateCurve, derivatives, elasticities): dicts keyed by `catalogue.SENSITIVITY` name (context
      replaced by the load's `LOAD_SENSITIVITY` leaves: the lengths set the context).
    """
    rc = rate_curve(hw, deploy, target, draft, dec, n_grid, batched)
    lam = jax.lax.stop_gradient(jnp.where(jnp.isfinite(rc.switch_off_qps), rc.switch_off_qps, rc.qps_top))
    at_edge = jnp.abs(lam - rc.max_qps_sd) <= 1e-5 * lam  # the bisection pins an edge to ~1e-7

    def g(x, hw_, deploy_, target_, draft_, dec_):  # one gradient serves both cases
        ratio = serve(hw_, deploy_, target_, draft_, dec_, x, differentiable=True).speedup_tpot
        return jnp.where(at_edge, capacities(hw_, deploy_, target_, draft_, dec_)[1] - x, ratio - 1.0)

    deriv, elast = root_sensitivity(g, hw, deploy, target, draft, dec, rc.switch_off_qps, rc.qps_top)
    return rc, deriv, elast
