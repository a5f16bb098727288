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
from specjax.inputs.scenario import Scenario
HELDOUT = pathlib.Path(__file__).parents[1] / "data" / "heldout" / "parallel_drafters.csv"


@pytest.fixture(scope="module")
def validated():
    """The file as `specjax validate` reads it: its rows, the per-row table and the summary (shipped profiles)."""
    rows = measured.load(HELDOUT)
    return rows, *validate.evaluate(rows)


def test_heldout_file_validates_every_row(validated):
    """9 rows of two sources (z-lab's gpt-oss-120b-DFlash card over client concurrency, SGLang issue 29244 at
    batch 1): each is predicted (status ok, finite), none is refused, anchored or flagged; the accepted length
    is the row's own (printed by each source)."""
    rows, df, summary = validated
    assert len(rows) == 9 and sorted(r.load_kind for r in rows) == ["batch"] + ["concurrency"] * 8
    assert (summary["rows_scored"], summary["rows_anchor"], summary["rows_inconsistent"],
            summary["rows_unsupported"], summary["rows_skipped"], summary["sources_scored"]) == (9, 0, 0, 0, 0, 2)
    assert summary["unsupported_reasons"] == []
    assert set(df["status"]) == {"ok"} and df["predicted_speedup"].is_finite().all()
    assert sorted(set(df["k"])) == [3, 9, 15]  # blocks 4 and 10 (the card), 16 (SGLang's default): k = block - 1
    assert set(df["alpha_source"]) == {"accepted_length"}  # solved from the printed tau, never fitted


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
    assert summary["rows_scored"] == 9 and summary["rows_unsupported"] == 0
    assert df["predicted_speedup"].to_list() == validated[1]["predicted_speedup"].to_list()
