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
from ..cost import lanes
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
    batches = values["batch"].astype(dec.alpha.dtype)
    rs = jax.vmap(lambda b: step(hw, deploy, tgt, draft, dec.replace(batch=b)))(batches)
    feasible = rs.status == int(Point.OK)
    s_feas = jnp.where(feasible, rs.speedup, -jnp.inf)
    # elementwise trees over the batch points, not `argmax` and `any` (`cost.lanes`)
    i_all, i_feas, any_feasible = lanes.argmax(rs.speedup), lanes.argmax(s_feas), lanes.any_(feasible)
    out = masked(invalid, max_speedup=rs.speedup[i_all], batch_at_max_speedup=batches[i_all])
    out.update(masked(invalid | ~any_feasible, max_speedup_feasible=s_feas[i_feas],
                      batch_at_max_speedup_feasible=batches[i_feas]))
    status = invalid_or(invalid, jnp.where(any_feasible, code(Point.OK), rs.status[0]), Point)
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
