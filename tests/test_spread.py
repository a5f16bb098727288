"""Acceptance that varies by request (docs/model.md §10.1), the kernels: TPOT percentiles against a direct
simulation over sampled requests (tests/reference.py), a spread of 0 giving factors of exactly 1, percentiles
monotone, a draft tree, a hand-checked point from per-request samples (through ingest), and bad input at the
edge. What needs `serve`'s compiled program is tested where it is compiled anyway: tests/test_serving.py (the
means unchanged, spread 0 equal to today's TPOT exactly, the SLO at a percentile, samples through serve) and
tests/test_concurrency.py (the closed loop)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from specjax.cli import main
from specjax.cost import spread
from specjax.cost.trees import Decode
from specjax.inputs import request_samples

F64 = jnp.float64
P = jnp.asarray(spread.PERCENTILES, F64)
SPREAD = jax.jit(spread.spread)
EDGE = ["serve", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "ngram", "--qps", "1"]


def dec_of(rates, k, **kw):
    """A chain's operating point (alpha, or a per-position vector) in float64."""
    vec = None if len(rates) == 1 else jnp.asarray(rates, F64)
    return Decode(batch=F64(1.0), k=F64(k), alpha=F64(rates[0]), context=F64(1024.0), rates=vec, **kw)


def run(capsys, args):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.mark.parametrize("rates,k,sigma", [((0.7,), 4, 0.8), ((0.9, 0.7, 0.5), 3, 1.5), ((0.4,), 2, 0.3)])
def test_percentiles_match_a_simulation_over_sampled_requests(rates, k, sigma):
    """100k requests drawn, delta re-solved on them, TPOT_i = T / tau_i, numpy percentiles: the kernel's quantile
    map agrees within 1% (the sampling error of a p99 over 100k requests is about 0.3%, measured over seeds);
    the kernel's mean accepted length over requests within 0.2%."""
    sp = SPREAD(dec_of(rates, k), sigma, P)
    tau0 = ref.tau_from_rates(rates, k)
    assert float(sp.tau_harmonic) == pytest.approx(tau0, rel=1e-12)
    sim = ref.request_tpot_simulation(1.0, rates, k, sigma)
    assert np.asarray(sp.tpot_factors) / tau0 == pytest.approx(sim["percentiles"], rel=1e-2)
    assert float(sp.tau_mean) == pytest.approx(sim["mean_tau"], rel=2e-3)
    assert float(sp.tau_mean) > tau0 * 1.005  # E[tau] > 1 / E[1/tau] (Jensen): the arithmetic mean overstates


def test_spread_zero_gives_factors_of_exactly_one():
    """(serve's TPOT percentiles at spread 0 equal its mean TPOT exactly: tests/test_serving.py)"""
    sp = SPREAD(dec_of((0.7,), 4), 0.0, jnp.asarray([1.0, 50.0, 99.9], F64))
    assert np.asarray(sp.tpot_factors).tolist() == [1.0, 1.0, 1.0] and float(sp.shift) == 0.0
    assert float(sp.tau_mean) == float(sp.tau_harmonic)


def test_percentiles_are_monotone_in_the_percentile_and_the_spread():
    sigmas = jnp.asarray([0.1, 0.5, 1.0, 2.0, 4.0], F64)
    pct = jnp.asarray([1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9], F64)
    for rates, k in (((0.7,), 4), ((0.9, 0.6, 0.3), 5), ((0.2,), 1)):
        sp = jax.vmap(SPREAD, (None, 0, None))(dec_of(rates, k), sigmas, pct)
        f = np.asarray(sp.tpot_factors)
        assert np.all(np.diff(f, axis=1) > 0)  # rising with the percentile, for every spread
        assert np.all(np.diff(f[:, -2]) > 0) and np.all(np.diff(f[:, 0]) < 0)  # p99 rises, p1 falls with sigma
        assert np.all(np.diff(np.asarray(sp.tau_mean)) > 0)  # the arithmetic mean parts from the harmonic one
        assert np.asarray(sp.tau_harmonic) == pytest.approx(ref.tau_from_rates(rates, k), rel=1e-12)


def test_a_draft_tree_spreads_through_its_estimate():
    """A tree's tau (docs/model.md §4.4) is increasing in every rate: its percentiles rise, its harmonic mean
    stays the scenario's."""
    dec = dec_of((0.6,), 3, tree_topk=F64(2.0), tree_tokens=F64(8.0), tree_max_depth=3)
    sp = SPREAD(dec, 1.0, P)
    tree_tau = ref.tree_tau(lambda d: 0.6, 2, 8, 3)
    assert float(sp.tau_harmonic) == pytest.approx(tree_tau, rel=1e-12)
    f = np.asarray(sp.tpot_factors)
    assert f[0] < 1.0 < f[1] < f[2]


def _vllm_response(rid, hist):
    """A vLLM response with per-request spec-decode metrics (`--per-request-spec-decode-metrics`) whose
    acceptance histogram is `hist` (steps that accepted 0..k drafts)."""
    steps, acc, k = sum(hist), sum(j * c for j, c in enumerate(hist)), len(hist) - 1
    spec = dict(num_spec_steps=steps, num_accepted_draft_tokens=acc, num_draft_tokens=steps * k, num_spec_tokens=k,
                mean_acceptance_length=1 + acc / steps, acceptance_histogram=hist)
    return json.dumps({"id": rid, "usage": {"completion_tokens": steps + acc}, "metrics": {"speculative_decoding":
                                                                                           spec}})


def ingested_samples(tmp_path, capsys):
    """Three requests at k = 2 with tau 1.5, 2 and 3 (histograms [5, 5, 0], [0, 10, 0], [0, 0, 10]) as vLLM
    responses, through `specjax ingest` into the per-request CSV; returns its path."""
    resp = tmp_path / "responses.jsonl"
    resp.write_text("\n".join(_vllm_response(f"r{i}", h) for i, h in enumerate(([5, 5, 0], [0, 10, 0], [0, 0, 10])))
                    + "\n")
    csv = tmp_path / "requests.csv"
    code, text, err = run(capsys, ["ingest", str(resp), "--out", str(csv)])
    assert code == 0 and "vllm-requests (vllm): 3 rows" in text, err
    assert f"harmonic mean over requests 2.000 (a batch's tokens per step); TPOT percentiles over requests: " \
           f"specjax serve --acceptance-samples {csv}" in text
    return csv


HAND = [1.0, 38 / 30, 2 * (0.5 + 0.98 / 6)]  # TPOT p50, p90, p99 / mean TPOT of the three requests


def test_samples_by_hand(tmp_path, capsys):
    """By hand: harmonic mean 3 / (2/3 + 1/2 + 1/3) = 2; 1/tau sorted = 1/3, 1/2, 2/3; p50 = 1/2, p90 at position
    1.8 = 1/2 + 0.8/6 = 19/30, p99 at 1.98 = 1/2 + 0.98/6; TPOT factor = 2 x those: 1, 1.266667, 1.326667; mean
    accepted length 6.5 / 3. (The same file through `serve --acceptance-samples`: tests/test_serving.py.)"""
    s = request_samples.load(ingested_samples(tmp_path, capsys))
    assert (s.taus, s.k, s.harmonic_mean, s.mean) == ((1.5, 2.0, 3.0), 2, pytest.approx(2.0, rel=1e-15),
                                                      pytest.approx(6.5 / 3, rel=1e-15))
    inv_q, tau_h, tau_mean = spread.sample_inverse_quantiles(jnp.asarray(s.taus, F64), P)
    assert (2 * np.asarray(inv_q)).tolist() == pytest.approx(HAND, rel=1e-12)
    assert (float(tau_h), float(tau_mean)) == pytest.approx((2.0, 6.5 / 3), rel=1e-12)
    dec = dec_of((0.6180339887498949,), 2)  # 1 + a + a^2 = 2 at the golden ratio's a: the scenario of the samples
    sp = jax.jit(spread.sample_spread)(dec, inv_q, tau_h, tau_mean)
    assert np.asarray(sp.tpot_factors).tolist() == pytest.approx(HAND, rel=1e-12)


@pytest.mark.parametrize("extra,msg", [
    (["--alpha", "0.6", "--acceptance-spread", "-0.1"],
     "acceptance_spread=-0.1; expected 0 <= acceptance_spread <= 5 (std of a request's log-odds of acceptance)"),
    (["--alpha", "0.6", "--acceptance-spread", "6"], "acceptance_spread=6.0; expected 0 <= acceptance_spread <= 5"),
    (["--alpha", "0.6", "--tpot-slo", "0.02", "--slo-percentile", "100"],
     "slo_percentile=100.0; expected 0 < slo_percentile < 100"),
    (["--alpha", "0.6", "--slo-percentile", "90"], "slo_percentile=90 applies to a TPOT target: give --tpot-slo"),
    (["--alpha", "0.6", "--acceptance-samples", "{csv}"], "--acceptance-samples gives the acceptance (the samples' "
                                                          "harmonic mean); drop --alpha"),
    (["--k", "4", "--acceptance-samples", "{csv}"], "k=4; expected 2, the draft length of the samples in {csv} "
                                                    "(give --k 2)"),
    (["--acceptance-spread", "0.5", "--acceptance-samples", "{csv}"], "give one spread of acceptance over requests"),
    (["--acceptance-samples", "{bad}"], "accepted_length='x' in {bad} row 3; expected a number"),
    (["--acceptance-samples", "{low}"], "accepted_length=0.5 in {low} row 2; expected 1 <= tau <= 65"),
    (["--acceptance-samples", "{nocol}"], "no accepted_length column"),
    (["--acceptance-samples", "{twok}"], "k=[2, 3]; expected one draft length per file of samples"),
    (["--acceptance-samples", "{missing}"], "not found"),
])
def test_bad_input_at_the_edge(tmp_path, capsys, extra, msg):
    files = dict(csv="accepted_length,k\n1.5,2\n2.0,2\n", bad="accepted_length\n1.5\nx\n", low="accepted_length\n0.5\n",
                 nocol="tau\n1.5\n", twok="accepted_length,k\n1.5,2\n2.0,3\n")
    paths = {n: tmp_path / f"{n}.csv" for n in files}
    for n, text in files.items():
        paths[n].write_text(text)
    paths["missing"] = tmp_path / "missing.csv"
    fill = lambda s: s.format(**{n: str(p) for n, p in paths.items()})  # noqa: E731
    code, _, err = run(capsys, EDGE + [fill(x) for x in extra])
    assert code == 2 and fill(msg) in err and len(err.strip().splitlines()) == 1, err
