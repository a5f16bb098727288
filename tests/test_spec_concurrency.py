"""Speculative rows measured at a closed-loop client concurrency (docs/model.md §11) in `specjax validate`: the
CSV schema and its refusals, each metric's prediction against `search.concurrency.closed` called directly,
one client against the batch-1 step, the anchor of a fitted acceptance (the lowest concurrency, on a metric that
rises with acceptance), and the load-kind breakdown of the summary and of the text table. (Fitting alpha through
the closed loop compiles for ~15 s, so the fit itself is not run here: `matching_alpha` is the rate rows'.)"""

import re

import jax
import jax.numpy as jnp
import polars as pl
import pytest

from specjax.cli import main
from specjax.cost.speculative import step
from specjax.engine import validate
from specjax.errors import SpecError
from specjax.inputs import measured
from specjax.inputs.scenario import Scenario
from specjax.search import concurrency as cc

BASE = dict(target="llama-3.1-8b", hardware="h100-sxm", drafter="model", draft="llama-3.2-1b", tp=1, k=4,
            engine="roofline", input_len=512, output_len=256)
NS = (1, 8, 64)
HEAD = ("series,target,drafter,draft,hardware,tp,k,acceptance_rate,accepted_length,weight_dtype,metric,approximate,"
        "source_url,engine,concurrency,input_len,output_len,measured_ratio\n")
ROW = "{s},llama-3.1-8b,model,llama-3.2-1b,h100-sxm,1,4,{a},,bf16,{m},0,https://{s}.example/x,roofline,{n},512,256,{r}\n"
METRICS = tuple(measured.METRICS["concurrency"])
# a series with a given acceptance, every metric at every concurrency; a series whose acceptance is fitted on
# its lowest-concurrency tpot row (the itl row beside it cannot anchor); one with only an itl row (unsupported)
CSV = HEAD + "".join(ROW.format(s="given", a=0.7, m=m, n=n, r=1.2) for n in NS for m in METRICS) + \
    "".join(ROW.format(s="fit", a="", m=m, n=n, r=r) for m, n, r in (("itl", 1, 0.6), ("tpot", 1, 1.4),
                                                                       ("tpot", 64, 1.2))) + \
    ROW.format(s="itlonly", a="", m="itl", n=8, r=0.6)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The file (the "fit" series left out of it: see the module docstring), its rows, table and summary."""
    p = tmp_path_factory.mktemp("conc") / "conc.csv"
    p.write_text("".join(line for line in CSV.splitlines(True) if not line.startswith("fit,")))
    rows = measured.load(p)
    df, summary = validate.evaluate(rows)
    return p, rows, df, summary


@pytest.fixture(scope="module")
def direct():
    """`concurrency.closed` on the rows' scenario at alpha 0.7, at each N (one vmapped call)."""
    hw, dep, tgt, dr, dec = Scenario(**BASE, alpha=0.7).build()
    per = jax.jit(jax.vmap(lambda n: cc.closed(hw, dep, tgt, dr, dec, n)))(jnp.asarray(NS, dec.alpha.dtype))
    at_1 = jax.jit(step)(hw, dep, tgt, dr, dec.replace(batch=jnp.float32(1.0), context=jnp.float32(512 + 128)))
    return per, at_1


def test_rows_load_with_their_load_kind(data):
    _, rows, _, _ = data
    assert {r.load_kind for r in rows} == {"concurrency"} and not any(r.is_rate for r in rows)
    assert [r.concurrency for r in rows[:len(METRICS) * 3:len(METRICS)]] == list(NS)
    assert all(r.batch == 1.0 and r.context == 512 + 128 and r.input_len == 512 for r in rows)


def test_each_metric_is_the_closed_loop_ratio(data, direct):
    _, _, df, _ = data
    per, _ = direct
    given = df.filter(pl.col("series") == "given")
    want = {"throughput": per.ratio_e2e, "tpot": per.speedup_tpot, "e2e_request_latency": per.ratio_e2e,
            "itl": per.base.iteration_s / per.sd.iteration_s, "ttft": per.ratio_ttft}
    for m in METRICS:
        got = given.filter(pl.col("metric") == m).sort("concurrency")
        assert got["concurrency"].to_list() == list(NS)
        assert got["predicted_speedup"].to_list() == pytest.approx([float(v) for v in want[m]], rel=1e-5), m
    # the output-throughput ratio is the E2E ratio: N = X E2E on both sides
    thr = given.filter(pl.col("metric") == "throughput").sort("concurrency")["predicted_speedup"].to_list()
    assert thr == pytest.approx([float(v) for v in per.sd.throughput_tok_s / per.base.throughput_tok_s], rel=1e-5)
    assert set(given["status"]) == {"ok"} and set(given["alpha_source"]) == {"given"}
    # the lowest concurrency of a series with a given acceptance is its level row
    assert given.filter(pl.col("role") == "level")["concurrency"].unique().to_list() == [1]


def test_one_client_is_the_batch_1_step(data, direct):
    _, _, df, _ = data
    per, at_1 = direct
    one = df.filter((pl.col("series") == "given") & (pl.col("metric") == "tpot") & (pl.col("concurrency") == 1))
    assert one["predicted_speedup"][0] == pytest.approx(float(per.speedup_tpot[0]), rel=1e-5)
    assert one["predicted_speedup"][0] == pytest.approx(float(at_1.speedup), rel=1e-5)  # nothing shared


def test_acceptance_anchor_is_the_lowest_concurrency_on_a_metric_that_identifies_it(tmp_path, data):
    p = tmp_path / "all.csv"
    p.write_text(CSV)
    rows = [r for r in measured.load(p) if r.series != "given"]
    known, source = validate.known_alpha(rows)
    # fit: itl at N=1 (line order first), tpot at N=1, tpot at N=64 -> the tpot row at N=1; itlonly: none
    assert validate.anchors(rows, known).tolist() == [1, 1, 1, -2] and list(source) == ["fitted"] * 4
    _, _, df, summary = data
    lone = df.filter(pl.col("series") == "itlonly").row(0, named=True)
    assert lone["role"] == "unsupported" and "itl and ttft ratios do not identify it" in lone["note"]
    c = summary["by_load"]["concurrency"]
    assert list(summary["by_load"]) == ["concurrency"] and c["rows"] == df.height == 3 * len(METRICS) + 1
    assert c["rows_scored"] == summary["rows_scored"] == 3 * len(METRICS) and c["level"]["rows_scored"] == 5


@pytest.mark.parametrize("edit,msg", [
    (lambda t: t.replace("series,", "batch,series,").replace("\ngiven,", "\n4,given,", 1)
     .replace("\ngiven,", "\n,given,").replace("\nfit,", "\n,fit,").replace("\nitlonly,", "\n,itlonly,"),
     "line 2, column batch: '4'; expected empty in a row at a closed-loop concurrency (concurrency = 1): exactly "
     "one of batch, qps and concurrency per row"),
    (lambda t: t.replace(",throughput,", ",goodput,", 1),
     "line 2, column metric: 'goodput'; expected throughput or tpot or e2e_request_latency or itl or ttft "
     "(a row at a closed-loop concurrency)"),
    (lambda t: t.replace(",512,256,1.2\n", ",512,,1.2\n", 1),
     "line 2, column output_len: ''; expected a value: a row at a closed-loop concurrency needs concurrency, "
     "input_len, output_len, measured_ratio"),
])
def test_bad_rows_are_refused_naming_the_field(tmp_path, edit, msg):
    p = tmp_path / "bad.csv"
    p.write_text(edit(CSV))
    with pytest.raises(SpecError, match=re.escape(msg)) as e:
        measured.load(p)
    assert "\n" not in str(e.value)


def test_cli_prints_the_load_kind_breakdown(data, capsys):
    p = data[0]
    with pytest.raises(SystemExit) as e:
        main(["validate", str(p)])
    out = capsys.readouterr().out
    assert e.value.code in (0, None)
    assert "load concurrency: closed loop" in out and "  concurrency: level" in out
    assert re.search(r"load concurrency: closed loop\s+15\s", out)
    assert "{" not in out  # the JSON summary only with --json
