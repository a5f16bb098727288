"""The sweep-reduction registry: what a sweep keeps per output row, declared once per reduction.

A `Reduction` record carries its on-device kernel (a pure function of one grid point), the status
type of its rows, how many configurations one row evaluates, which numeric axes it searches itself
(and so forbids) or consumes, whether it needs a batch, and which output columns a summary should
aggregate. Sweep specs, the sweep engine, summaries and the report read the registry: adding a
reduction is one `register(Reduction(...))` with its kernel.

A kernel is `kernel(hw, deploy, tgt, draft, dec, invalid, values, cfg) -> (outputs, status, valid)`:
`outputs` a dict of scalars, `status` an int8 code of `status_type`, `valid` a bool.
"""

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

from . import concurrency as _concurrency
from . import crossover as _crossover
from . import optimize as _optimize
from . import sensitivity as _sensitivity
from . import serving as _serving
from .. import catalogue
from ..errors import SpecError, field_error
from ..cost.speculative import step
from ..cost.status import Closed, Curve, Point, Serving, code

STEP_OUTPUTS = ("speedup", "tokens_per_step", "t_target_s", "t_draft_s", "t_verify_s", "t_sd_step_s",
                "throughput_base_tok_s", "throughput_sd_tok_s", "max_batch_base", "max_batch_sd",
                "verify_compute_bound")
SERVE_SIDE_FIELDS = ("batch", "tpot_s", "ttft_s", "e2e_s", "throughput_tok_s")  # per side, in serve sweeps
CLOSED_SIDE_FIELDS = ("throughput_req_s", "batch", "tpot_s", "ttft_s", "e2e_s", "throughput_tok_s", "queue_s")
RATE_OUTPUTS = ("switch_off_qps", "first_crossing_qps", "max_qps_base", "max_qps_sd", "speedup_tpot_low_qps")
CROSSOVER_OUTPUTS = ("crossover_batch", "crossover_batch_int", "first_crossing_batch", "pays_from", "pays_to",
                     "n_dips", "speedup_at_batch_1", "max_batch_sd", "speedup_at_max_batch")


@dataclasses.dataclass(frozen=True)
class Reduction:
    """One sweep reduction.

    Attributes:
      name: the spec value `[reduce] kind`.
      kernel: see the module docstring.
      status_type: `status.Point`, `status.Curve` or `status.Serving`.
      per_row: spec -> configurations evaluated per output row.
      searches: axes the reduction searches itself (must not be axes of the spec).
      consumes: an axis folded into each row (required; not a column of the output).
      needs_batch: the spec must give a batch ([fixed] or [axes]).
      serving: a serving-load reduction (docs/model.md §10): needs input_len and output_len; other reductions
        refuse the load inputs. needs_qps: the spec must give a request rate; needs_concurrency: clients.
      summary: (column, (aggregations...)) pairs a summary reports per (hardware, pair).
      share_of: statuses whose share of rows a summary reports: every status of `status_type` (each is
        declared once, in `cost.status`; `sd_does_not_fit` and `invalid_input` rows are counted too).
    """

    name: str
    kernel: Callable
    status_type: type
    per_row: Callable = lambda spec: 1
    searches: tuple = ()
    consumes: str | None = None
    needs_batch: bool = False
    summary: tuple = ()
    share_of: tuple = ()
    serving: bool = False
    needs_qps: bool = False
    needs_concurrency: bool = False
    sensitivity: bool = False  # takes [sensitivity] (elasticities of its answer)

    def check_axes(self, axes, fixed, src):
        """Raise a `SpecError` if the spec's axes do not suit this reduction."""
        for name in self.searches:
            if name in axes:
                raise SpecError(f"axes.{name}: reduce.kind = {self.name!r} searches {name} itself; remove it in {src}")
        if self.consumes and self.consumes not in axes:
            raise SpecError(f"reduce.kind={self.name!r} needs a {self.consumes} axis ([axes] {self.consumes}) in {src}")
        if self.needs_batch and "batch" not in axes and "batch" not in fixed:
            raise SpecError(f"give batch in [fixed] or [axes] (reduce.kind={self.name!r}) in {src}")
        given = [n for n in catalogue.LOAD if n in axes or n in fixed]
        if not self.serving and given:
            serving = " or ".join(repr(r.name) for r in REGISTRY.values() if r.serving)
            raise SpecError(f"{given[0]} is an input of a serving load: reduce.kind = {serving} (reduce.kind="
                            f"{self.name!r} evaluates batches) in {src}")
        needed = ("input_len", "output_len") + (("qps",) if self.needs_qps else ()) + \
            (("concurrency",) if self.needs_concurrency else ())
        for name in needed if self.serving else ():
            if name not in axes and name not in fixed:
                raise SpecError(f"give {name} in [fixed] or [axes] (reduce.kind={self.name!r}) in {src}")


REGISTRY = {}


def register(reduction):
    """Add a reduction (replacing one of the same name); returns it."""
    REGISTRY[reduction.name] = reduction
    return reduction


def get(name, source=None):
    if name not in REGISTRY:
        raise field_error("reduce.kind", name, f"one of {', '.join(REGISTRY)}", source)
    return REGISTRY[name]


def masked(invalid, **fields):
    """Outputs of a point, NaN (null in the file) where its inputs are not physical."""
    return {k: jnp.where(invalid, jnp.nan, v) for k, v in fields.items()}


def invalid_or(invalid, status, status_type):
    """The status code, or `INVALID_INPUT` of `status_type` where the inputs are not physical."""
    return jnp.where(invalid, code(status_type.INVALID_INPUT), status.astype(jnp.int8))


def _none(hw, deploy, tgt, draft, dec, invalid, values, cfg):
    r = step(hw, deploy, tgt, draft, dec)
    status = invalid_or(invalid, r.status, Point)
    return masked(invalid, **{f: getattr(r, f) for f in STEP_OUTPUTS}), status, \
        (status == int(Point.OK)) & jnp.isfinite(r.speedup)


def _crossover_kernel(hw, deploy, tgt, draft, dec, invalid, values, cfg):
    trees = (hw, deploy, tgt, draft, dec)
    if cfg.sensitivity:  # elasticities of B_off; null where the curve has none
        c, _, el, of = _sensitivity.crossover_sensitivity(*trees, cfg.batch_max, cfg.batch_points)
        el = {n: jnp.where(of == 0, v, jnp.nan) for n, v in el.items()}
    else:
        c, el = _crossover.find(*trees, cfg.batch_max, cfg.batch_points), {}
    out = masked(invalid, **{f: getattr(c, f) for f in CROSSOVER_OUTPUTS},
                 **{f"elasticity_{n}": el[n] for n in cfg.sensitivity})
    out["beyond_memory"] = (c.beyond_memory > 0) & ~invalid
    return out, invalid_or(invalid, c.status, Curve), ~invalid & jnp.isfinite(c.speedup_at_batch_1)


def _best_k(hw, deploy, tgt, draft, dec, invalid, values, cfg):
    o = _optimize.best_k(hw, deploy, tgt, draft, dec, cfg.k_max, cfg.k_method)
    status = invalid_or(invalid, step(hw, deploy, tgt, draft, dec.replace(k=o.k_star)).status, Point)
    out = masked(invalid, k_star=o.k_star, speedup_k_star=o.speedup, k_relaxed=o.k_relaxed)
    return out, status, (status == int(Point.OK)) & jnp.isfinite(o.speedup)


def _max_speedup(hw, deploy, tgt, draft, dec, invalid, values, cfg):
    """The largest S over the batch axis, and the largest among the points whose status is ok, each with its
    batch (the first of equal values; a NaN S wins the first, as `jnp.argmax` ranks).

    One `lax.scan` over the batch points carries the two running maxima and their batches; each point costs
    one evaluation of S alone. A point's status (memory, and the step's sanity checks) is a second
    expression of the step that XLA:CPU does not fuse with S: computed at every point it made the sweep
    3-5x slower (bench/README.md, issue 30). So the scan ranks the points that fit in memory (the status's
    memory terms, per row), a superset of the ok ones; the step's status is then taken at the winner, and
    where it is not ok (the sanity checks failed there: absurd inputs, float overflow) the feasible maximum
    is searched again point by point with the full status, in a loop that runs only while some row of the
    chunk needs it."""
    batches = values["batch"].astype(dec.alpha.dtype)
    at = lambda b: step(hw, deploy, tgt, draft, dec.replace(batch=b))  # noqa: E731
    r0 = at(batches[0])
    mb_base, mb_sd = r0.max_batch_base, r0.max_batch_sd  # do not depend on the batch
    neg = jnp.full_like(r0.speedup, -jnp.inf)
    b0 = jnp.broadcast_to(batches[0], neg.shape)
    fits = lambda b: ~(mb_base < 1) & ~(b > mb_base) & ~(b > mb_sd)  # noqa: E731  `point_status`'s memory terms

    def ranked(c, b):
        best, b_best, fit_best, b_fit = c
        s = at(b).speedup
        wins = (s > best) | (jnp.isnan(s) & ~jnp.isnan(best))
        fit_wins = fits(b) & (s > fit_best)
        return (jnp.where(wins, s, best), jnp.where(wins, b, b_best), jnp.where(fit_wins, s, fit_best),
                jnp.where(fit_wins, b, b_fit)), None

    first = (r0.speedup, b0, jnp.where(fits(b0) & (r0.speedup > neg), r0.speedup, neg), b0)  # never a NaN
    (best, b_best, feas_best, b_feas), _ = jax.lax.scan(ranked, first, batches[1:])
    again = (feas_best > -jnp.inf) & (at(b_feas).status != int(Point.OK))

    def exact(c):  # the feasible maximum point by point, with the step's own status
        i, _, s_best, b_at = c
        r = at(batches[i])
        wins = (r.status == int(Point.OK)) & (r.speedup > s_best)
        return i + 1, c[1], jnp.where(wins, r.speedup, s_best), jnp.where(wins, batches[i], b_at)

    _, _, feas_best, b_feas = jax.lax.while_loop(
        lambda c: c[1] & (c[0] < batches.shape[0]), exact,
        (jnp.zeros((), jnp.int32), again, jnp.where(again, neg, feas_best), jnp.where(again, b0, b_feas)))
    any_feasible = feas_best > -jnp.inf  # an ok point's S is finite
    out = masked(invalid, max_speedup=best, batch_at_max_speedup=b_best)
    out.update(masked(invalid | ~any_feasible, max_speedup_feasible=feas_best, batch_at_max_speedup_feasible=b_feas))
    status = invalid_or(invalid, jnp.where(any_feasible, code(Point.OK), r0.status), Point)
    return out, status, ~invalid & any_feasible


def _serve(hw, deploy, tgt, draft, dec, invalid, values, cfg):
    s = _serving.serve(hw, deploy, tgt, draft, dec)
    flat = _serving.side_columns(s, SERVE_SIDE_FIELDS)
    out = masked(invalid, **flat, speedup_tpot=s.speedup_tpot, ratio_e2e=s.ratio_e2e)
    status = invalid_or(invalid, s.status, Serving)
    return out, status, ~invalid & jnp.isfinite(s.speedup_tpot)


def _serve_concurrency(hw, deploy, tgt, draft, dec, invalid, values, cfg):
    c = _concurrency.closed(hw, deploy, tgt, draft, dec)
    flat = _concurrency.side_columns(c, CLOSED_SIDE_FIELDS)
    out = masked(invalid, **flat, speedup_tpot=c.speedup_tpot, ratio_e2e=c.ratio_e2e)
    return out, invalid_or(invalid, c.status, Closed), ~invalid & jnp.isfinite(c.ratio_e2e)


def _switch_off_qps(hw, deploy, tgt, draft, dec, invalid, values, cfg):
    if cfg.sensitivity:  # elasticities of the switch-off rate; null where there is none
        rc, _, el = _serving.switch_off_sensitivity(hw, deploy, tgt, draft, dec)
    else:
        rc, el = _serving.rate_curve(hw, deploy, tgt, draft, dec), {}
    out = masked(invalid, **{f: getattr(rc, f) for f in RATE_OUTPUTS},
                 **{f"elasticity_{n}": el[n] for n in cfg.sensitivity})
    return out, invalid_or(invalid, rc.status, Curve), ~invalid & jnp.isfinite(rc.speedup_tpot_low_qps)


register(Reduction("none", _none, Point, needs_batch=True))
register(Reduction("crossover", _crossover_kernel, Curve, per_row=lambda spec: spec.batch_points,
                   searches=("batch",), sensitivity=True,
                   summary=(("crossover_batch", ("min", "median", "max")), ("beyond_memory", ("mean",)),
                            ("speedup_at_max_batch", ("median",))),
                   share_of=tuple(Curve)))
register(Reduction("best_k", _best_k, Point, per_row=lambda spec: spec.k_max, searches=("k",), needs_batch=True,
                   summary=(("speedup_k_star", ("min", "max")),)))
register(Reduction("max_speedup", _max_speedup, Point, per_row=lambda spec: len(spec.axes["batch"]),
                   consumes="batch", summary=(("max_speedup", ("min", "max")),)))
register(Reduction("serve", _serve, Serving, per_row=lambda spec: 2 * _serving.solve_steps(jnp.float32),
                   searches=("batch", "context"), serving=True, needs_qps=True,
                   summary=(("speedup_tpot", ("min", "median", "max")),),
                   share_of=tuple(Serving)))
register(Reduction("switch_off_qps", _switch_off_qps, Curve,
                   per_row=lambda spec: _serving.N_GRID * 2 * _serving.solve_steps(jnp.float32),
                   searches=("batch", "qps", "context"), serving=True, sensitivity=True,
                   summary=(("switch_off_qps", ("min", "median", "max")), ("max_qps_sd", ("median",))),
                   share_of=tuple(Curve)))
register(Reduction("serve_concurrency", _serve_concurrency, Closed,
                   per_row=lambda spec: 2 * _concurrency.solve_steps(jnp.float32),
                   searches=("batch", "context", "qps"), serving=True, needs_concurrency=True,
                   summary=(("ratio_e2e", ("min", "median", "max")),),
                   share_of=tuple(Closed)))
