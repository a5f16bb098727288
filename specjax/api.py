"""Jitted entry points for single operating points (the CLI and notebooks call these).

The kernels in `speculative`, `crossover`, `sensitivity` and `optimize` are pure functions of
one point taking (hw, deploy, target, draft, dec); this module applies `jax.jit` once per entry
point and converts results to plain Python dicts (NaN -> None, statuses -> names) for printing
and JSON.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from . import catalogue, inline, store
from .search import concurrency as _concurrency
from .search import crossover as _crossover
from .search import optimize as _optimize
from .search import sensitivity as _sensitivity
from .search import serving as _serving
from .cost import spread as _spread
from .cost.speculative import step
from .errors import SpecError, field_error
from .cost.status import Closed, Curve, Point, Serving
from .outputs.finite import finite  # the one non-finite policy of every writer (NaN, inf -> None)


def finite_or_none(x):
    """A Python float, or None where it is NaN or infinite (JSON has neither). A float32 value becomes
    the shortest decimal that round-trips in float32 (0.7, not 0.699999988079071)."""
    if type(x) is np.float32:  # a scalar (`store.Bound` with scalars): the same str as below
        f = float(str(x))
        return f if math.isfinite(f) else None
    a = np.asarray(x)
    f = float(str(a[()])) if a.dtype == np.float32 else float(a)  # str of the scalar: NumPy's shortest repr
    return f if math.isfinite(f) else None


def _int_or_none(x):
    return None if x is None else int(x)


def to_python(named_tuple):
    """NamedTuple of 0-d arrays -> dict of Python floats (NaN and inf -> None)."""
    return {k: finite_or_none(v) for k, v in named_tuple._asdict().items()}


_step = store.jit(step, inline=True)  # one point per call: run inline (`specjax.inline`)


MAX_DIPS = 8  # dips located exactly for one curve (the count is always exact)


@store.jit(static_argnames=("n_grid",))
def _find(hw, deploy, target, draft, dec, batch_max, n_grid=_crossover.N_GRID):
    return _crossover.find(hw, deploy, target, draft, dec, batch_max, n_grid, max_dips=MAX_DIPS)


_SCENARIO_TYPES = set()  # classes already seen to be Scenarios (the check runs once per class, not per call)


def _scenario(scenario):
    """`scenario` itself, or a one-line error where it is not a `Scenario` (a preset name, None, a dict)."""
    t = type(scenario)
    if t in _SCENARIO_TYPES:
        return scenario
    # by its interface: `scenario.define()` makes a new Scenario class when a catalogue row is added
    if isinstance(scenario, type) or not dataclasses.is_dataclass(t) or not all(
            hasattr(t, a) for a in ("build", "structure", "has_load")):
        raise SpecError(f"scenario={_short_repr(scenario)}; expected a specjax.Scenario "
                        "(Scenario(target, hardware, ...))")
    _SCENARIO_TYPES.add(t)
    return scenario


@functools.lru_cache(maxsize=None)
def _field_names(cls):
    return frozenset(f.name for f in dataclasses.fields(cls))


def _short_repr(x, n=60):
    r = repr(x)
    return r if len(r) <= n else r[:n] + "..."


def _dtype(dtype):
    """None or a float dtype the kernels compute in (float32, float64); anything else is refused by name."""
    if dtype is None:
        return None
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.name not in ("float32", "float64"):
        raise SpecError(f"dtype={_short_repr(dtype)}; expected float32 or float64 (or None: float32)")
    return dtype


def check_batch_max(x):
    """The search bound: a batch in [2, 1e8] (a larger or infinite bound overflows the search)."""
    if not catalogue.INPUTS["batch"].ok(x) or x < 2:
        raise SpecError(f"batch_max={_short_repr(x)}; expected 2 <= batch_max <= 1e8 (sequences)")
    return x


def _values(name, xs, row=None):
    """A non-empty list of numbers (a single number: a list of one), each inside input `name`'s catalogue row
    (`row`: another row's range)."""
    if isinstance(xs, (int, float, np.number)) and not isinstance(xs, bool):
        xs = [xs]
    if isinstance(xs, (str, bytes)) or not np.iterable(xs):
        raise SpecError(f"{name}={_short_repr(xs)}; expected a non-empty list of numbers")
    xs = list(np.asarray(xs, dtype=object).reshape(-1))
    if not xs:
        raise SpecError(f"{name}=[]; expected a non-empty list of numbers")
    check = catalogue.INPUTS[row or name]
    return [check.check(x.item() if isinstance(x, np.generic) else x, field=name) for x in xs]


def _whole(name, x, lo, hi):
    """An integer in [lo, hi] (k_max, max_depth, points), or a one-line error naming it."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not lo <= x <= hi:
        raise SpecError(f"{name}={_short_repr(x)}; expected an integer {lo} <= {name} <= {hi}")
    return int(x)


def _has_load(scenario, what):
    if not scenario.has_load:
        raise SpecError(f"{what}: the scenario has no serving load; expected input_len and output_len "
                        "(Scenario(..., input_len=1024, output_len=128))")


def inputs(scenario):
    """The resolved inputs of a `Scenario`, echoed with every answer (what was actually evaluated): every
    catalogue input a scenario carries (`catalogue.ECHO`), with the dtypes the model resolved, alpha as
    solved, the derived GPU count and conditional rates, and with a serving load the scheduler limits
    used (`scheduler_source`: "given" or the engine default they came from)."""
    from .inputs import models

    out = {name: getattr(scenario, name) for name in catalogue.ECHO}
    out = {n: list(v) if isinstance(v, tuple) else v for n, v in out.items()
           if not (v is None and catalogue.INPUTS[n].tree == "load")}  # a decode batch has no load
    arch = models.load_architecture(scenario.target)
    w, e, _, kv = models.dtype_names(arch, scenario.weight_dtype, scenario.expert_dtype, scenario.kv_dtype)
    out.update(weight_dtype=w, expert_dtype=e, kv_dtype=kv, alpha=finite_or_none(np.float32(scenario.resolved_alpha())),
               gpus=scenario.tp * scenario.dp_attention, rates=scenario.rates())
    if scenario.drafter == "parallel":  # the passes evaluated (default 1); no such key for a chain drafter
        out.update(draft_passes=scenario.draft_passes or 1)
    else:
        out.pop("draft_passes", None)
    if scenario.has_load:  # the scheduler limits used, and where each came from (given or the engine's default)
        limits = scenario.scheduler_limits()
        out.update({n: v for n, (v, _) in limits.items()}, scheduler_source={n: w for n, (_, w) in limits.items()})
    return finite(out)


def point(scenario, dtype=None, **values):
    """Evaluate one `Scenario`; returns a dict with the `Result` fields plus labels. `values`: some of batch,
    k, alpha and context in place of the scenario's (`point(sc, batch=64)` answers and refuses exactly as
    `point(dataclasses.replace(sc, batch=64))`: each value is checked against its catalogue row, and one that
    is not a free leaf of this scenario, `Scenario.free`, builds that scenario in full; a k that is not a whole
    number is refused here, as `points` refuses it, though a `Scenario` takes one: the relaxed k of the optax search).

    Scenarios of one structure (`Scenario.structure`: they differ only in batch, context, alpha given as
    alpha, or a chain's k) share one compiled program with its inputs packed once: a call writes its own
    values of those leaves into the packs (`store.Bound`) and runs the checks of `Scenario.check` that read
    them (`Scenario.check_free`: a DFlash drafter's block, the context against the models' positions); its
    own fields were checked when it was constructed. The outputs are those of a full build, bit for bit
    (tests/test_api_points.py). On a CPU the program runs on `specjax.inline`'s client, in the caller's
    thread (the same executable, the same bits: tests/test_inline.py)."""
    scenario, dtype = _scenario(scenario), _dtype(dtype)
    unknown = sorted(set(values) - _field_names(type(scenario)))
    if unknown:
        raise SpecError(f"point: {unknown[0]}={_short_repr(values[unknown[0]])} is not an input of a Scenario; "
                        f"expected some of {', '.join(VARYING)} (or another Scenario field)")
    if "k" in values and not (isinstance(values["k"], (int, float, np.number)) and float(values["k"]).is_integer()):
        catalogue.INPUTS["k"].check(values["k"])  # not a number or out of range: the row's message
        raise SpecError(f"k={_short_repr(values['k'])}; expected a whole number of draft tokens "
                        f"0 <= k <= {catalogue.K_MAX}")
    return _point_dict(_point_result(scenario, dtype, values))


_BOUND = {}  # (structure, dtype, x64, files, inline) -> (Bound, slots of the free leaves, free names, architectures)
_BOUND_MAX = 256


def _point_result(scenario, dtype=None, values=None):
    """The `Result` of one scenario (NumPy arrays), with `values` (free leaves) in place of its own: through
    the program bound to its structure, where one is (see `point`), else by a full build (which binds one
    for the next call)."""
    if values:
        free = scenario.structure()[0]
        if not values.keys() <= set(free):  # not only free leaves: the scenario they make, in full
            scenario, values = dataclasses.replace(scenario, **values), {}
        else:  # in catalogue order, as constructing the scenario checks them (the first bad one is named)
            values = {n: catalogue.INPUTS[n].check_value(values[n], scenario.source) for n in free if n in values}
    dt = jax.dtypes.canonicalize_dtype(dtype or jnp.float32)
    key = (scenario.structure(values.get("k") if values else None), dt, bool(jax.config.jax_enable_x64),
           scenario.files(), inline.enabled())
    found = _BOUND.get(key)
    if found is None:
        if values:  # a structure not seen yet: bound from the scenario these values make
            return _point_result(dataclasses.replace(scenario, **values), dtype)
        trees = scenario.build(dt)
        _, arch, draft_arch = scenario.check()
        bound = _step.bind(*trees)
        if bound is None:  # an argument the store passes to the plain jit: no packs to write into
            return _step(*trees)
        free = scenario.free()
        found = bound, [bound.slot("dec", n) for n in free], free, arch, draft_arch
        if len(_BOUND) >= _BOUND_MAX:
            _BOUND.pop(next(iter(_BOUND)))
        _BOUND[key] = found
    bound, slots, free, arch, draft_arch = found
    if values:
        scenario.check_free(arch, draft_arch, values.get("k"), values.get("context"))
        return bound(zip(slots, [values[n] if n in values else getattr(scenario, n) for n in free]), scalars=True)
    scenario.check_free(arch, draft_arch)
    return bound(zip(slots, [getattr(scenario, n) for n in free]), scalars=True)


_POINT_NAMES = Point.names()  # indexed by code
_POINT_INTS = ("max_batch_base", "max_batch_sd")
_POINT_FLAGS = ("feasible", "verify_compute_bound")  # true where finite and not 0 (a NaN flag is False)


def _point_dict(result):
    """The answer of `point` from a `Result` (0-d arrays, or NumPy scalars from `store.Bound`): every field as
    `to_python` gives it (NaN, inf -> None), the flags as booleans (a NaN flag is False), status by name, the
    memory limits as integers, and `bound` (compute or memory) in place of `verify_compute_bound`."""
    r = {}
    for key, v in zip(result._fields, result):
        if key in _POINT_FLAGS:  # no decimal needed, only whether it is finite and not 0
            r[key] = bool(math.isfinite(v) and v != 0)
        elif key == "status":
            r[key] = _POINT_NAMES[int(v)]
        elif type(v) is np.float32:  # `finite_or_none`'s own first branch, inlined: one call per field
            f = float(str(v))
            r[key] = f if math.isfinite(f) else None
        else:
            r[key] = finite_or_none(v)
    r["bound"] = "compute" if r.pop("verify_compute_bound") else "memory"
    for key in _POINT_INTS:
        r[key] = _int_or_none(r[key])
    return r


def crossover(scenario, batch_max=65536.0, dtype=None):
    """The crossover of a `Scenario`'s speedup curve (its batch is ignored): B_off as `crossover_batch`,
    the first crossing, the dips, the paying range and the status (docs/model.md §7); returns a dict."""
    scenario, dtype, batch_max = _scenario(scenario), _dtype(dtype), check_batch_max(batch_max)
    return _crossover_dict(_find(*scenario.build(*(dtype,) if dtype else ()), batch_max))


def _crossover_dict(found):
    c = to_python(found._replace(dips_from=0.0, dips_to=0.0))
    del c["dips_from"], c["dips_to"]
    c["status"] = Curve.decode(int(c["status"]))
    c["beyond_memory"] = bool(c["beyond_memory"])
    for key in ("crossover_batch_int", "max_batch_sd", "n_dips", "grid_points"):
        c[key] = _int_or_none(c[key])
    c["dips"] = [[finite_or_none(a), finite_or_none(b)] for a, b in zip(found.dips_from, found.dips_to)
                 if np.isfinite(a)]
    pays = c.pop("pays_from"), c.pop("pays_to")
    c["pays_between"] = list(pays) if pays[0] is not None else None
    return c


_sens = store.jit(functools.partial(_sensitivity.crossover_sensitivity, max_dips=MAX_DIPS))


def sensitivity(scenario, batch_max=65536.0, dtype=None):
    """Elasticities and derivatives for every continuous input: of the switch-off batch B_off where the
    curve has one, else of the speedup at the scenario's batch (`of` says which, `at_batch` where)."""
    scenario, dtype, batch_max = _scenario(scenario), _dtype(dtype), check_batch_max(batch_max)
    c, deriv, elast, of = _sens(*scenario.build(*(dtype,) if dtype else ()), batch_max)
    out = _crossover_dict(c)
    out["of"] = _sensitivity.OF[int(of)]
    out["at_batch"] = out["crossover_batch"] if int(of) == 0 else finite_or_none(np.float32(scenario.batch))
    return {**out, **elasticities(deriv, elast)}


def elasticities(deriv, elast):
    """`elasticities` (largest in magnitude first) and `derivatives` as Python floats (NaN -> None)."""
    clean = lambda d: {k: finite_or_none(v) for k, v in d.items()}  # noqa: E731
    return dict(elasticities=dict(sorted(clean(elast).items(), key=lambda kv: -abs(kv[1] or 0.0))),
                derivatives=clean(deriv))


def _curve_and_sensitivity(curve, with_sensitivity, sensitivity, *trees):
    """(curve, derivatives, elasticities) of a switch-off search: `with_sensitivity(*trees, batched=True)`
    where `sensitivity`, else `curve(*trees, batched=True)` and no derivatives (None, None)."""
    if sensitivity:
        return with_sensitivity(*trees, batched=True)
    return curve(*trees, batched=True), None, None


@store.jit(static_argnames=("k_max", "method"))
def _opt(hw, deploy, target, draft, dec, batches, batch_max, k_max, method):
    trees = (hw, deploy, target, draft)

    def one(b):
        o = _optimize.best_k(*trees, dec.replace(batch=b), k_max, method)
        return o, step(*trees, dec.replace(batch=b, k=jnp.maximum(o.k_star, 1.0))).status

    per, status = jax.vmap(one)(batches)
    env = _optimize.envelope(*trees, dec, k_max, batch_max, batched=True)
    mem = step(*trees, dec.replace(batch=jnp.ones_like(dec.batch), k=jnp.asarray(k_max, dec.k.dtype))).max_batch_sd
    return per, status, env.last_down, env.all_below, mem


@store.jit(static_argnames=("max_depth",))
def _trees(hw, deploy, tgt, draft, dec, batches, max_depth):
    shapes = _optimize.tree_shapes(max_depth)

    def one(b):
        d = dec.replace(batch=b)
        best = _optimize.best_tree(hw, deploy, tgt, draft, d, shapes)
        chain = _optimize.brute_force(hw, deploy, tgt, draft, d.replace(tree_topk=None, tree_tokens=None), max_depth)
        fits = step(hw, deploy, tgt, draft, d.replace(k=best.depth, tree_topk=best.topk, tree_tokens=best.tokens))
        return best, chain, fits.status
    return jax.vmap(one)(batches)


def optimize_trees(scenario, batches, max_depth=8, dtype=None):
    """The best draft shape (depth, topk, tokens; docs/model.md §4.4) at each batch, beside the best chain k:
    `shape_by_batch` objects with batch, status (of the best shape), depth, topk, tokens, speedup,
    chain_k, chain_speedup. A shape with speedup <= 1 means: switch speculation off there."""
    scenario, dtype = _scenario(scenario), _dtype(dtype)
    batches, max_depth = _values("batches", batches, "batch"), _whole("max_depth", max_depth, 1, 8)
    from .inputs import drafters

    if not drafters.get(scenario.drafter).runs_model:
        raise SpecError(f"a draft tree needs a drafter that runs a model; drafter={scenario.drafter!r} runs none")
    hw, deploy, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    if dec.is_parallel:
        raise SpecError("draft trees need a chain drafter; drafter='parallel' proposes one block of k tokens "
                        "(search its block size k without --trees)")
    if not dec.is_tree:
        one = jnp.ones_like(dec.k)
        dec = dec.replace(tree_topk=one, tree_tokens=dec.k + one)
    dec = dec.replace(tree_max_depth=int(max_depth))  # the shapes searched go this deep
    b = jnp.asarray(batches, dtype=np.asarray(dec.alpha).dtype)
    best, (chain_k, chain_s), status = _trees(hw, deploy, tgt, draft, dec, b, int(max_depth))
    rows = []
    for i, bi in enumerate(np.asarray(b)):
        pays = float(best.speedup[i]) > 1.0
        rows.append(dict(batch=finite_or_none(bi), status=Point.decode(int(status[i])),
                         depth=int(best.depth[i]) if pays else 0, topk=int(best.topk[i]) if pays else 0,
                         tokens=int(best.tokens[i]) if pays else 0, speedup=finite_or_none(best.speedup[i]),
                         chain_k=int(chain_k[i]), chain_speedup=finite_or_none(chain_s[i])))
    return dict(shape_by_batch=rows, shapes_searched=int(_optimize.tree_shapes(max_depth).shape[0]),
                max_depth=int(max_depth), inputs=inputs(scenario))


def block_k(scenario):
    """The most draft tokens the scenario's drafter proposes per step, where its config fixes it: a DFlash
    drafter fills a block of `block_size` tokens, the first the last verified one (k <= block_size - 1);
    None for every other drafter."""
    if scenario.drafter != "parallel":
        return None
    from .inputs import models

    block = models.load_architecture(scenario.draft).block_size
    return block - 1 if block else None


def optimize(scenario, batches, k_max=16, batch_max=65536.0, dtype=None, method="optax", ignore_memory=False):
    """k* (optax search, integer-checked) at each batch that fits in memory with the drafter (`status`
    per batch; k* is None where it does not fit), and the switch-off batch of the best-k envelope, with
    what bounds it: `pays_up_to` = the switch-off batch, else the largest batch that fits with the
    drafter at k_max, else the search bound (`pays_up_to_bound`: switch_off | memory | search_bound |
    never_pays). `ignore_memory`: pure roofline, as `point --ignore-memory`: k* at every batch whose
    inputs are physical (the status still says what does not fit), and memory bounds nothing.
    `k_max`: the largest k searched (a DFlash drafter's block less one where smaller)."""
    scenario, dtype, batch_max = _scenario(scenario), _dtype(dtype), check_batch_max(batch_max)
    batches, k_max = _values("batches", batches, "batch"), _whole("k_max", k_max, 1, catalogue.K_MAX)
    if method not in ("optax", "brute"):
        raise SpecError(f"method={_short_repr(method)}; expected 'optax' or 'brute'")
    hw, deploy, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    k_max = min(k_max, block_k(scenario) or k_max)  # a DFlash drafter: at most its block
    b = np.asarray(batches, dtype=np.asarray(dec.alpha).dtype)
    per, status, off, never, mem = _opt(hw, deploy, tgt, draft, dec, b, batch_max, int(k_max), method)
    rows = []
    for i, bi in enumerate(b):
        st = Point.decode(int(status[i]))
        fits = st == Point.OK.label or (ignore_memory and st != Point.INVALID_INPUT.label)
        rows.append(dict(batch=finite_or_none(bi), status=st, k_star=int(per.k_star[i]) if fits else None,
                         speedup=finite_or_none(per.speedup[i]) if fits else None,
                         k_relaxed=finite_or_none(per.k_relaxed[i]) if fits else None))
    off, mem = finite_or_none(off), float(mem)
    max_batch_sd = int(mem)
    if ignore_memory:
        mem = float("inf")
    if bool(never):
        up_to, bound = None, "never_pays"
    elif off is not None and off <= min(mem, batch_max):
        up_to, bound = off, "switch_off"
    elif mem < batch_max:
        up_to, bound = max(mem, 0.0), "memory"
    else:
        up_to, bound = float(batch_max), "search_bound"
    return dict(k_star_by_batch=rows, switch_off_batch=off, max_batch_sd=max_batch_sd, batch_bound=float(batch_max),
                pays_up_to=up_to, pays_up_to_bound=bound, k_max=int(k_max), inputs=inputs(scenario))


AUTO_QPS = (0.01, 1.2)  # default rates: fractions of the larger sustainable rate, log-spaced


@store.jit(static_argnames=("relative", "sensitivity"))
def _serve(hw, deploy, tgt, draft, dec, qps, tpot_slo, ttft_slo, relative, sensitivity, percentiles, samples):
    m = _serving.sides(hw, deploy, tgt, draft, dec)
    curve, deriv, elast = _curve_and_sensitivity(_serving.rate_curve, _serving.switch_off_sensitivity, sensitivity,
                                                 hw, deploy, tgt, draft, dec)
    rates = qps * curve.qps_top if relative else qps
    per = jax.vmap(lambda q: _serving.serve(hw, deploy, tgt, draft, dec, q, model=m))(rates)
    sp = _spread.of_load(dec, percentiles, samples)
    slo_factor = jnp.stack([jnp.ones_like(sp.tpot_factors[-1]), sp.tpot_factors[-1]])  # plain decoding: no spread
    within = _serving.max_qps_within(hw, deploy, tgt, draft, dec, tpot_slo, ttft_slo, m, slo_factor)
    return per, curve, within, deriv, elast, sp


def check_slo(name, x):
    """A latency target in seconds: 0 < x < 1e6, or None (no target)."""
    if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x < 1e6):
        raise SpecError(f"{name}={_short_repr(x)}; expected 0 < {name} < 1e6 (seconds)")
    return x


def check_percentile(p, field="slo_percentile"):
    """A percentile of requests in (0, 100), or None (the mean); a one-line `SpecError` otherwise."""
    if p is None:
        return None
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < 100:
        raise field_error(field, p, f"0 < {field} < 100 (percent of requests; without it: the mean TPOT)")
    return float(p)


def with_samples(scenario, samples):
    """(scenario, samples): where per-request `samples` (`inputs.request_samples.Samples`) are given, the
    scenario with their harmonic mean as its accepted length (the batch's tokens per step, docs/model.md
    §10.1), refused with a log-odds spread besides or a k they were not measured at."""
    if samples is None:
        return scenario, None
    if scenario.acceptance_spread:
        raise SpecError(f"acceptance_spread={scenario.acceptance_spread:g} and acceptance_samples "
                        f"{samples.source or ''}: give one spread of acceptance over requests, not both")
    samples.check_k(scenario.k)
    return scenario.replace_acceptance(accepted_length=samples.harmonic_mean), samples


def _percentiles(slo_percentile, f):
    """The percentiles the kernels evaluate: `spread.PERCENTILES`, then the SLO's (NaN: the mean)."""
    return np.asarray((*_spread.PERCENTILES, np.nan if slo_percentile is None else slo_percentile), f)


def _sample_quantiles(samples, percentiles):
    """`spread.of_load`'s samples argument: the samples' quantiles of 1/tau and means, or NaN without samples."""
    if samples is None:
        return tuple(np.asarray(x) for x in _spread.no_samples(percentiles.shape[0], percentiles.dtype))
    return tuple(np.asarray(x) for x in _spread.sample_inverse_quantiles(np.asarray(samples.taus, percentiles.dtype),
                                                                         percentiles))


def _tpot_percentiles(tpot_sd, sp, i):
    """The speculative side's TPOT percentiles of row `i` (`spread.PERCENTILES`), seconds."""
    return {f"tpot_sd_p{p:g}_s": finite_or_none(tpot_sd[i] * sp.tpot_factors[j])
            for j, p in enumerate(_spread.PERCENTILES)}


def _spread_answer(scenario, sp, samples):
    """The spread of acceptance over requests as answered (JSON `acceptance_spread`)."""
    out = dict(kind="samples" if samples is not None else "log_odds",
               sigma=None if samples is not None else float(scenario.acceptance_spread or 0.0),
               samples=None if samples is None else len(samples.taus),
               samples_file=None if samples is None else samples.source,
               shift=finite_or_none(sp.shift), tokens_per_step=finite_or_none(sp.tau_harmonic),
               mean_accepted_length_over_requests=finite_or_none(sp.tau_mean))
    out.update({f"tpot_factor_p{p:g}": finite_or_none(sp.tpot_factors[j]) for j, p in enumerate(_spread.PERCENTILES)})
    return out


def serve(scenario, qps=None, tpot_slo=None, ttft_slo=None, sensitivity=False, dtype=None, points=13,
          slo_percentile=None, acceptance_samples=None):
    """The serving load of docs/model.md §10 for a `Scenario` with input/output lengths: per request rate
    (`qps`, default `points` rates from 1% to 120% of the larger sustainable rate) both sides' batch, ITL,
    TPOT, TTFT, E2E and throughput, the TPOT ratio and per-side status, and the speculative side's TPOT
    percentiles over requests (docs/model.md §10.1: the scenario's `acceptance_spread`, or per-request
    `acceptance_samples`, which replace the scenario's acceptance by their harmonic mean); over the range
    the sustainable rates, the switch-off rate and the curve's status; with SLOs (seconds) the largest rate
    meeting them (the TPOT target on the `slo_percentile` of requests, default the mean); with
    `sensitivity` the elasticities of the switch-off rate."""
    scenario, dtype = _scenario(scenario), _dtype(dtype)
    _has_load(scenario, "serve")
    if qps is not None:
        qps = _values("qps", qps)
    points = _whole("points", points, 1, 10_000)
    for name, slo in (("tpot_slo", tpot_slo), ("ttft_slo", ttft_slo)):
        check_slo(name, slo)
    slo_percentile = check_percentile(slo_percentile)
    scenario, samples = with_samples(scenario, acceptance_samples)
    hw, deploy, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    f = np.asarray(dec.alpha).dtype
    relative = qps is None
    rates = np.asarray(np.geomspace(*AUTO_QPS, points) if relative else qps, dtype=f)
    inf = np.asarray(np.inf, f)
    pct = _percentiles(slo_percentile, f)
    per, curve, (slo_b, slo_s), deriv, elast, sp = _serve(hw, deploy, tgt, draft, dec, rates,
                                                         inf if tpot_slo is None else np.asarray(tpot_slo, f),
                                                         inf if ttft_slo is None else np.asarray(ttft_slo, f),
                                                         relative, bool(sensitivity), pct,
                                                         _sample_quantiles(samples, pct))
    rows = []
    fits = float(curve.qps_top) > 0  # relative rates of a capacity of 0 would all be 0: no table, the status says
    for i in range(rates.shape[0] if fits or not relative else 0):
        st = Serving(int(per.status[i]))
        row = {"qps": finite_or_none(per.qps[i]),
               **{k: finite_or_none(v[i]) for k, v in _serving.side_columns(per).items()},
               **_tpot_percentiles(per.sd.tpot_s, sp, i)}
        row.update(speedup_tpot=finite_or_none(per.speedup_tpot[i]), ratio_e2e=finite_or_none(per.ratio_e2e[i]),
                   status_base=st.side(False), status_sd=st.side(True), status=st.label)
        rows.append(row)
    out = dict(points=rows, tokens_per_step=finite_or_none(per.tokens_per_step[0]),
               max_qps_base=finite_or_none(curve.max_qps_base), max_qps_sd=finite_or_none(curve.max_qps_sd),
               switch_off_qps=finite_or_none(curve.switch_off_qps),
               first_crossing_qps=finite_or_none(curve.first_crossing_qps),
               speedup_tpot_low_qps=finite_or_none(curve.speedup_tpot_low_qps),
               curve_status=Curve.decode(int(curve.status)), qps_searched=[finite_or_none(curve.qps_low),
                                                                           finite_or_none(curve.qps_top)])
    out["acceptance_spread"] = _spread_answer(scenario, sp, samples)
    if tpot_slo is not None or ttft_slo is not None:
        out["slo"] = dict(tpot_s=tpot_slo, ttft_s=ttft_slo, tpot_percentile=slo_percentile,
                          max_qps_base=finite_or_none(slo_b), max_qps_sd=finite_or_none(slo_s))
    if sensitivity:
        out.update(elasticities(deriv, elast))
    out["inputs"] = {**{k: v for k, v in inputs(scenario).items() if k != "batch"}, **serve_inputs(scenario)}
    return out


@store.jit(static_argnames=("sensitivity",))
def _closed(hw, deploy, tgt, draft, dec, ns, sensitivity, percentiles, samples):
    m = _serving.sides(hw, deploy, tgt, draft, dec)
    per = jax.vmap(lambda n: _concurrency.closed(hw, deploy, tgt, draft, dec, n, model=m))(ns)
    curve, deriv, elast = _curve_and_sensitivity(_concurrency.concurrency_curve, _concurrency.switch_off_sensitivity,
                                                 sensitivity, hw, deploy, tgt, draft, dec)
    return per, curve, deriv, elast, _spread.of_load(dec, percentiles, samples)


def serve_concurrency(scenario, concurrency, sensitivity=False, dtype=None, acceptance_samples=None):
    """The closed loop of docs/model.md §11 for a `Scenario` with input/output lengths: per concurrency N (clients
    each sending its next request when its last one ends) both sides' request throughput, decode batch,
    prompt tokens per iteration, ITL, TPOT, TTFT, E2E, output throughput and queue wait, the ratios at equal
    N, per-side status (`queued`: N exceeds what the engine holds at its batch cap) and the speculative
    side's TPOT percentiles over requests (as `serve`); over N the concurrency where speculation stops
    lowering E2E (`switch_off_concurrency`) and each side's capacity; with `sensitivity` the elasticities
    of the switch-off concurrency (None where there is none)."""
    scenario, dtype = _scenario(scenario), _dtype(dtype)
    _has_load(scenario, "serve_concurrency")
    concurrency = _values("concurrency", concurrency)
    scenario, samples = with_samples(scenario, acceptance_samples)
    hw, deploy, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    f = np.asarray(dec.alpha).dtype
    ns = np.asarray(concurrency, dtype=f).reshape(-1)
    pct = _percentiles(None, f)
    per, curve, deriv, elast, sp = _closed(hw, deploy, tgt, draft, dec, ns, bool(sensitivity), pct,
                                           _sample_quantiles(samples, pct))
    rows = []
    for i in range(ns.shape[0]):
        st = Closed(int(per.status[i]))
        row = {"concurrency": finite_or_none(per.concurrency[i]),
               **{k: finite_or_none(v[i]) for k, v in _concurrency.side_columns(per).items()},
               **_tpot_percentiles(per.sd.tpot_s, sp, i)}
        row.update(speedup_tpot=finite_or_none(per.speedup_tpot[i]), ratio_e2e=finite_or_none(per.ratio_e2e[i]),
                   ratio_ttft=finite_or_none(per.ratio_ttft[i]),
                   prefill_bound_base=bool(per.base.prefill_bound[i]), prefill_bound_sd=bool(per.sd.prefill_bound[i]),
                   status_base=st.side(False), status_sd=st.side(True), status=st.label)
        rows.append(row)
    out = dict(points=rows, tokens_per_step=finite_or_none(per.tokens_per_step[0]),
               **{k: finite_or_none(v) for k, v in curve._asdict().items() if k != "status"},
               curve_status=Curve.decode(int(curve.status)))
    out["acceptance_spread"] = _spread_answer(scenario, sp, samples)
    if sensitivity:
        out.update(elasticities(deriv, elast))
    out["inputs"] = {**{k: v for k, v in inputs(scenario).items() if k != "batch"}, **serve_inputs(scenario)}
    return out


def serve_inputs(scenario):
    """The load of a scenario as evaluated (defaults filled in); the context is derived from it."""
    load = scenario.load()
    return dict(input_len=scenario.input_len, output_len=scenario.output_len,
                max_num_seqs=int(load.max_num_seqs), chunk_tokens=int(load.chunk_tokens),
                context=float(load.decode_context))


VARYING = ("batch", "k", "alpha", "context")  # the inputs `points` takes as columns (Decode leaves)
_CHECKED_EACH = 64  # up to this many distinct values of a column are each validated as a scenario


def _vmapped_step(hw, deploy, target, draft, dec, columns):
    return jax.vmap(lambda c: step(hw, deploy, target, draft, dec.replace(**c)))(columns)


_steps = store.jit(_vmapped_step)


def points(scenario, dtype=None, **columns):
    """Many operating points of one scenario in one call: `columns` are equal-length arrays of some of
    `VARYING` (batch, k, alpha, context), every other input is the scenario's. Returns a polars DataFrame,
    one row per point: the columns given, then the `point` fields (status as its name). One compiled
    program per structure and length; on this 2-core machine about 1M points/s (bench/startup.py).

    Every value is validated as `point` would: each distinct value (or, beyond 64 distinct ones, the
    smallest and largest, and k's integrality everywhere) goes through the scenario's own checks."""
    import polars as pl

    unknown = sorted(set(columns) - set(VARYING))
    if unknown:
        raise SpecError(f"points: {unknown[0]!r} is not a column points takes; expected some of {', '.join(VARYING)}")
    if not columns:
        raise SpecError(f"points: no columns; give one or more of {', '.join(VARYING)} as arrays")
    scenario, dtype = _scenario(scenario), _dtype(dtype)
    cols = {}
    for name, v in columns.items():
        try:
            cols[name] = np.asarray(v, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise SpecError(f"points: {name}={_short_repr(v)}; expected an array of numbers") from None
        if not len(cols[name]):
            raise SpecError(f"points: {name} is empty; expected at least one value")
    n = {len(v) for v in cols.values()}
    if len(n) != 1:
        raise SpecError(f"points: columns of different lengths ({', '.join(f'{k}={len(v)}' for k, v in cols.items())})")
    if "k" in cols and scenario.tree_topk is not None:
        raise SpecError("points: k as a column needs a chain drafter (a tree's depth is fixed by its shape)")
    for name, v in cols.items():
        if not np.all(np.isfinite(v)):
            raise SpecError(f"points: {name} has a non-finite value at row {int(np.argmin(np.isfinite(v)))}")
        if name == "k" and not np.all(v == np.round(v)):
            row = int(np.argmax(v != np.round(v)))
            raise SpecError(f"points: k={float(v[row])!r} at row {row}; expected a whole number of draft tokens")
        distinct = np.unique(v)
        for x in (distinct if distinct.size <= _CHECKED_EACH else distinct[[0, -1]]):
            dataclasses.replace(scenario, **{name: int(x) if name == "k" else float(x)})  # the scenario's checks
    if "k" in cols and block_k(scenario) is not None and cols["k"].max() > block_k(scenario):
        raise SpecError(f"points: k={int(cols['k'].max())} exceeds the drafter's block ({block_k(scenario)} draft "
                        "tokens at most)")
    hw, deploy, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    f = np.asarray(dec.alpha).dtype
    r = _steps(hw, deploy, tgt, draft, dec, {name: v.astype(f) for name, v in cols.items()})
    out = {name: cols[name] for name in cols}
    for key, v in r._asdict().items():
        v = np.asarray(v)
        if key == "status":
            out[key] = pl.Series(key, Point.decode(v).tolist(), dtype=pl.Enum(Point.names()))
        elif key == "verify_compute_bound":
            out["bound"] = np.where(v, "compute", "memory")
        elif key == "feasible":
            out[key] = v.astype(bool)
        else:
            out[key] = v
    return pl.DataFrame(out)
