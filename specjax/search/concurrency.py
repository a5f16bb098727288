"""Closed-loop concurrency (docs/model.md §11): N clients, each sending its next request the moment its last
one ends (`vllm bench serve --max-concurrency N`, SGLang `bench_serving --max-concurrency`, LLMPerf).
Pure and vmappable functions of one point (hw, deploy, target, draft, dec) with `dec.load` a `Load`,
reusing the per-batch model of both sides (`serving.sides`).

N is not the decode batch: some of the N requests are in prefill or queued. Per side, with request
throughput X, Little's law over the whole request gives N = X E2E(X), and section 6 at lambda = X gives
the decode batch B, the iteration T, TTFT and E2E. Two details of a closed loop, both exact at N = 1:

- A request's decode iterations carry the prompts of the other N - 1 clients only (its own client sends
  nothing while it runs): the prefill share of an iteration is X (N - 1) / N L_in c_p, so
  T = t_step(B) / (1 - X (N - 1)/N L_in c_p), and its own prefill, L_in c_p, is in its TTFT.
- It is sent when the iteration that ended its predecessor ends; the engine does not wait for it: the
  other requests keep it running, the next iteration has started when the request lands, and it joins the
  one after. It waits one iteration (none at N = 1: the engine is idle; an open loop's request lands at a
  random moment and waits half of one).

So TTFT = min(N - 1, 1) T + ceil(L_in / chunk) T + L_in c_p, E2E = TTFT + (L_out - 1) T / tau, and
TPOT = (E2E - TTFT) / (L_out - 1) = T / tau as benchmarks compute it. N(B) = X(B) E2E(B), with
X(B) = B / (L_out / tau t_step(B) + B L_in c_p (N - 1)/N) (`serving.rate_at`), increases with B, so the
batch of N clients is a bisection in log B on (0, B_cap] (the same root as a bisection on X, with one
loop instead of two nested ones), followed by one Newton step whose value is the bisected root and
whose derivative is the implicit function theorem's (sensitivities through the closed loop). Beyond
N(B_cap) the engine runs at B_cap and X(B_cap) and the excess clients queue for a slot: E2E = N / X,
the wait is added to TTFT (`queued`). Prompt tokens per iteration X L_in T = B tau L_in / L_out: with
speculation each iteration carries tau times the prompt tokens, so prefill bounds the speedup at large
N as Amdahl's law does; where they exceed `chunk_tokens` prefill cannot keep up (`prefill_bound`).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..cost._search import sign_changes
from ..cost.precision import float_dtype
from ..cost.status import Closed, Curve, code
from . import crossover as _crossover
from . import serving as _serving
from .nograd import no_gradient

N_GRID = 48          # log-grid points of the concurrency curve on [1, concurrency_top]
TOP_FACTOR = 2.0     # the curve is searched up to twice the concurrency at which a side reaches its cap
B_LOW = 1e-9         # the bisection's lowest batch (N >= 1 clients keep B far above it)


def solve_steps(dtype):
    """Halvings of log B on [log B_LOW, log B_cap] (at most ~39 wide) that reach the dtype's resolution."""
    return 36 if jnp.finfo(dtype).bits <= 32 else 60


class ClosedSide(NamedTuple):
    """One side (plain decoding or speculation) with N clients. Times in seconds."""

    throughput_req_s: float      # X: requests completed per second
    batch: float                 # B: mean sequences in decode
    prompt_tokens_per_iter: float  # X L_in T
    iteration_s: float           # T (ITL): one decode iteration, the other clients' prefill included
    tpot_s: float                # (E2E - TTFT) / (L_out - 1) = T / tau
    ttft_s: float                # wait for a slot and an iteration + the iterations carrying the prompt + its prefill
    e2e_s: float                 # N / X
    throughput_tok_s: float      # X L_out
    queue_s: float               # the wait for a slot (0 unless queued)
    queued: bool                 # N exceeds what the engine holds at its batch cap
    prefill_bound: bool          # prompt tokens per iteration exceed chunk_tokens
    fits: bool                   # B_cap >= 1


class ClosedLoop(NamedTuple):
    """Both sides with N clients, and their ratios (each at equal N)."""

    concurrency: float
    base: ClosedSide
    sd: ClosedSide
    speedup_tpot: float          # tpot_base / tpot_sd
    ratio_e2e: float             # e2e_base / e2e_sd = throughput_sd / throughput_base
    ratio_ttft: float            # ttft_base / ttft_sd
    tokens_per_step: float
    status: int                  # a `status.Closed` code


def at_batch(t_of, tau, c_p, load, n, b):
    """(X, T, TTFT, E2E) of a request admitted at once, at decode batch `b` with `n` clients
    (elementwise, like `serving.batch`)."""
    others = (n - 1.0) / n
    c_sh = c_p * others  # the other clients' prompts share its decode iterations
    t = t_of(jnp.maximum(b, 1.0))
    x = _serving.rate_at(t, tau, c_sh, load, b)
    it = t / (1.0 - x * load.input_len * c_sh)
    ttft, e2e = _serving.admitted_latencies(it, it / tau, load, c_p, wait=jnp.minimum(n - 1.0, 1.0))
    return x, it, ttft, e2e


def clients(t_of, tau, c_p, load, n, b):
    """N(B) = X(B) E2E(B): the clients whose closed loop runs at decode batch `b` (computed with the
    prefill share and wait of `n` clients)."""
    x, _, _, e2e = at_batch(t_of, tau, c_p, load, n, b)
    return x * e2e


def _root(g, u0):
    """u0, a root of g(u) found on constants (a bisection), with the implicit function theorem's derivative
    -(dg/dtheta) / (dg/du) for every input theta that g closes over. The derivative is traced only where
    something differentiates: a sweep or a forward pass evaluates neither g nor dg/du here."""
    gc, consts = jax.closure_convert(g, u0)
    return _newton(gc, u0, *consts)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _newton(gc, u0, *consts):
    return u0


@_newton.defjvp
def _newton_jvp(gc, primals, tangents):
    u0, *consts = primals
    _, *d_consts = tangents
    dg = jax.jvp(lambda *c: gc(u0, *c), tuple(consts), tuple(d_consts))[1]
    slope = jax.jvp(lambda u: gc(u, *consts), (u0,), (jnp.ones_like(u0),))[1]
    return u0, -dg / slope


def side(t_of, tau, c_p, load, b_cap, n, iters):
    """A `ClosedSide` for `n` clients (elementwise, like `serving.side`).

    The bisection is one loop of iters + 1 evaluations: at B_cap first (whether N clients queue), then the
    halvings of [log B_LOW, log B_cap]. Its root carries the implicit function theorem's derivative
    (`_root`), computed only where something differentiates (issue 30: the jvp of N(B) evaluated with every
    answer cost a sweep 5-10% and a third of its compile time)."""
    dtype = b_cap.dtype
    hi = jnp.log(jnp.maximum(b_cap, 1.0))
    lo = jnp.full_like(hi, jnp.log(jnp.asarray(B_LOW, dtype)))
    g = lambda uu: clients(t_of, tau, c_p, load, n, jnp.exp(uu)) - n  # noqa: E731  increasing in uu

    def body(i, st):  # i = 0: at B_cap; 1..iters: a halving of [a, b] in log B
        a, b, q = st
        mid = 0.5 * (a + b)
        gx = g(jnp.where(i == 0, hi, mid))
        low, halving = gx < 0, i >= 1
        return jnp.where(halving & low, mid, a), jnp.where(halving & ~low, mid, b), jnp.where(i == 0, gx <= 0, q)

    const = jax.lax.stop_gradient((lo, hi))
    a, b, queued = jax.lax.fori_loop(0, iters + 1, body, (*const, jnp.zeros(hi.shape, bool)))
    u0 = jax.lax.stop_gradient(0.5 * (a + b))
    b = jnp.where(queued, b_cap, jnp.exp(_root(g, u0)))
    x, it, ttft_a, e2e_a = at_batch(t_of, tau, c_p, load, n, b)
    queue = jnp.where(queued, jnp.maximum(n / x - e2e_a, 0.0), 0.0)
    ttft, e2e = ttft_a + queue, e2e_a + queue
    tpot = jnp.where(load.output_len > 1.0, (e2e - ttft) / jnp.maximum(load.output_len - 1.0, 1.0), it / tau)
    prompt = x * load.input_len * it
    fits = b_cap >= 1.0
    nan = jnp.asarray(jnp.nan, dtype)
    ok = lambda v: jnp.where(fits, v, nan)  # noqa: E731
    return ClosedSide(throughput_req_s=jnp.where(fits, x, 0.0), batch=ok(b), prompt_tokens_per_iter=ok(prompt),
                      iteration_s=ok(it), tpot_s=ok(tpot), ttft_s=ok(ttft), e2e_s=ok(e2e),
                      throughput_tok_s=jnp.where(fits, x * load.output_len, 0.0), queue_s=ok(queue),
                      queued=queued & fits, prefill_bound=(prompt > load.chunk_tokens) & fits, fits=fits)


SIDE_COLUMNS = (("throughput_req_s", "request_throughput", "_req_s"), ("batch", "batch", ""),
                ("prompt_tokens_per_iter", "prompt_tokens_per_iter", ""), ("iteration_s", "itl", "_s"),
                ("tpot_s", "tpot", "_s"), ("ttft_s", "ttft", "_s"), ("e2e_s", "e2e", "_s"),
                ("throughput_tok_s", "throughput", "_tok_s"), ("queue_s", "queue", "_s"))


def side_columns(closed, fields=None):
    """Both sides' `fields` as flat named values: tpot_base_s, request_throughput_sd_req_s, ..."""
    return _serving.side_columns(closed, fields, SIDE_COLUMNS)


def status_of(base, sd):
    """The `status.Closed` code of two sides."""
    return _serving.pair_status(Closed, base, sd, "queued")


def closed(hw, deploy, target, draft, dec, concurrency=None, model=None):
    """Both sides with `concurrency` clients (default `dec.load.concurrency`): a `ClosedLoop`. `model`:
    `serving.sides(...)` when the caller already built it (a search over N reuses one)."""
    dtype = float_dtype(dec.alpha)
    n = jnp.asarray(dec.load.concurrency if concurrency is None else concurrency, dtype)
    m = model or _serving.sides(hw, deploy, target, draft, dec)
    # each side on its own batches, not on a pair axis (`serving.sides`: a pair axis in the loop costs ~8x)
    base, sd = (side(m.t_side[i], m.tau[i], m.c_p[i], dec.load, m.cap[..., i], n, solve_steps(dtype)) for i in (0, 1))
    return ClosedLoop(concurrency=n, base=base, sd=sd, speedup_tpot=base.tpot_s / sd.tpot_s,
                   ratio_e2e=base.e2e_s / sd.e2e_s, ratio_ttft=base.ttft_s / sd.ttft_s, tokens_per_step=m.tau[1],
                   status=status_of(base, sd))


def capacity(hw, deploy, target, draft, dec, model=None, iters=4):
    """(max_concurrency, max_throughput_req_s), each of shape (2,) (plain, speculation): the clients at
    which a side's batch reaches its cap (N = X(B_cap) E2E(B_cap), a fixed point in N through the prefill
    share, a contraction: `iters` rounds from N = B_cap) and the request throughput there. 0 where a side
    does not fit."""
    m = model or _serving.sides(hw, deploy, target, draft, dec)
    ld = dec.load
    n = jnp.maximum(m.cap, 1.0)
    for _ in range(iters):
        n = jnp.maximum(clients(m.t_of, m.tau, m.c_p, ld, n, m.cap), 1.0)
    x = at_batch(m.t_of, m.tau, m.c_p, ld, n, m.cap)[0]
    fits = m.cap >= 1.0
    return jnp.where(fits, n, 0.0), jnp.where(fits, x, 0.0)


def pays(c):
    """g(N) whose sign says whether speculation lowers E2E (equivalently, raises throughput) at N clients."""
    return c.ratio_e2e - 1.0


class ConcurrencyCurve(NamedTuple):
    """The E2E ratio at equal concurrency over N (docs/model.md §11): where speculation stops paying."""

    switch_off_concurrency: float    # last N where speculation turns from lowering E2E to not (NaN if none)
    first_crossing_concurrency: float  # first N where it does not pay (1 if it does not at one client)
    ratio_e2e_one_client: float      # the ratio at N = 1 (single-request latency, no sharing)
    max_concurrency_base: float      # clients at which each side's batch reaches its cap (beyond: queued)
    max_concurrency_sd: float
    max_throughput_base_req_s: float  # request throughput at the cap
    max_throughput_sd_req_s: float
    status: int                      # a `status.Curve` code (hurts_at_small_batch: hurts at one client)
    concurrency_top: float           # the search ends here: TOP_FACTOR x the larger max_concurrency


_GUARD = no_gradient("concurrency.concurrency_curve (the switch-off concurrency)",
                     "concurrency.switch_off_sensitivity (`specjax serve --concurrency N --sensitivity`): dN*/dinput "
                     "by the implicit function theorem")


def concurrency_curve(hw, deploy, target, draft, dec, n_grid=N_GRID, batched=False):
    """Search the E2E ratio on [1, concurrency_top] for its sign changes (the crossover search of
    docs/model.md §7, over clients): a `ConcurrencyCurve`. Beyond both caps the ratio is that of the two
    capacities (nearly constant), so the search ends at twice the larger cap. `batched`: one trace of
    the curve (for one answer; see `_search.sign_changes`). Not differentiable (a search): see
    `switch_off_sensitivity`."""
    hw, deploy, target, draft, dec = _GUARD((hw, deploy, target, draft, dec))
    dtype = float_dtype(dec.alpha)
    m = _serving.sides(hw, deploy, target, draft, dec)
    n_cap, x_cap = capacity(hw, deploy, target, draft, dec, m)
    top = jnp.maximum(TOP_FACTOR * jnp.max(n_cap), 2.0)
    c = sign_changes(lambda x: closed(hw, deploy, target, draft, dec, x, model=m), pays, top, n_grid,
                     _crossover.bisect_steps(dtype) + 4, dtype, n_refine=0, batched=batched)
    ok = jnp.all(m.cap >= 1.0)
    nan = jnp.asarray(jnp.nan, dtype)
    return ConcurrencyCurve(switch_off_concurrency=jnp.where(ok, c.last_down, nan),
                            first_crossing_concurrency=jnp.where(ok, c.first_below, nan),
                            ratio_e2e_one_client=jnp.where(ok, c.outputs.ratio_e2e[0], nan),
                            max_concurrency_base=n_cap[0], max_concurrency_sd=n_cap[1],
                            max_throughput_base_req_s=x_cap[0], max_throughput_sd_req_s=x_cap[1],
                            status=_crossover.unless_unfit(jnp.where(ok, _crossover.curve_status(c),
                                                                     code(Curve.NEVER_HELPS)), m.cap[..., 1]),
                            concurrency_top=top)


def switch_off_sensitivity(hw, deploy, target, draft, dec, n_grid=N_GRID, batched=False):
    """The concurrency curve and d switch_off_concurrency / d(every sensitivity input)
    (`serving.root_sensitivity`, as for the switch-off rate).

    Where the E2E ratio crosses 1 at N*, g(N, theta) = `pays` = ratio_e2e - 1 = 0 and
    dN*/dtheta = -(dg/dtheta) / (dg/dN), with both sides' batches differentiated implicitly (`side`'s
    Newton step). The ratio is continuous in N (beyond a cap, E2E = N / X(B_cap)), so no edge case. NaN
    without a switch-off concurrency (the curve's status says why).

    Returns:
      (ConcurrencyCurve, derivatives, elasticities): dicts keyed by `catalogue.SENSITIVITY` name (context
      replaced by the load's `serving.LOAD_SENSITIVITY` leaves: the lengths set the context).
    """
    cc = concurrency_curve(hw, deploy, target, draft, dec, n_grid, batched)

    def g(n, hw_, deploy_, target_, draft_, dec_):
        return pays(closed(hw_, deploy_, target_, draft_, dec_, n))

    deriv, elast = _serving.root_sensitivity(g, hw, deploy, target, draft, dec, cc.switch_off_concurrency,
                                             cc.concurrency_top)
    return cc, deriv, elast
