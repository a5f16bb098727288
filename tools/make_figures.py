"""Regenerate the README's figures (docs/*.png) from the shipped specs and data.

Run from the repository root: ``python tools/make_figures.py`` (``... validation``: only
docs/validation.png; ``... parallel``: only docs/parallel_drafters.png and
docs/parallel_drafters_measured.png; ``... closed_loop``: only docs/closed_loop.png). Every number in a
figure comes from specjax itself: the seed sweep, the sensitivity kernel and the validation of
data/measured/*.csv (pure, shipped, leave one source out) and of
data/heldout/parallel_drafters.csv (held out: drawn, never fitted on).
"""

import pathlib
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from specjax import api  # noqa: E402
from specjax.engine import sweep, transfer, validate  # noqa: E402
from specjax.inputs import measured, seed, spec  # noqa: E402
from specjax.inputs.scenario import Scenario  # noqa: E402
from specjax.outputs import curves, plots  # noqa: E402


def main():
    docs = ROOT / "docs"
    tmp = pathlib.Path(tempfile.mkdtemp())
    sweep.run(spec.load(ROOT / "sweeps" / "seed.toml"), tmp / "seed")
    fig, _ = plots.speedup_figure(plots.from_sweep(tmp / "seed"),
                                  title="Llama-3-70B vs gpt-oss-120b on an H200 (headline scenario)")
    plots.save(fig, docs / "headline")
    res = {s: api.sensitivity(sc)["elasticities"] for s, sc in seed.scenarios().items()}
    fig, _ = plots.sensitivity_figure(res, title="Elasticity of the switch-off batch B_off (headline scenario)")
    plots.save(fig, docs / "sensitivity")
    moe = Scenario(target="gpt-oss-120b", hardware="h200", drafter="eagle", draft="eagle3-gpt-oss-120b", k=3,
                   alpha=0.7, kv_dtype="fp8", engine="roofline")
    fig, _ = plots.speedup_figure(curves.speedup_grid({"gpt-oss-120b + EAGLE-3, k 3, alpha 0.7": moe},
                                                      np.geomspace(1, 4096, 241)),
                                  title="An MoE curve: a dip below 1 at small batch, then the switch-off batch")
    plots.save(fig, docs / "moe_switch_off")
    moe_spec = spec.load(ROOT / "sweeps" / "moe_parallel.toml")
    sweep.run(moe_spec, tmp / "moe_parallel")
    df = plots.from_sweep(tmp / "moe_parallel").filter(pl.col("alpha") == 0.8)
    fig, table = plots.switch_off_by_pair_figure(
        df, bound=moe_spec.batch_max, order=[p.label for p in moe_spec.pairs],
        title="MoE at scale: switch-off batch per parallel layout (SGLang profile, alpha 0.8, context 4k)")
    plots.save(fig, docs / "moe_parallel")
    with pl.Config(tbl_rows=200, tbl_cols=20, tbl_width_chars=200):
        print(table.select("hardware", "group", "layout", "k_tokens", "crossover_batch", "status", "max_batch_sd")
              .sort("hardware", "group", "layout", "k_tokens"))
    # acceptance vectors: vLLM's per-position rates vs an i.i.d. alpha with the same tau at k = 3
    rates = (0.601, 0.286, 0.128)  # vLLM issue 20780's per-position acceptance, EAGLE-3 on Llama-3.1-8B
    pair = dict(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b",
                context=2048, engine="vllm")
    alpha_same = Scenario(**pair, k=3, position_rates=rates).replace_acceptance(
        accepted_length=1 + sum(rates)).resolved_alpha()
    scen = {f"{lab}, k {k}": Scenario(**pair, k=k, **acc) for k in (1, 2, 4) for lab, acc in
            (("per-position rates", dict(position_rates=rates)), (f"i.i.d. alpha {alpha_same:.3f}",
                                                                   dict(alpha=alpha_same)))}
    fig, _ = plots.speedup_figure(curves.speedup_grid(scen, np.geomspace(1, 256, 97)),
                                  title="Falling per-position acceptance: longer drafts pay less than i.i.d. says")
    plots.save(fig, docs / "acceptance_vector")
    # trees: chain and two SpecDecode-Bench tree shapes from one alpha (the chain's measured tau 2.25)
    qwen = dict(target="qwen3-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-qwen3-8b", k=3,
                context=180, engine="sglang")
    a_chain = Scenario(**qwen, accepted_length=2.25).resolved_alpha()
    shapes = {"chain (k 3, 4 tokens)": {}, "tree depth 3, topk 2, 6 tokens": dict(tree_topk=2, tree_tokens=6),
              "tree depth 3, topk 4, 21 tokens": dict(tree_topk=4, tree_tokens=21)}
    fig, _ = plots.speedup_figure(
        curves.speedup_grid({n: Scenario(**qwen, alpha=a_chain, **kw) for n, kw in shapes.items()},
                            np.geomspace(1, 256, 97)),
        title="Qwen3-8B + EAGLE-3 on H100 (SGLang): wide trees win at batch 1, lose by batch 64")
    plots.save(fig, docs / "trees")
    # self-speculation at long context
    self_spec = spec.load(ROOT / "sweeps" / "self_spec.toml")
    sweep.run(self_spec, tmp / "self_spec")
    df = plots.from_sweep(tmp / "self_spec").filter(pl.col("pair") == "llama-3.1-8b.self-512")
    fig, _ = plots.speedup_figure(df, title="Self-speculation, Llama-3.1-8B on H200, draft KV budget 512 tokens")
    plots.save(fig, docs / "self_spec")
    # serving load: the vLLM blog's scenario (README "Serving load")
    blog = dict(target="llama-3-70b", hardware="h100-sxm", drafter="model", draft="qwama-0.5b", tp=4, draft_tp=1,
                k=4, engine="vllm", input_len=220, output_len=200)
    fig, _ = plots.serving_figure(*curves.serving_grid({f"llama-3-70b | alpha={a:g}": Scenario(**blog, alpha=a)
                                                        for a in (0.5, 0.6, 0.7)}))
    plots.save(fig, docs / "serving")
    closed_loop_figure(docs)
    parallel_figure(docs)
    validation_figure(docs)
    shutil.rmtree(tmp)


def closed_loop_figure(docs):
    """docs/closed_loop.png: the README's closed-loop example (Llama-3-70B on 4 x H100, Qwama-0.5B drafting
    k = 4, 256 prompt and 256 output tokens, vLLM profile) at three acceptance rates, over client concurrency."""
    base = dict(target="llama-3-70b", hardware="h100-sxm", tp=4, drafter="model", draft="qwama-0.5b", draft_tp=1,
                k=4, engine="vllm", input_len=256, output_len=256)
    fig, table = plots.concurrency_figure(*curves.concurrency_grid(
        {f"llama-3-70b | alpha={a:g}": Scenario(**base, alpha=a) for a in (0.6, 0.7, 0.8)}),
        title="Llama-3-70B + Qwama-0.5B (k 4) on 4 x H100, vLLM: closed loop, 256/256 tokens")
    plots.save(fig, docs / "closed_loop")
    print(table)


def parallel_figure(docs):
    """docs/parallel_drafters.png: a chain EAGLE-3 head, a chain draft model, the same weights as a parallel
    drafter (PARD) and a DFlash drafter, all k = 8 at one alpha, over batch (README "Parallel drafters").
    The measured parallel-drafter rows (data/heldout/parallel_drafters.csv) are not this target, GPU or
    engine: the ones over client concurrency (gpt-oss-120b on one H200, SGLang) go on a figure of their own
    beside it, docs/parallel_drafters_measured.png, measured against the model (shipped SGLang profile and
    pure roofline), the rows' own accepted lengths given."""
    base = dict(target="llama-3.1-8b", hardware="h200", k=8, alpha=0.8, context=1024.0, engine="vllm")
    scen = {"EAGLE-3 head, chain": Scenario(**base, drafter="eagle", draft="eagle3-llama-3.1-8b"),
            "Llama-3.2-1B draft model, chain": Scenario(**base, drafter="model", draft="llama-3.2-1b"),
            "PARD-Llama-3.2-1B, parallel (p 1)": Scenario(**base, drafter="parallel", draft="pard-llama-3.2-1b"),
            "DFlash (5 layers), parallel (p 1)": Scenario(**base, drafter="parallel", draft="dflash-llama-3.1-8b")}
    fig, _ = plots.speedup_figure(curves.speedup_grid(scen, np.geomspace(1, 4096, 241)),
                                  title="Llama-3.1-8B on H200 (vLLM), k 8, alpha 0.8: chain vs parallel drafters")
    plots.save(fig, docs / "parallel_drafters")
    rows = [r for r in measured.load(ROOT / "data" / "heldout" / "parallel_drafters.csv")
            if r.load_kind == "concurrency"]  # the card's rows; the file's one batch-1 row is another target and GPU
    shipped, s1 = validate.evaluate(rows)
    pure, s0 = validate.evaluate(rows, "roofline")
    fig, _ = plots.measured_at_load_figure(
        {f"SGLang profile ({s1['median_ape']:.0%} median error)": shipped,
         f"pure roofline ({s0['median_ape']:.0%})": pure},
        title="gpt-oss-120b + DFlash (z-lab card), 1 x H200, SGLang, GSM8K: speedup vs clients")
    plots.save(fig, docs / "parallel_drafters_measured")


def validation_figure(docs):
    """docs/validation.png: every measured row (all three files), pure, shipped and out of sample."""
    data = ROOT / "data" / "measured"
    rows = [r for f in ("public.csv", "step_times.csv", "trees.csv") for r in measured.load(data / f)]
    pure, s0 = validate.evaluate(rows, "roofline")
    shipped, s1 = validate.evaluate(rows)
    loso, s2 = transfer.leave_one_source_out(rows)
    fig, _ = plots.validation_figure({
        f"pure roofline (median APE {s0['median_ape']:.1%}, p90 {s0['p90_ape']:.0%})": pure,
        f"shipped engine profiles, in sample ({s1['median_ape']:.1%}, {s1['p90_ape']:.0%})": shipped,
        f"profiles fitted without the row's source ({s2['median_ape']:.1%}, {s2['p90_ape']:.0%})": loso})
    plots.save(fig, docs / "validation")
    keys = ("rows_scored", "median_ape", "p90_ape", "side_accuracy")
    print(pl.DataFrame([dict(split=n, **{k: v[k] for k in keys}) for n, v in
                        (("pure roofline", s0), ("shipped profiles", s1), ("leave one source out", s2))]))


if __name__ == "__main__":
    if sys.argv[1:] == ["validation"]:  # only the validation figure (a leave-one-source-out run, ~3 min)
        validation_figure(ROOT / "docs")
    elif sys.argv[1:] == ["parallel"]:
        parallel_figure(ROOT / "docs")
    elif sys.argv[1:] == ["closed_loop"]:
        closed_loop_figure(ROOT / "docs")
    else:
        main()
