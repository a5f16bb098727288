"""Model commands: `point`, `crossover`, `sensitivity`, `optimize`, `presets`, `seed`."""

import dataclasses
from typing import Annotated, Optional

import typer

from .. import api
from ..cost import catalogue
from .app import BatchMax, Json, MethodChoice, app, emit, model_command, print_json, scenario, value


@model_command
def point(model, batch: Annotated[float, typer.Option(help="Decode batch (sequences).")],
          as_json: Json = False):
    """Speedup, step times, throughputs and memory at one operating point."""
    emit(api.point(scenario(batch=batch, **model)), as_json)


@model_command
def crossover(model, batch_max: BatchMax = 65536.0, as_json: Json = False):
    """Smallest batch at which speculation stops paying (S(B) < 1)."""
    emit(api.crossover(scenario(**model), batch_max), as_json)


@model_command
def sensitivity(model, batch_max: BatchMax = 65536.0, as_json: Json = False):
    """What moves the crossover batch: elasticities (%% change of B* per %% change of each input)."""
    r = api.sensitivity(scenario(**model), batch_max)
    if as_json:
        print_json(r)
        return
    if r["crossover_batch"] is None:
        print(f"no crossover ({r['status']}): sensitivities are undefined")
        return
    print(f"crossover batch B* = {r['crossover_batch']:.2f} ({r['status']})\n")
    print(f"{'input':<18} {'elasticity':>11} {'dB*/dinput':>14}")
    for name, e in r["elasticities"].items():
        print(f"{name:<18} {e:>11.4f} {r['derivatives'][name]:>14.6g}")


@model_command
def optimize(model,
             batch: Annotated[Optional[list[float]], typer.Option(help="Batches to optimise at (repeatable).")] = None,
             k_max: Annotated[int, typer.Option(help="Largest draft length considered.", min=1, max=64)] = 16,
             method: Annotated[MethodChoice, typer.Option(help="optax (gradient search) | brute (every integer k).")
                               ] = MethodChoice.optax,
             batch_max: BatchMax = 65536.0, as_json: Json = False):
    """Best draft length k* at each batch, and the batch beyond which speculation should be off."""
    sc = scenario(**model)
    batches = batch or [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    for b in batches:
        catalogue.check("batch", b)
    r = api.optimize(sc, batches, k_max, batch_max, method=value(method))
    if as_json:
        print_json(r)
        return
    print(f"{'batch':>8} {'k*':>4} {'speedup':>9}")
    for row in r["k_star_by_batch"]:
        print(f"{row['batch']:>8g} {row['k_star']:>4d} {row['speedup']:>9.4f}")
    off = r["switch_off_batch"]
    print(f"\nswitch speculation off above batch {off:.1f}" if off else "\nspeculation pays up to the batch bound")


@app.command()
def presets(as_json: Json = False):
    """List model and hardware presets with their key numbers."""
    from ..inputs import hardware as _hw
    from ..inputs import models as _models

    rows = {"models": [], "hardware": []}
    for slug in _models.preset_slugs():
        a = _models.load_architecture(slug)
        m = _models.eagle_head(a, a) if a.eagle_version else _models.target(a)
        rows["models"].append(dict(slug=slug, total_params_b=round(float(m.total_params) / 1e9, 3),
                                   active_params_b=round(float(m.active_params) / 1e9, 3),
                                   layers=a.n_layers, experts=a.n_experts, top_k=a.top_k,
                                   weight_dtype=a.weight_dtype, expert_dtype=a.expert_dtype,
                                   kind="eagle-head" if a.eagle_version else ("moe" if a.n_moe_layers else "dense")))
    for slug in _hw.preset_slugs():
        h = _hw.load(slug)
        rows["hardware"].append(dict(slug=slug, name=h.name, bf16_tflops=h.flops_per_s.get("bf16", 0) / 1e12,
                                     hbm_tb_s=h.hbm_bytes_per_s / 1e12, hbm_gb=h.hbm_bytes / 1e9,
                                     dtypes=",".join(h.flops_per_s)))
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
            cells.append(f"{p['speedup']:>13.3f}{'*' if p['status'] != 'ok' else ' '}")
        print(f"{b:>6}  " + "  ".join(cells))
    print("(* = does not fit in 0.9 x 141 GB with this batch; the article ignored capacity)\n")
    for s, o in out.items():
        c = o["crossover"]
        print(f"{s}: crossover at batch {c['crossover_batch']:.1f} ({c['status']}); published "
              f"{o['published']['crossover']}; max batch in memory {c['max_batch_sd']}")
