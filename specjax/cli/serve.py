"""`specjax serve`: the serving load of docs/model.md §10, from request rate to batch, TPOT, TTFT and E2E; with
`--concurrency` the closed loop of docs/model.md §11 (N clients, as `vllm bench serve --max-concurrency`)."""

from typing import Annotated, Optional

import typer

from .. import _lazy
from .. import catalogue
from ..cost.status import Curve
from ..errors import SpecError
from .app import Json, model_command, option, print_inputs, print_json, scenario
from .model import _b

api = _lazy.module("specjax.api")


def _ms(x):
    return "-" if x is None else f"{x * 1e3:.2f}"


def _q(x):
    return "-" if x is None else f"{x:.4g}"


def _r(x):
    return "-" if x is None else f"{x:.3f}"


Spread, _ = option(catalogue.INPUTS["acceptance_spread"])  # a flag of serve only: it shapes TPOT percentiles


@model_command(load=True)
def serve(model, load,
          qps: Annotated[Optional[list[float]], typer.Option(
              help="Request rate (requests/s); repeat for a table. Default: 13 rates from 1% to 120% of the larger "
                   "sustainable rate.")] = None,
          concurrency: Annotated[Optional[list[float]], typer.Option(
              help="Clients of a closed loop (each sends its next request when its last one ends, as "
                   "--max-concurrency in vllm bench serve); repeat for a table. Instead of --qps.")] = None,
          tpot_slo: Annotated[Optional[float], typer.Option(
              help="TPOT target (seconds): report the largest rate that meets it, with and without speculation.")
          ] = None,
          ttft_slo: Annotated[Optional[float], typer.Option(help="TTFT target (seconds), as --tpot-slo.")] = None,
          slo_percentile: Annotated[Optional[float], typer.Option(
              help="The percentile of requests --tpot-slo applies to (e.g. 90: p90 TPOT <= target), given a "
                   "spread of acceptance over requests; default: the mean TPOT.", rich_help_panel="Serving load")
          ] = None,
          acceptance_spread: Spread = None,
          acceptance_samples: Annotated[Optional[str], typer.Option(
              help="Per-request accepted lengths: the CSV specjax ingest writes from vllm-requests or "
                   "sglang-requests (an accepted_length column). Replaces --alpha: the batch's tokens per step "
                   "is their harmonic mean; TPOT percentiles follow the samples.", rich_help_panel="Serving load")
          ] = None,
          sensitivity: Annotated[bool, typer.Option("--sensitivity", help="Elasticities of the switch-off rate, "
                                                                          "or with --concurrency of the switch-off "
                                                                          "concurrency (slower: differentiates the "
                                                                          "fixed point).")] = False,
          as_json: Json = False):
    """From request rate to batch (docs/model.md §10): batch, TPOT, TTFT, E2E and throughput with and without
    speculation, the sustainable rates and the rate beyond which speculation no longer lowers TPOT.
    --context is not used: each step runs at the mean decode context input_len + output_len / 2."""
    for q in qps or []:
        catalogue.check("qps", q)
    for n in concurrency or []:
        catalogue.check("concurrency", n)
    if qps and concurrency:
        raise SpecError("give --qps (an open loop) or --concurrency (a closed loop), not both")
    api.check_percentile(slo_percentile)
    if slo_percentile is not None and tpot_slo is None:
        raise SpecError(f"slo_percentile={slo_percentile:g} applies to a TPOT target: give --tpot-slo too")
    samples = None
    if acceptance_samples is not None:
        from ..inputs import request_samples

        given = [f"--{n.replace('_', '-')}" for n in ("alpha", "accepted_length", "acceptance_vector",
                                                      "position_rates") if model[n] is not None]
        if given:
            raise SpecError(f"--acceptance-samples gives the acceptance (the samples' harmonic mean); drop "
                            f"{', '.join(given)}")
        samples = request_samples.load(acceptance_samples)
        samples.check_k(model["k"])
        model = {**model, "accepted_length": samples.harmonic_mean}
    sc = scenario(**load, **model, acceptance_spread=acceptance_spread)
    if concurrency:
        if tpot_slo is not None or ttft_slo is not None:
            raise SpecError("--tpot-slo and --ttft-slo are for request rates (--qps), not --concurrency")
        closed_loop(api.serve_concurrency(sc, concurrency, sensitivity, acceptance_samples=samples), as_json)
        return
    r = api.serve(sc, qps, tpot_slo, ttft_slo, sensitivity,
                  slo_percentile=slo_percentile, acceptance_samples=samples)
    if as_json:
        print_json(r)
        return
    spread = spread_on(r)
    if r["points"]:
        print(f"{'qps':>9} {'batch':>7} {'batch sd':>8} {'TPOT ms':>8} {'TPOT sd':>8}{percentile_head(spread)} "
              f"{'ratio':>6} {'TTFT ms':>8} {'TTFT sd':>8} {'E2E s':>7} {'E2E sd':>7}  status")
    for p in r["points"]:
        e2e = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        ratio = _r(p["speedup_tpot"])
        print(f"{p['qps']:>9.4g} {_b(p['batch_base']):>7} {_b(p['batch_sd']):>8} {_ms(p['tpot_base_s']):>8} "
              f"{_ms(p['tpot_sd_s']):>8}{percentile_cells(spread, p)} {ratio:>6} {_ms(p['ttft_base_s']):>8} "
              f"{_ms(p['ttft_sd_s']):>8} {e2e(p['e2e_base_s']):>7} {e2e(p['e2e_sd_s']):>7}  {p['status']}")
    print(f"\nratio = TPOT without / with speculation, each at its own batch; tau = {r['tokens_per_step']:.3f}")
    print_spread(r)
    print(f"largest sustainable rate: {_q(r['max_qps_base'])} req/s without speculation, {_q(r['max_qps_sd'])} "
          "with it")
    st = r["curve_status"]
    said = Curve.of(st).text("over_rate", switch_off_qps=_q(r["switch_off_qps"]),
                             first_crossing_qps=_q(r["first_crossing_qps"]))
    print(f"{said} (status {st}; TPOT ratio {_r(r['speedup_tpot_low_qps'])} as the rate -> 0)")
    if "slo" in r:
        s = r["slo"]
        tpot = "TPOT" if s["tpot_percentile"] is None else f"p{s['tpot_percentile']:g} TPOT"
        what = " and ".join(f"{n} <= {v * 1e3:g} ms" for n, v in ((tpot, s["tpot_s"]), ("TTFT", s["ttft_s"]))
                            if v is not None)
        print(f"largest rate with {what}: {_q(s['max_qps_base'])} req/s without speculation, "
              f"{_q(s['max_qps_sd'])} with it")
    print_elasticities(r, "switch-off rate")
    print_inputs(r["inputs"])


PERCENTILES = ("p50", "p90", "p99")


def spread_on(r):
    """Whether the answer has a spread of acceptance over requests (then TPOT percentiles are printed)."""
    sp = r["acceptance_spread"]
    return sp["samples"] is not None or bool(sp["sigma"])


def percentile_head(on):
    return "".join(f" {p + ' sd':>7}" for p in PERCENTILES) if on else ""


def percentile_cells(on, p):
    return "".join(f" {_ms(p[f'tpot_sd_{q}_s']):>7}" for q in PERCENTILES) if on else ""


def print_spread(r):
    """One line on the spread of acceptance over requests, where there is one."""
    if not spread_on(r):
        return
    sp = r["acceptance_spread"]
    what = (f"{sp['samples']} per-request samples ({sp['samples_file']})" if sp["samples"] is not None
            else f"log-odds spread {sp['sigma']:g} (shift {sp['shift']:+.3f})")
    factors = "/".join(_r(sp[f"tpot_factor_{q}"]) for q in PERCENTILES)
    print(f"acceptance over requests: {what}; tokens per step {_r(sp['tokens_per_step'])} (harmonic mean over "
          f"requests), mean accepted length {_r(sp['mean_accepted_length_over_requests'])}; speculative TPOT "
          f"p50/p90/p99 = {factors} x its mean")


def print_elasticities(r, of):
    """The elasticities of an answer with `--sensitivity` (of its switch-off rate or concurrency), if any."""
    if "elasticities" not in r:
        return
    print(f"\nelasticities of the {of} (% per % change of each input):")
    width = max(map(len, r["elasticities"]), default=0)
    for name, e in r["elasticities"].items():
        print(f"  {name:<{width}} {'-' if e is None else f'{e:.4f}':>9}")


def closed_loop(r, as_json):
    """Print `api.serve_concurrency`'s answer."""
    if as_json:
        print_json(r)
        return
    spread = spread_on(r)
    print(f"{'clients':>7} {'req/s':>7} {'req/s sd':>8} {'batch':>7} {'batch sd':>8} {'TPOT ms':>8} {'TPOT sd':>8}"
          f"{percentile_head(spread)} {'TTFT ms':>8} {'TTFT sd':>8} {'E2E s':>7} {'E2E sd':>7} {'ratio':>6}  status")
    for p in r["points"]:
        e2e = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        ratio = _r(p["ratio_e2e"])
        print(f"{p['concurrency']:>7.4g} {_q(p['request_throughput_base_req_s']):>7} "
              f"{_q(p['request_throughput_sd_req_s']):>8} {_b(p['batch_base']):>7} {_b(p['batch_sd']):>8} "
              f"{_ms(p['tpot_base_s']):>8} {_ms(p['tpot_sd_s']):>8}{percentile_cells(spread, p)} "
              f"{_ms(p['ttft_base_s']):>8} {_ms(p['ttft_sd_s']):>8} {e2e(p['e2e_base_s']):>7} {e2e(p['e2e_sd_s']):>7} "
              f"{ratio:>6}  {p['status']}")
    print(f"\nratio = E2E without / with speculation at equal clients (= output throughput with / without); "
          f"tau = {r['tokens_per_step']:.3f}")
    print_spread(r)
    print(f"batch cap reached at {_q(r['max_concurrency_base'])} clients without speculation "
          f"({_q(r['max_throughput_base_req_s'])} req/s), {_q(r['max_concurrency_sd'])} with it "
          f"({_q(r['max_throughput_sd_req_s'])} req/s); beyond, requests queue for a slot")
    if any(p["prefill_bound_base"] or p["prefill_bound_sd"] for p in r["points"]):
        print("prefill-bound: prompt tokens per iteration exceed --chunk-tokens at some concurrency")
    st = r["curve_status"]
    sentence = Curve.of(st).text("over_clients", switch_off_concurrency=_q(r["switch_off_concurrency"]),
                                 first_crossing_concurrency=_q(r["first_crossing_concurrency"]))
    print(sentence + f" (status {st}; E2E ratio {_r(r['ratio_e2e_one_client'])} at one client)")
    print_elasticities(r, "switch-off concurrency")
    print_inputs(r["inputs"])
