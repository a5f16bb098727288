"""Model commands: `point`, `crossover`, `sensitivity`, `optimize`, `presets`, `seed`."""

import dataclasses
from typing import Annotated, Optional

import typer

from .. import _lazy
from .. import catalogue
from .app import (BatchMax, Json, MethodChoice, app, emit, model_command, print_inputs, print_json, scenario,
                  value)

api = _lazy.module("specjax.api")


@model_command
def point(model,
          batch: Annotated[Optional[list[float]], typer.Option(
              help="Decode batch (sequences); repeat for a table of points. Default: 1 (one sequence).")] = None,
          as_json: Json = False):
    """Speedup, step times, throughputs and memory at one operating point (or one per --batch)."""
    batch = batch or [catalogue.INPUTS["batch"].default]  # the catalogue's (and `Scenario`'s) default batch
    for b in batch:
        catalogue.check("batch", b)
    scenarios = [scenario(batch=b, **model) for b in batch]
    results = [api.point(sc) for sc in scenarios]
    inputs = api.inputs(scenarios[0])
    if len(results) == 1:
        emit({**results[0], "inputs": inputs}, as_json)
        return
    inputs.pop("batch")
    if as_json:
        print_json(dict(points=[{"batch": b, **r} for b, r in zip(batch, results)], inputs=inputs))
        return
    cols = ("speedup", "tokens_per_step", "t_target_s", "t_sd_step_s", "max_batch_sd", "status")
    print(f"{'batch':>8} {'speedup':>8} {'tau':>6} {'T_target ms':>12} {'T_sd ms':>9} {'max batch sd':>13}  status")
    for b, r in zip(batch, results):
        v = [r[c] for c in cols]
        print(f"{b:>8g} {v[0]:>8.4f} {v[1]:>6.3f} {v[2] * 1e3:>12.4f} {v[3] * 1e3:>9.4f} {str(v[4]):>13}  {v[5]}")
    print_inputs(inputs)


def _b(x):
    """A batch for text: 4 significant digits, whole numbers from 10,000 on (65536, not 6.554e+04)."""
    return "-" if x is None else (f"{x:.0f}" if abs(x) >= 1e4 else f"{x:.4g}")


@model_command
def crossover(model, batch_max: BatchMax = 65536.0, as_json: Json = False):
    """Where speculation stops paying: the switch-off batch B_off (last crossing of S = 1), the first
    crossing, dips and the status of the speedup curve (docs/model.md §7)."""
    sc = scenario(**model)
    r = {**api.crossover(sc, batch_max), "inputs": api.inputs(sc)}
    if as_json:
        print_json(r)
        return
    print(crossover_text(r))
    print_inputs(r["inputs"])


def crossover_text(r):
    """The answer of `crossover` in a few lines (also used by `sensitivity`)."""
    from ..cost.status import Curve

    st, off, status = r["status"], r["crossover_batch"], Curve.of(r["status"])
    mem = r["max_batch_sd"]
    pays = r["pays_between"] or [None, None]
    said = status.text("over_batch", crossover_batch=_b(off), batch_bound=_b(r["batch_bound"]),
                             pays_from=_b(pays[0]), pays_to=_b(pays[1]))
    out = [f"{said} (status {st})"]
    if off is not None and status is not Curve.STOPS_PAYING:
        out.append(f"switch-off batch B_off = {_b(off)}")
    out.append(f"first batch with S < 1: {_b(r['first_crossing_batch'])}; S(1) = {_b(r['speedup_at_batch_1'])}")
    if r["dips"]:
        out.append("dips (S < 1): " + ", ".join(f"[{_b(a)}, {_b(b)}]" for a, b in r["dips"]))
    fit = f"largest batch that fits with the drafter: {mem}" if mem else "the drafter does not fit at batch 1"
    out.append(fit + (" (B_off is beyond it)" if r["beyond_memory"] else "")
               + f"; searched [1, {_b(r['batch_bound'])}] at {r['grid_points']} points")
    return "\n".join(out)


@model_command
def sensitivity(model, batch: Annotated[float, typer.Option(
                    help="Batch at which the speedup's elasticities are given when the curve has no switch-off "
                         "batch.")] = 1.0,
                batch_max: BatchMax = 65536.0, as_json: Json = False):
    """What moves the switch-off batch B_off: elasticities (%% change of B_off per %% change of each input);
    without a switch-off batch, the elasticities of the speedup at --batch."""
    catalogue.check("batch", batch)
    sc = scenario(batch=batch, **model)
    r = {**api.sensitivity(sc, batch_max), "inputs": api.inputs(sc)}
    if as_json:
        print_json(r)
        return
    print(crossover_text(r) + "\n")
    if r["of"] == "crossover_batch":
        print(f"elasticities of the switch-off batch B_off = {_b(r['at_batch'])}:")
        head = "dB_off/dinput"
    else:
        print(f"no switch-off batch: elasticities of the speedup at batch {_b(r['at_batch'])}:")
        head = "dS/dinput"
    print(f"{'input':<18} {'elasticity':>11} {head:>14}")
    for name, e in r["elasticities"].items():
        d = r["derivatives"][name]
        print(f"{name:<18} {('-' if e is None else f'{e:.4f}'):>11} {('-' if d is None else f'{d:.6g}'):>14}")
    print_inputs(r["inputs"])


@model_command
def optimize(model,
             batch: Annotated[Optional[list[float]], typer.Option(help="Batches to optimise at (repeatable).")] = None,
             k_max: Annotated[int, typer.Option(help="Largest draft length considered.", min=1, max=64)] = 16,
             method: Annotated[MethodChoice, typer.Option(help="optax (gradient search) | brute (every integer k).")
                               ] = MethodChoice.optax,
             batch_max: BatchMax = 65536.0,
             trees: Annotated[bool, typer.Option("--trees", help="Search draft-tree shapes (depth <= min(k-max, 8), "
                                                                  "topk 1/2/4/8, verified tokens) instead of k.")
                              ] = False,
             as_json: Json = False):
    """Best draft length k* at each batch that fits, and the batch beyond which speculation should be off."""
    sc = scenario(**model)
    ignore_memory = model["ignore_memory"]
    batches = batch or [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    for b in batches:
        catalogue.check("batch", b)
    if trees or sc.tree_topk is not None:
        r = api.optimize_trees(sc, batches, min(k_max, 8))
        if as_json:
            print_json(r)
            return
        print(f"{'batch':>8} {'depth':>5} {'topk':>4} {'tokens':>6} {'speedup':>9} {'chain k':>7} "
              f"{'chain S':>8}  status")
        for row in r["shape_by_batch"]:
            print(f"{row['batch']:>8g} {row['depth']:>5} {row['topk']:>4} {row['tokens']:>6} {row['speedup']:>9.4f} "
                  f"{row['chain_k']:>7} {row['chain_speedup']:>8.4f}  {row['status']}")
        print(f"\n{r['shapes_searched']} shapes searched per batch (depth 0: no shape pays, switch speculation off)")
        print_inputs(r["inputs"])
        return
    r = api.optimize(sc, batches, k_max, batch_max, method=value(method),
                     ignore_memory=ignore_memory)
    if as_json:
        print_json(r)
        return
    print(f"{'batch':>8} {'k*':>4} {'speedup':>9}  status")
    for row in r["k_star_by_batch"]:
        k_s = "-" if row["k_star"] is None else str(row["k_star"])
        s_s = "-" if row["speedup"] is None else f"{row['speedup']:.4f}"
        print(f"{row['batch']:>8g} {k_s:>4} {s_s:>9}  {row['status']}")
    bound, up_to = r["pays_up_to_bound"], r["pays_up_to"]
    print("\n" + {"switch_off": f"switch speculation off above batch {_b(up_to)} (the best k no longer pays there)",
                  "memory": f"speculation pays up to batch {_b(up_to)}: the largest batch that fits in memory with "
                            f"the drafter (k = {r['k_max']})",
                  "search_bound": f"speculation pays up to the search bound {_b(up_to)} (--batch-max)",
                  "never_pays": "speculation never pays here (k* = 0 at every batch)"}[bound])
    if r["k_max"] < k_max:
        print(f"k searched up to {r['k_max']}: the drafter fills a block of {r['k_max'] + 1} tokens (its config's "
              "block_size)")
    print_inputs(r["inputs"])


@app.command()
def presets(as_json: Json = False):
    """List model and hardware presets with their key numbers."""
    from ..inputs import listing  # JAX-free: listing the presets imports no kernel

    rows = {"models": listing.model_rows(), "hardware": listing.hardware_rows()}
    if as_json:
        print_json(rows)
        return
    print(f"{'model':<22} {'kind':<10} {'total B':>9} {'active B':>9} {'layers':>6} {'E':>4} {'r':>3}  weights")
    for r in rows["models"]:
        print(f"{r['slug']:<22} {r['kind']:<10} {r['total_params_b']:>9.3f} {r['active_params_b']:>9.3f} "
              f"{r['layers']:>6} {r['experts']:>4} {r['top_k']:>3}  {r['weight_dtype']}/{r['expert_dtype']}")
    print(f"\n{'hardware':<14} {'bf16 TFLOP/s':>12} {'TB/s':>6} {'HBM GB':>7}  dtypes")
    for r in rows["hardware"]:
        print(f"{r['slug']:<14} {r['bf16_tflops']:>12.1f} {r['hbm_tb_s']:>6.3f} {r['hbm_gb']:>7.0f}  {r['dtypes']}")


@app.command()
def seed(as_json: Json = False):
    """The headline scenario: Llama-3-70B vs gpt-oss-120b on an H200, speedup vs batch and crossovers."""
    from ..cost.status import Point
    from ..inputs import seed as _seed

    out = {}
    for slug, sc in _seed.scenarios().items():
        curve = [dict(batch=b, **{k_: v for k_, v in api.point(dataclasses.replace(sc, batch=float(b))).items()
                                  if k_ in ("speedup", "status")}) for b in _seed.BATCHES]
        out[slug] = dict(crossover=api.crossover(sc), curve=curve, published=_seed.PUBLISHED[slug])
    if as_json:
        print_json(out)
        return
    print("Headline scenario: H200 (989.5 TFLOP/s bf16, 4.8 TB/s), whole-pass roofline, fp8 KV, context 2048,")
    print("drafter cost ratio c = 0.145, k = 2, alpha = 0.814.\n")
    print(f"{'batch':>6}  " + "  ".join(f"{s:>14}" for s in out))
    for i, b in enumerate(_seed.BATCHES):
        cells = []
        for s in out:
            p = out[s]["curve"][i]
            cells.append(f"{p['speedup']:>13.3f}{'*' if p['status'] != Point.OK.label else ' '}")
        print(f"{b:>6}  " + "  ".join(cells))
    print("(* = does not fit in 0.9 x 141 GB with this batch; the article ignored capacity)\n")
    for s, o in out.items():
        c = o["crossover"]
        print(f"{s}: crossover at batch {c['crossover_batch']:.1f} ({c['status']}); published "
              f"{o['published']['crossover']}; max batch in memory {c['max_batch_sd']}")
