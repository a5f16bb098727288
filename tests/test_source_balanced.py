"""The source-balanced headline of docs/model.md §13 (median over sources of each source's median APE, and
the worst source) on hand-made tables whose numbers are worked out by hand."""

import polars as pl
import pytest

from specjax.engine import validate


def _table(rows):
    """A per-row table as `validate.evaluate` makes it, from (source, series, role, ape) tuples."""
    n = len(rows)
    return pl.DataFrame(dict(
        source=[r[0] for r in rows], series=[r[1] for r in rows], role=[r[2] for r in rows],
        ape=[r[3] for r in rows], engine=["vllm"] * n, hardware=["h100-sxm"] * n, note=[""] * n,
        predicted_speedup=[1.5] * n, measured_speedup=[1.5] * n, side_ok=[True] * n))


# source A: many easy rows (APE 0.01, 0.02, 0.03, 0.04, 0.05 -> median 0.03); source B: 0.2, 0.4 ->
# median 0.3; source C: one scored row 0.1 (and an anchor and an unsupported row, never counted).
ROWS = [("A", "a1", "shape", v) for v in (0.01, 0.02, 0.03, 0.04, 0.05)] + \
       [("B", "b1", "level", 0.2), ("B", "b1", "shape", 0.4),
        ("C", "c1", "shape", 0.1), ("C", "c1", "anchor", 0.9), ("C", "c2", "unsupported", None)]


def test_source_balanced_by_hand():
    s = validate.source_balanced(_table(ROWS))
    # per-source medians 0.03, 0.3, 0.1 -> median 0.1; the worst is B at 0.3
    assert s["source_balanced_median_ape"] == pytest.approx(0.1)
    assert s["worst_source"] == {"source": "B", "median_ape": pytest.approx(0.3)}
    assert s["sources_scored"] == 3


def test_summary_carries_it_beside_the_pooled_median():
    s = validate.summarize(_table(ROWS))
    # pooled over the 8 scored rows: 0.01 .. 0.05, 0.1, 0.2, 0.4 -> median (0.04 + 0.05) / 2
    assert s["median_ape"] == pytest.approx(0.045)
    assert s["source_balanced_median_ape"] == pytest.approx(0.1) and s["worst_source"]["source"] == "B"


def test_no_scored_rows_gives_none():
    s = validate.source_balanced(_table([("A", "a", "anchor", 0.1)]))
    assert s == dict(source_balanced_median_ape=None, worst_source=None, sources_scored=0)


def test_text_output_names_the_balanced_median_and_the_worst_source(capsys):
    from specjax.cli import data

    data._metric_table(validate.summarize(_table(ROWS)))
    out = capsys.readouterr().out
    assert "source-balanced median APE 10.0% (median over 3 sources" in out
    assert "worst source B 30.0%" in out
