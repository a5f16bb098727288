"""Engine integration: `ingest` (engine metrics, logs, stats and benchmark results -> CSV) and `advise`
(the model's k per batch -> an engine's speculative configuration)."""

import json
from typing import Annotated, Optional

import typer

from ..errors import SpecError
from ..inputs import ingest as _ingest
from .app import (Json, app, choices, model_command, print_json, scenario,
                  value)
from .data import _writetable
from .model import _b

FormatChoice = choices("FormatChoice", _ingest.REGISTRY)
EmitChoice = choices("EmitChoice", ("vllm", "sglang", "trtllm"))
Files = Annotated[list[str], typer.Argument(metavar="FILE...", help="Engine metrics, logs, iteration stats or "
                                                                   "benchmark results (one format).")]


@app.command()
def ingest(files: Files,
           out: Annotated[str, typer.Option(help="CSV (or .parquet) to write: an acceptance summary (metrics, logs, "
                                                 "stats) or measurement rows (benchmark results).")],
           fmt: Annotated[Optional[FormatChoice], typer.Option("--format", help="Input format (default: detected "
                                                                                "from the content): " + "; ".join(
               f"{f.name}: {f.help}" for f in _ingest.REGISTRY.values()) + ".")] = None,
           target: Annotated[Optional[str], typer.Option(help="Benchmark results: the target (measurement rows).")
                             ] = None,
           hardware: Annotated[Optional[str], typer.Option("--hardware", help="Benchmark results: the hardware.")
                               ] = None,
           drafter: Annotated[Optional[str], typer.Option(help="Benchmark results: the drafter kind.")] = None,
           draft: Annotated[Optional[str], typer.Option(help="Benchmark results: the draft model or head.")] = None,
           tp: Annotated[int, typer.Option(help="Benchmark results: the target's TP degree.")] = 1,
           draft_tp: Annotated[Optional[int], typer.Option(help="Benchmark results: the drafter's TP degree.")] = None,
           k: Annotated[Optional[int], typer.Option(help="Benchmark results without a draft length in them, and "
                                                             "trtllm-requests: the served max_draft_len.")] = None,
           weight_dtype: Annotated[str, typer.Option(help="Benchmark results: weight dtype.")] = "bf16",
           as_json: Json = False):
    """Read engine metrics, logs, iteration stats or benchmark results into a CSV: acceptance per batch
    (tau, per-position rates) or measurement rows for `specjax validate` and `calibrate`."""
    from ..outputs import io

    for f in files:
        _ingest.check_readable(f)
    io.refuse_input(out, files)
    io.refuse_repeated(files)
    formats = {value(fmt)} if fmt else {_ingest.detect(f) for f in files}
    if len(formats) > 1:
        raise SpecError(f"files of several formats ({', '.join(sorted(formats))}); ingest one format at a time")
    (form,) = formats
    record = _ingest.get(form)
    engine, kind = record.engine, record.gives
    flags = (("--target", target, None), ("--hardware", hardware, None), ("--drafter", drafter, None),
             ("--draft", draft, None), ("--tp", tp, 1), ("--draft-tp", draft_tp, None), ("--k", k, None),
             ("--weight-dtype", weight_dtype, "bf16"))
    if kind != _ingest.BENCH:
        options = {o: v for f, v, _ in flags if (o := f[2:].replace("-", "_")) in record.options}
        rows = _ingest.acceptance(files, form) if kind == _ingest.ACCEPTANCE else _ingest.requests(files, form,
                                                                                                   **options)
        # model flags would be ignored here: the acceptance is the engine's, whatever the model
        given = [f for f, v, default in flags if v != default and f[2:].replace("-", "_") not in record.options]
        if given:
            what = "acceptance per batch" if kind == _ingest.ACCEPTANCE else "per-request accepted lengths"
            takes = f"only {', '.join('--' + o for o in record.options)}" if record.options else "no model flags"
            raise SpecError(f"{', '.join(given)}: for benchmark results only; {form} gives {what}, which takes "
                            f"{takes} (drop them)")
    else:
        from ..inputs import drafters

        if drafter is not None and drafter not in drafters.names(measurable_only=True):
            raise SpecError(f"drafter={drafter!r}; expected one of {', '.join(drafters.names(measurable_only=True))} "
                            "(a measured run has a real drafter)")
        if not (target and hardware and drafter):
            raise SpecError(f"{form} results become measurement rows: give --target, --hardware and --drafter "
                            "(and --draft, --tp as served)")
        rows = _ingest.measurement_rows(_ingest.pair_results(record.read(files)), form, target, hardware, drafter,
                                        draft, tp, k, weight_dtype, draft_tp)
    import polars as pl

    _writetable(pl.DataFrame(rows, infer_schema_length=None), out)
    if as_json:
        print_json(dict(format=form, engine=engine, kind=kind, rows=rows, out=out))
        return
    print(f"{form} ({engine}): {len(rows)} rows -> {out}")
    if kind == _ingest.ACCEPTANCE:
        print(f"{'batch':>7} {'tau':>6} {'k':>3}  per-position rates")
        for r in rows:
            b = "unknown" if r["batch"] is None else _b(r["batch"])
            print(f"{b:>7} {r['accepted_length']:>6.3f} {r['k'] or '-':>3}  {r['position_rates'] or '-'}")
        if any(r["batch"] is None for r in rows):
            print("batch unknown: samples without the engine's running-requests count for their interval (a log "
                  "that starts mid-stream, a drafter line without its stat line, a snapshot of 0)")
        last = rows[-1]
        hint = f"--position-rates {last['position_rates']}" if last["position_rates"] else \
            f"--accepted-length {last['accepted_length']:.3f}"
        print(f"use it as {hint} (model commands), or in advise")
    elif kind == _ingest.REQUESTS:
        taus = sorted(r["accepted_length"] for r in rows)
        q = {p: taus[min(len(taus) - 1, int(p / 100 * len(taus)))] for p in (10, 50, 90)}
        mean = sum(r["accepted_length"] * r["verify_steps"] for r in rows) / sum(r["verify_steps"] for r in rows)
        print(f"accepted length per request: p10 {q[10]:.3f}, p50 {q[50]:.3f}, p90 {q[90]:.3f}; over all verify "
              f"passes {mean:.3f}")
        harmonic = len(taus) / sum(1.0 / t for t in taus)
        print(f"harmonic mean over requests {harmonic:.3f} (a batch's tokens per step); TPOT percentiles over "
              f"requests: specjax serve --acceptance-samples {out}")
    else:
        print(f"check the model against them: specjax validate {out}")


@model_command(load=("input_len", "output_len"), many=("context",))
def advise(model, load,
           emit: Annotated[Optional[EmitChoice], typer.Option(help="Engine whose configuration to print (default: "
                                                                   "--engine, if it is one of them).")] = None,
           engine_version: Annotated[Optional[str], typer.Option(
               help="Engine version the configuration is for (default: the engine profile's engine_version when "
                    "the profile is for this engine, else vLLM 0.29, SGLang 0.5.20, TensorRT-LLM 1.3): the emitted "
                    "keys are what that version reads as meant.")] = None,
           draft_id: Annotated[Optional[str], typer.Option(
               help="What the engine loads as the draft (Hugging Face id or directory; default: the draft "
                    "preset's Hugging Face id).")] = None,
           max_num_seqs: Annotated[Optional[int], typer.Option(
               help="Largest batch per engine rank to admit (the cap on the admission limit; default: the "
                    "engine's max_num_seqs on this GPU).", min=1, max=65536)] = None,
           k_max: Annotated[int, typer.Option(help="Largest draft length considered.", min=1, max=16)] = 8,
           margin: Annotated[float, typer.Option(help="Speculation stays on only where the speedup is at least "
                                                      "1 + margin (no flapping at a threshold).", min=0.0, max=1.0)
                             ] = 0.03,
           qps_max: Annotated[Optional[float], typer.Option(
               help="Report the running batch the serving model (docs/model.md §10) gives at this request rate; the "
                    "table still covers every batch up to the admission limit (a burst runs there).")] = None,
           as_json: Json = False):
    """The engine's speculative configuration for every batch it admits: k per batch range from the model
    (k = 0: off), as vLLM num_speculative_tokens_per_batch_size, TensorRT-LLM draft_len_schedule or SGLang
    adaptive slots as the given engine version reads them, with the admission limit (the largest batch
    that fits with the drafter) and the expected speedup of each range. With --context repeated: the best k
    per batch and context as a table, and the one batch table the engine takes (engines read no context
    axis), with what it loses per cell."""
    from .. import api, catalogue
    from ..engine import advise as _advise
    from ..engine import advise_context as _ctx
    from ..engine import emit as _emit

    if draft_id is not None and not draft_id.strip():  # an empty id was dropped for the default one
        raise SpecError(f"draft_id={draft_id!r}; expected the draft's model id (a Hugging Face repo or a path)")
    contexts = _ctx.check_contexts(model["context"] or [catalogue.INPUTS["context"].default])
    model = {**model, "context": contexts[0]}
    sc = scenario(**model)
    engine = value(emit) or (sc.engine if sc.engine in _advise.EMIT else "vllm")
    if engine_version is None:  # the version the engine profile was measured on, when it is for this engine
        from ..inputs import engines as _engines

        engine_version = _engines.load(sc.engine).version_for(engine)
    _emit.parse_version(engine, engine_version)  # a bad version fails before the sweep
    cap_source = "given"
    if max_num_seqs is None:  # the engine's scheduler default on this GPU (`inputs.scheduler`)
        max_num_seqs, cap_source = sc.scheduler_limits()["max_num_seqs"]
    served_by = None
    if qps_max is not None:  # the running batch a rate produces, with and without speculation
        catalogue.check("qps", qps_max)
        loaded = scenario(**model, **load, max_num_seqs=max_num_seqs * sc.dp_attention)
        (served_by,) = api.serve(loaded, [qps_max])["points"]
    adv = None
    if len(contexts) == 1:
        ranges, table, _ = _advise.schedule(sc, max_num_seqs, k_max, margin)
    else:  # one jitted call over (context, batch, k); the engine takes one batch table
        adv = _ctx.advise_over(sc, contexts, max_num_seqs, k_max, margin)
        ranges, table = adv["ranges"], adv["mean"]
    admission = ranges[-1][1]
    res = _advise.emit(engine, sc, ranges, table, margin, engine_version, draft_id)
    warnings = res["warnings"]
    if admission < max_num_seqs:
        at = f" at context {contexts[0]:g}" if adv else ""
        warnings.insert(0, f"from batch {admission + 1} per rank the drafter does not fit in memory at any k{at}: the "
                           f"admission limit is {admission} (--max-num-seqs {max_num_seqs} capped)")
    over = None if adv is None else _over_context(adv, engine, res["runs"], margin, warnings)
    per_range = _advise.expected(ranges, table)
    out = dict(emit=engine, config=res["config"], command_line=res["command_line"], files=res["files"],
               engine_version=res["engine_version"], runs=res["runs"], ranges=per_range, margin=margin,
               admission_limit=res["runs"][-1][1], served_by_qps=served_by, max_num_seqs=max_num_seqs, k_max=k_max,
               contexts=contexts, over_context=over, warnings=warnings, inputs=api.inputs(sc))
    out["inputs"].pop("batch")
    if adv:
        out["inputs"].pop("context")  # the contexts: `contexts`
    out["inputs"]["scheduler_source"] = dict(max_num_seqs=cap_source)
    if as_json:
        print_json(out)
        return
    if sc.dp_attention > 1:
        print(f"(batches per engine rank, as the engines count them: the replica runs {sc.dp_attention}x)")
    if adv:
        _print_grid(adv, margin)
        print("\nno engine reads a context axis (see the first warning): the engine takes one batch table, per batch "
              "the k with the best mean speedup over the contexts at which the batch fits (speedups: those means)")
    print(f"{'batches':>13} {'k':>3} {'speedup min':>12} {'first':>7} {'last':>7}")
    for r in out["ranges"]:
        why = {"does_not_fit": "  off: does not fit in memory with the drafter",
               "does_not_pay": f"  off: no k pays by {margin:.0%}"}.get(r["off_because"], "")
        print(f"{r['batches'][0]:>6}-{r['batches'][1]:<6} {r['k']:>3} {r['speedup_min']:>12.3f} "
              f"{r['speedup_first']:>7.3f} {r['speedup_last']:>7.3f}{why}")
    if served_by:
        print(f"(at {qps_max:g} req/s the running batch is {_b(served_by['batch_base'])} without / "
              f"{_b(served_by['batch_sd'])} with speculation; the table covers every admitted batch)")
    ver = out["engine_version"]
    print(f"\n{engine} {ver['target']} (needs >= {ver['minimum']}), admission limit {out['admission_limit']}:")
    print(res["command_line"])
    for name, content in res["files"].items():
        print(f"{name}: {json.dumps(content)}")
    for w in warnings:
        print(f"warning: {w}")


def _over_context(adv, engine, runs, margin, warnings):
    """The `over_context` object of advise --json (several contexts), and the warning that says what the one
    batch table loses against the (batch, context) advice."""
    from ..engine import advise as _advise
    from ..engine import advise_context as _ctx
    from ..engine import emit as _emit

    lost, of_table = _ctx.loss(adv, runs), _ctx.loss(adv, adv["ranges"])
    w = lost["worst"]
    said = (f"up to {w['loss']:.3f} in speedup ({w['speedup_advised']:.3f}x with k = {w['k_advised']} advised, "
            f"{w['speedup_runs']:.3f}x with k = {w['k_runs']} run, at batch {w['batch']}, context {w['context']:g}), "
            f"{lost['mean']:.4f} on average over {lost['cells']} (batch, context) cells" if w and w["loss"] > 0 else
            f"nothing (none of the {lost['cells']} (batch, context) cells runs slower than its advised k)")
    if runs != adv["ranges"] and of_table["worst"]:  # the engine's limits (below) change the table: context alone
        t = of_table["worst"]
        said += (f"; the one batch table alone, before the engine's limits, loses up to {max(t['loss'], 0.0):.3f} "
                 f"({of_table['mean']:.4f} on average)")
    warnings.insert(0, f"{_emit.CONTEXT_TABLE[engine]}: the configuration is one batch table for contexts "
                       f"{', '.join(f'{c:g}' for c in adv['contexts'])}; against the (batch, context) advice it "
                       f"loses {said}")
    columns = [dict(context=c, admission_limit=adv["admission"][i],
                    ranges=_advise.expected([r[:3] for r in _ctx.ranges_of(adv["k"][i], adv["why"][i])],
                                            adv["table"][i]))
               for i, c in enumerate(adv["contexts"])]
    bands = [dict(contexts=[adv["contexts"][a], adv["contexts"][b]],
                  ranges=[dict(batches=[f, t], k=k, off_because=why)
                          for f, t, k, why in _ctx.ranges_of(adv["k"][a], adv["why"][a])])
             for a, b in _ctx.bands(adv)]
    return dict(engine_reads_context=False, why=_emit.CONTEXT_TABLE[engine], rule="mean speedup over the contexts "
                "at which each batch fits", margin=margin, columns=columns, bands=bands, loss=lost,
                loss_of_batch_table=of_table)


def _print_grid(adv, margin):
    """The best k per batch range (rows) and context band (columns)."""
    from ..engine import advise_context as _ctx

    groups = _ctx.bands(adv)
    edges = sorted({f for a, _ in groups for f, _, _, _ in _ctx.ranges_of(adv["k"][a], adv["why"][a])})
    n = adv["k"].shape[1]
    mark = {_ctx.FIT: "x", _ctx.PAY: "-"}
    heads = [f"{adv['contexts'][a]:g}" + (f"-{adv['contexts'][b]:g}" if b > a else "") for a, b in groups]
    width = max(8, *(len(h) + 2 for h in heads))
    print(f"best k per batch (rows, per engine rank) and context (columns, tokens); -: off, no k pays by {margin:.0%}; "
          "x: off, does not fit in memory with the drafter")
    print(f"{'batches':>13}" + "".join(f"{h:>{width}}" for h in heads))
    for i, first in enumerate(edges):
        last = edges[i + 1] - 1 if i + 1 < len(edges) else n
        row = [mark.get(adv["why"][a][first - 1], str(adv["k"][a][first - 1])) for a, _ in groups]
        print(f"{first:>6}-{last:<6}" + "".join(f"{v:>{width}}" for v in row))
    print(f"{'admission':>13}" + "".join(f"{adv['admission'][a]:>{width}}" for a, _ in groups))
