"""The held-out parallel-drafter rows (data/heldout/parallel_drafters.csv, data/heldout/README.md) and the DFlash
presets transcribed from the published config.json files: the file validates as a new user runs it, every row
scored (no refusal, no anchor, no inconsistency), and each preset is its config.json (a path gives the same
model as the slug) with the published shape."""

import dataclasses
import json
import pathlib

import polars as pl
import pytest

from specjax import api
from specjax.engine import validate
from specjax.inputs import measured, models
from specjax.errors import SpecError
from specjax.inputs.scenario import Scenario
HELDOUT = pathlib.Path(__file__).parents[1] / "data" / "heldout" / "parallel_drafters.csv"


@pytest.fixture(scope="module")
def validated():
    """The file as `specjax validate` reads it: its rows, the per-row table and the summary (shipped profiles)."""
    rows = measured.load(HELDOUT)
    return rows, *validate.evaluate(rows)


def test_heldout_file_validates_every_row(validated):
    """49 rows of three sources (z-lab's gpt-oss-120b-DFlash card over client concurrency, SGLang issue 29244 at
    batch 1, the first z-lab/dflash README's DFlash vs EAGLE-3 table at batch 1): each is predicted (status ok,
    finite), none is refused, anchored or flagged; the accepted length is the row's own (printed by each
    source)."""
    rows, df, summary = validated
    assert len(rows) == 49 and sorted(r.load_kind for r in rows) == ["batch"] * 41 + ["concurrency"] * 8
    assert (summary["rows_scored"], summary["rows_anchor"], summary["rows_inconsistent"],
            summary["rows_unsupported"], summary["rows_skipped"], summary["sources_scored"]) == (49, 0, 0, 0, 0, 3)
    assert summary["unsupported_reasons"] == []
    assert set(df["status"]) == {"ok"} and df["predicted_speedup"].is_finite().all()
    # blocks 4 and 10 (the card), 16 (SGLang's default, the README's b16): k = block - 1; EAGLE-3's chain of 7
    assert sorted(set(df["k"])) == [3, 7, 9, 15]
    assert set(df["alpha_source"]) == {"accepted_length"}  # solved from the printed tau, never fitted


def test_gpt_oss_rows_keep_attention_and_head_in_bf16(validated):
    """gpt-oss ships MXFP4 experts beside BF16 attention, embeddings and LM head (its quantization_config), and
    the DFlash drafter is BF16: the card's rows say weight_dtype bf16 and expert_dtype mxfp4, which is the
    config's own mixed precision (`Scenario` with no dtype given), not every weight in MXFP4."""
    rows = [r for r in validated[0] if r.target == "gpt-oss-120b"]
    assert len(rows) == 8 and {(r.weight_dtype, r.expert_dtype) for r in rows} == {("bf16", "mxfp4")}
    sc = rows[0].scenario()
    default = dataclasses.replace(sc, weight_dtype=None, expert_dtype=None)
    t, d = sc.build()[2:4], default.build()[2:4]
    assert float(t[0].weight_bytes) == float(d[0].weight_bytes)  # the target: the config's own dtypes
    assert float(t[1].weight_bytes) == float(d[1].weight_bytes)  # the drafter: BF16 (its torch_dtype)
    all_fp4 = dataclasses.replace(sc, expert_dtype=None, weight_dtype="mxfp4").build()[2:4]
    # what weight_dtype=mxfp4 alone meant: the drafter's 0.785B weights at ~0.53 byte instead of 2, and the
    # target's ~1.5B attention, embedding and LM-head weights (3 GB in BF16) in MXFP4 too
    assert float(all_fp4[1].weight_bytes) < 0.3 * float(t[1].weight_bytes)
    assert 2.5e9 < float(t[0].weight_bytes) - float(all_fp4[0].weight_bytes) < 3.5e9


def _pairs(df):
    """The README rows as {(dataset, temperature): {drafter: row}}: DFlash-b16 and EAGLE-3 on one dataset."""
    src = pl.read_csv(HELDOUT, infer_schema=False).with_row_index("line", offset=2)
    df = df.join(src.select(pl.col("line").cast(pl.Int64), "dataset"), on="line")
    pairs = {}
    for r in df.filter(pl.col("series").str.starts_with("zlabreadme")).iter_rows(named=True):
        pairs.setdefault(r["dataset"], {})[r["drafter"]] = r
    return pairs


@pytest.mark.parametrize("engine", [None, "sglang", "vllm"])
def test_ordering_against_eagle3_where_the_source_compares_both(validated, engine):
    """z-lab/dflash's first README prints Qwen3-8B + DFlash-b16 and + an EAGLE-3 head on one B200, one backend,
    batch 1, for 10 datasets at temperatures 0 and 1: DFlash is faster on all 20. validate orders every pair as
    measured with the rows' engine (generic) and with the SGLang and vLLM profiles; with the rows' engine the
    ratio DFlash / EAGLE-3 is within 25% of the measured one (measured 1.18-2.83x; worst MT-Bench, +21%)."""
    df = validated[1] if engine is None else validate.evaluate(validated[0], engine)[0]
    pairs = _pairs(df)
    assert len(pairs) == 20 and all(set(p) == {"eagle", "parallel"} for p in pairs.values())
    for name, p in pairs.items():
        meas = p["parallel"]["measured_speedup"] / p["eagle"]["measured_speedup"]
        pred = p["parallel"]["predicted_speedup"] / p["eagle"]["predicted_speedup"]
        assert meas > 1.0 and pred > 1.0, name
        assert engine is not None or abs(pred / meas - 1.0) < 0.25, (name, meas, pred)


def test_the_readme_source_is_within_the_bar(validated):
    """The README's 40 rows with the rows' engine (generic): median error under 5% for each drafter (measured
    1.4% EAGLE-3, 4.3% DFlash; the largest, 24.8%, is DFlash on MT-Bench at temperature 0)."""
    df = validated[1].filter(pl.col("series").str.starts_with("zlabreadme"))
    assert df.height == 40
    for drafter in ("eagle", "parallel"):
        assert df.filter(pl.col("drafter") == drafter)["ape"].median() < 0.05


def test_the_measured_figure_draws_the_validated_rows(validated):
    """docs/parallel_drafters_measured.png: per series and concurrency, the measured and the predicted speedups
    drawn are the validate table's."""
    from specjax.outputs import plots
    df = validated[1].filter(pl.col("load_kind") == "concurrency")
    fig, drawn = plots.measured_at_load_figure({"shipped": df})
    assert drawn.height == 8 and len(fig.axes) == 1
    want = df.select("series", "concurrency", "measured_speedup", "predicted_speedup").sort("series", "concurrency")
    got = drawn.select("series", "concurrency", "measured_speedup", "predicted_speedup").sort("series", "concurrency")
    assert got.equals(want)


@pytest.mark.parametrize("slug, layers, width, ffn, block, features", [
    ("dflash-qwen3-8b", 5, 4096, 12288, 16, 5),       # z-lab/Qwen3-8B-DFlash-b16
    ("dflash-llama-3.1-8b", 5, 4096, 12288, 10, 5),   # z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat (was 14336, 16)
    ("dflash-gpt-oss-120b", 8, 2880, 7680, 10, 5),    # z-lab/gpt-oss-120b-DFlash
])
def test_dflash_presets_are_their_config_json(tmp_path, slug, layers, width, ffn, block, features):
    a = models.load_architecture(slug)
    assert (a.n_layers, a.d_model, a.block_size, a.dflash_features) == (layers, width, block, features)
    assert a.p_extra_read == features * width * width  # the fc over the tapped target layers
    cfg = json.loads((models.PRESET_DIR / f"{slug}.json").read_text())
    assert cfg["intermediate_size"] == ffn and cfg["architectures"] == ["DFlashDraftModel"]
    cfg.pop("_specjax")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    b = models.load_architecture(path)
    assert dataclasses.replace(b, source="", name="") == dataclasses.replace(a, source="", name="")


def test_gpt_oss_drafter_size_matches_the_published_count():
    """8 layers of 2880 with 64 query / 8 KV heads of 64 and a 7680 FFN, plus the fc over 5 target layers:
    0.785B parameters, the transcription's 0.78B (head_dim 128 would give 1.0B); the LM head is the target's."""
    tgt = models.load_architecture("gpt-oss-120b")
    m = models.dflash_head(models.load_architecture("dflash-gpt-oss-120b"), tgt)
    per_layer = 2880 * (64 + 2 * 8) * 64 + 64 * 64 * 2880 + 3 * 2880 * 7680
    assert float(m.total_params) == 8 * per_layer + 5 * 2880 * 2880
    assert float(m.p_head) == 201088 * 2880 and float(m.p_stored) == 0.0


def test_llama_dflash_block_caps_k_at_nine():
    sc = Scenario(target="llama-3.1-8b", hardware="h200", drafter="parallel", draft="dflash-llama-3.1-8b", k=8,
                  alpha=0.8, context=1024.0, engine="vllm")
    assert api.block_k(sc) == 9


def test_the_file_with_a_config_json_path_for_the_draft_predicts_the_same(tmp_path, validated):
    """The draft column may name the drafter's config.json instead of the slug: every row, same prediction."""
    cfg = json.loads((models.PRESET_DIR / "dflash-gpt-oss-120b.json").read_text())
    cfg.pop("_specjax")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    text = HELDOUT.read_text().replace(",dflash-gpt-oss-120b,", f",{tmp_path / 'config.json'},")
    assert text.count(str(tmp_path)) == 8
    (tmp_path / "rows.csv").write_text(text)
    df, summary = validate.evaluate(measured.load(tmp_path / "rows.csv"))
    assert summary["rows_scored"] == 49 and summary["rows_unsupported"] == 0
    assert df["predicted_speedup"].to_list() == validated[1]["predicted_speedup"].to_list()


def test_a_bad_expert_dtype_is_refused_by_name(tmp_path):
    """The optional expert_dtype column takes a dtype name or nothing: anything else is one line naming the
    file, line, column, value and the allowed names."""
    text = HELDOUT.read_text()
    head, first, *rest = text.splitlines()
    col = head.split(",").index("expert_dtype")
    cells = first.split(",")
    assert cells[col] == "mxfp4"
    cells[col] = "fp5"
    (tmp_path / "rows.csv").write_text("\n".join([head, ",".join(cells)]) + "\n")
    with pytest.raises(SpecError) as e:
        measured.load(tmp_path / "rows.csv")
    msg = str(e.value)
    assert "\n" not in msg and "line 2" in msg and "expert_dtype" in msg and "'fp5'" in msg and "mxfp4" in msg
