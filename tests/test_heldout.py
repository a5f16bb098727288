"""The held-out validation files (data/heldout/*.csv, never calibrated on): every row loads, names presets the
model has and is supported, each source has the rows data/heldout/README.md says, and `validate` predicts a
slice of them end to end. The presets added for them (qwen3-32b, eagle3-qwen3-32b) count the parameters
their configs give."""

import collections
import math
import pathlib

import polars as pl
import pytest

from specjax.engine import validate
from specjax.inputs import measured, models

HELDOUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "heldout"
# rows per series-id prefix (the source tag), as data/heldout/README.md lists them
ROWS = {
    "spec_at_load.csv": {"atomdash": 42, "atomrecipe": 4, "sglpr10281": 1, "amdmtp25": 7, "specdrift": 3},
    "spec_at_rate.csv": {"vllmblog24": 4, "llmd2074": 10, "amdspecdd25": 3},
    "plain_steps.csv": {"vllmkvfp8": 4, "vllmkvfp8fit": 16, "infx828": 12, "llmd2074": 10},
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_every_heldout_row_loads_and_is_supported(name):
    rows = measured.load(HELDOUT / name)
    assert [r.unsupported for r in rows if r.unsupported] == []
    assert dict(collections.Counter(r.series.split("-")[0] for r in rows)) == ROWS[name]
    assert all(r.source_url.startswith("https://") for r in rows)


def test_qwen3_32b_presets_count_their_config_parameters():
    h, ffn, heads, kv, hd, vocab = 5120, 25600, 64, 8, 128, 151936
    def attn(d_in):  # q, k, v over d_in; o
        return d_in * heads * hd + 2 * d_in * kv * hd + heads * hd * h

    layer = attn(h) + 3 * h * ffn + 2 * h + 2 * hd  # + RMSNorm weights and Qwen3's q/k norms
    target = models.target(models.load_architecture("qwen3-32b"))
    assert float(target.total_params) == pytest.approx(64 * layer + 2 * vocab * h + h, rel=2e-3)  # untied
    # EAGLE-3 head: one layer whose attention reads [embedding, hidden] (2h), fc 3h -> h, a 32k draft lm_head
    # and its own embedding: 1.5604e9 parameters, the pinned checkpoint's 3,121,274,856 bf16 bytes / 2 within 0.1%
    head = models.target(models.load_architecture("eagle3-qwen3-32b"))
    want = attn(2 * h) + 3 * h * ffn + 3 * h * h + 32000 * h + vocab * h
    assert float(head.total_params) == pytest.approx(want, rel=2e-3)
    assert float(head.total_params) == pytest.approx(3_121_274_856 / 2, rel=1e-3)
    assert models.preset_info("eagle3-qwen3-32b")["canonical_url"].startswith("https://huggingface.co/RedHatAI/")


def test_a_heldout_rate_series_validates_end_to_end():
    """llm-d PR 2074's TPOT series (Qwen3-32B + EAGLE-3 on 2 x H200) at QPS 1, 2, 4 and 8: the QPS-1 row
    anchors the fitted alpha and is reproduced; the other three are scored with finite predictions."""
    rows = [r for r in measured.load(HELDOUT / "spec_at_rate.csv")
            if r.series.startswith("llmd2074") and r.metric == "tpot"][:4]
    df, s = validate.evaluate(rows)
    assert (s["rows_anchor"], s["rows_scored"], s["rows_unsupported"]) == (1, 3, 0)
    anchor = df.filter(pl.col("role") == "anchor").row(0, named=True)
    assert anchor["qps"] == 1.0 and anchor["predicted_speedup"] == pytest.approx(anchor["measured_speedup"], rel=1e-4)
    assert 0 < anchor["alpha"] < 1 and df["alpha"].n_unique() == 1
    assert all(math.isfinite(p) and p > 0 for p in df["predicted_speedup"])
