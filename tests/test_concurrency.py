"""Closed-loop concurrency (docs/model.md §11) and prefill as it runs (docs/model.md §3): the mean-field closed loop
against an independent discrete simulation (`reference.closed_loop_sim`), one client by hand, Little's law
on the outputs, the prefill share rising with tau (Amdahl), c_p by hand in its two regimes, TTFT never
below the prompt's compute, a derivative through the closed loop against finite differences, float32,
the switch-off concurrency, and `specjax serve --concurrency`."""

import json
import math
import re

import jax
import jax.numpy as jnp
import pytest

import reference as ref
from specjax import api
from specjax.cli import main
from specjax.cost.prefill import prefill
from specjax.cost.trees import Load
from specjax.inputs.scenario import Scenario
from specjax.search import concurrency as cc
from specjax.search import serving

F64 = jnp.float64
BLOG = dict(target="llama-3-70b", hardware="h100-sxm", drafter="model", draft="qwama-0.5b", tp=4, draft_tp=1, k=4,
            alpha=0.7, engine="vllm", input_len=256, output_len=256, max_num_seqs=256, chunk_tokens=2048)
CLOSED = jax.jit(cc.closed)
ARGS = ["serve", "--target", "llama-3-70b", "--hardware", "h100-sxm", "--drafter", "model", "--draft", "qwama-0.5b",
        "--tp", "4", "--draft-tp", "1", "--k", "4", "--alpha", "0.7", "--engine", "vllm", "--input-len", "256",
        "--output-len", "256", "--max-num-seqs", "256", "--chunk-tokens", "2048"]
CURVE = jax.jit(cc.concurrency_curve, static_argnames=("n_grid", "batched"))

# plain numbers: t_step(B) = a + b B; (L_out - 1) / tau whole so that the simulation's steps are exact
L_IN, L_OUT, C_P = 512.0, 257.0, 3e-5
PLAIN = {1.0: (0.02, 2e-4), 4.0: (0.03, 4e-4)}  # tau -> (a, b)


def load(dtype=F64, **kw):
    v = dict(qps=1.0, input_len=L_IN, output_len=L_OUT, max_num_seqs=256.0, chunk_tokens=2048.0, concurrency=1.0)
    return Load(**{k: jnp.asarray(x, dtype) for k, x in {**v, **kw}.items()})


def plain_side(tau, n, cap=256.0, c_p=C_P, dtype=F64):
    a, b = PLAIN[tau]
    d = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return cc.side(lambda x: a + b * x, d(tau), d(c_p), load(dtype), d(cap), d(n), cc.solve_steps(dtype))


@pytest.mark.parametrize("tau", [1.0, 4.0])
@pytest.mark.parametrize("n", [1, 4, 16, 64])
def test_closed_loop_agrees_with_the_simulation(tau, n):
    a, b = PLAIN[tau]
    sim = ref.closed_loop_sim(lambda x: a + b * x, tau, C_P, L_IN, L_OUT, n)
    s = plain_side(tau, n)
    assert not bool(s.queued) and not bool(s.prefill_bound)
    for key in ("throughput_req_s", "tpot_s", "e2e_s"):
        assert float(getattr(s, key)) == pytest.approx(sim[key], rel=0.02), key
    for key in ("batch", "prompt_tokens_per_iter"):
        assert float(getattr(s, key)) == pytest.approx(sim[key], rel=0.025), key
    # TTFT is a mean field too (the iteration carrying a prompt is counted at the mean share of the others')
    assert float(s.ttft_s) == pytest.approx(sim["ttft_s"], rel=0.12)
    if n == 1:  # one client: nothing shared, exact
        assert float(s.ttft_s) == pytest.approx(sim["ttft_s"], rel=1e-12)
        assert float(s.tpot_s) == pytest.approx(sim["tpot_s"], rel=1e-12)


@pytest.mark.parametrize("tau", [1.0, 4.0])
def test_clients_beyond_the_cap_queue(tau):
    a, b = PLAIN[tau]
    sim = ref.closed_loop_sim(lambda x: a + b * x, tau, C_P, L_IN, L_OUT, 40, cap=16, lifetimes=80)
    s = plain_side(tau, 40, cap=16.0)
    assert bool(s.queued) and float(s.batch) == 16.0
    for key in ("throughput_req_s", "tpot_s", "e2e_s", "ttft_s"):
        assert float(getattr(s, key)) == pytest.approx(sim[key], rel=0.025), key
    # the engine runs at its cap: X = X(B_cap), and the excess clients' wait is in TTFT
    x_cap = 16.0 / ((L_OUT / tau) * (a + b * 16.0) + 16.0 * L_IN * C_P * 39 / 40)
    assert float(s.throughput_req_s) == pytest.approx(x_cap, rel=1e-12)
    admitted = plain_side(tau, 40, cap=1e6)
    assert float(s.queue_s) > 0 and float(s.e2e_s) == pytest.approx(40.0 / x_cap, rel=1e-12)
    assert float(s.ttft_s) - float(s.queue_s) < float(admitted.ttft_s)  # at the cap the batch is smaller


def test_one_client_is_the_single_request_latency():
    hw, dep, tgt, dr, dec = Scenario(**BLOG).build(F64)
    m = serving.sides(hw, dep, tgt, dr, dec)
    c = CLOSED(hw, dep, tgt, dr, dec, F64(1.0))
    t1 = [float(x) for x in m.t_of(jnp.ones(2, F64))]
    for i, side in enumerate((c.base, c.sd)):
        tau, c_p = float(m.tau[i]), float(m.c_p[i])
        ttft = math.ceil(256 / 2048) * t1[i] + 256 * c_p  # no wait, no sharing: its own pass and prefill
        tpot = t1[i] / tau
        e2e = ttft + 255 * tpot
        assert float(side.ttft_s) == pytest.approx(ttft, rel=1e-9)
        assert float(side.tpot_s) == pytest.approx(tpot, rel=1e-9)
        assert float(side.e2e_s) == pytest.approx(e2e, rel=1e-9)
        assert float(side.throughput_req_s) == pytest.approx(1.0 / e2e, rel=1e-9)
        assert float(side.batch) < 1.0 and not bool(side.queued)


@pytest.mark.parametrize("n", [2.0, 16.0, 100.0, 1000.0])
def test_littles_law_on_the_outputs(n):
    hw, dep, tgt, dr, dec = Scenario(**{**BLOG, "max_num_seqs": 128}).build(F64)
    c = CLOSED(hw, dep, tgt, dr, dec, F64(n))
    tau = (1.0, float(c.tokens_per_step))
    for side, t in zip((c.base, c.sd), tau):
        x, it = float(side.throughput_req_s), float(side.iteration_s)
        assert x * float(side.e2e_s) == pytest.approx(n, rel=1e-9)  # N = X E2E
        assert float(side.batch) == pytest.approx(x * 256 / t * it, rel=1e-9)  # B = X (L_out / tau) T
        assert float(side.prompt_tokens_per_iter) == pytest.approx(x * 256 * it, rel=1e-12)
        assert float(side.throughput_tok_s) == pytest.approx(x * 256, rel=1e-12)
        assert float(side.tpot_s) == pytest.approx((float(side.e2e_s) - float(side.ttft_s)) / 255, rel=1e-9)
        assert float(side.tpot_s) == pytest.approx(it / t, rel=1e-9)
        assert bool(side.queued) == (n == 1000.0)
    assert float(c.ratio_e2e) == pytest.approx(float(c.sd.throughput_req_s) / float(c.base.throughput_req_s),
                                               rel=1e-9)


def test_prefill_bounds_the_speedup_as_amdahl_does():
    """At the cap (many clients) each iteration carries B tau L_in / L_out prompt tokens: tau times more
    with speculation, so its prefill share rises with tau and the throughput gain stays below the bound
    (L_out t + B L_in c) / (B L_in c) that an infinitely fast decode would reach."""
    a, b, cap, n = 0.02, 2e-4, 64.0, 2e4
    t = a + b * cap
    c_sh = C_P * (n - 1) / n
    shares, x = [], {}
    for tau in (1.0, 2.0, 4.0, 8.0, 1024.0):
        s = cc.side(lambda v: a + b * v, F64(tau), F64(C_P), load(), F64(cap), F64(n), 60)
        assert bool(s.queued)
        p = cap * tau * L_IN / L_OUT  # by hand: X T = B tau / L_out
        assert float(s.prompt_tokens_per_iter) == pytest.approx(p, rel=1e-12)
        it = t + p * c_sh
        assert float(s.iteration_s) == pytest.approx(it, rel=1e-12)
        shares.append(p * c_sh / it)
        x[tau] = cap / (L_OUT / tau * t + cap * L_IN * c_sh)
        assert float(s.throughput_req_s) == pytest.approx(x[tau], rel=1e-12)
    assert all(s1 < s2 for s1, s2 in zip(shares, shares[1:]))
    bound = (L_OUT * t + cap * L_IN * c_sh) / (cap * L_IN * c_sh)
    gains = [x[tau] / x[1.0] for tau in (2.0, 4.0, 8.0, 1024.0)]
    assert gains == sorted(gains) and gains[-1] < bound and gains[-1] > 0.98 * bound
    assert gains[0] < 2.0  # tau = 2 doubles decode but not prefill


def test_c_p_by_hand_in_both_regimes():
    hw, dep, tgt, dr, dec = Scenario(**{**BLOG, "engine": "roofline", "input_len": 2048}).build(F64)
    t = ref.as_floats(tgt)
    lay = ref.layout_of(4.0)
    kv = t["kv_elems_per_tok"] * t["b_kv"]
    for l_in, eta_p in ((2048.0, 1.0), (2048.0, 0.5), (4.0, 1.0), (4.0, 0.5)):
        ld = dec.load.replace(input_len=F64(l_in))
        h = hw.replace(prefill_efficiency=F64(eta_p))
        # FLOPs of one prompt token per GPU: 2 P_active + attention over half the prompt, over tp = 4
        flops = (2 * (t["p_dense"] + t["p_head"]) + t["n_full_layers"] * t["attn_flops_per_ctx"] * l_in / 2) / 4
        # bytes of a chunk of min(L_in, 2048) tokens per GPU: weights, and the KV it reads and writes
        n_c = min(l_in, 2048.0)
        nbytes = ((t["p_dense"] * t["b_dense"] + t["p_head"] * t["b_head"]) / 4
                  + t["n_full_layers"] * (kv * l_in / 2 + n_c * kv) / min(4.0, t["kv_heads"]))
        t_math = flops / (float(hw.flops_per_s) * eta_p)
        t_mem = nbytes / n_c / float(hw.hbm_bytes_per_s)
        got = prefill(h, dep, tgt, ld)
        assert float(got.t_math_s) == pytest.approx(t_math, rel=1e-9)
        assert float(got.t_mem_s) == pytest.approx(t_mem, rel=1e-9)
        assert float(got.c_p_s) == pytest.approx(max(t_math, t_mem), rel=1e-12)
        assert float(got.c_p_s) == pytest.approx(ref.prefill_per_token(t, {**ref.as_floats(h)}, l_in, lay), rel=1e-9)
        assert bool(got.compute_bound) == (l_in == 2048.0)  # a 4-token prompt reads all weights for 4 tokens
        # a prompt token also moves its activations outside the GEMMs (docs/model.md §2.7), replicated over tp
        ha = h.replace(activation_traffic=F64(25.0))
        t_tok = t["n_layers"] * 25.0 * t["d_model"] * 2 / float(hw.hbm_bytes_per_s)
        assert float(prefill(ha, dep, tgt, ld).c_p_s) == pytest.approx(max(t_math, t_mem) + t_tok, rel=1e-12)
        assert float(prefill(ha, dep, tgt, ld).c_p_s) == pytest.approx(
            ref.prefill_per_token(t, {**ref.as_floats(ha)}, l_in, lay), rel=1e-9)
    none = prefill(hw, dep, tgt.zeros(F64), dec.load)  # a drafter without weights prefills nothing
    assert float(none.c_p_s) == 0.0


def test_ttft_is_never_below_the_prompt_compute():
    """A 2k-token prompt on Qwen3-235B: TTFT covers its prefill FLOPs, open and closed loop alike."""
    sc = Scenario(target="qwen3-235b-a22b", hardware="h100-sxm", drafter="ngram", alpha=0.6, k=3, tp=8,
                  input_len=2048, output_len=256)
    hw, dep, tgt, dr, dec = sc.build(F64)
    t = ref.as_floats(tgt)
    flops = 2 * (t["p_dense"] + t["p_head"] + t["n_moe_layers"] * t["top_k"] * t["p_expert"]) * 2048 / 8
    compute = flops / float(hw.flops_per_s)  # its GEMMs alone at peak
    served = serving.serve(hw, dep, tgt, dr, dec, F64(1e-3))
    closed = CLOSED(hw, dep, tgt, dr, dec, F64(1.0))
    for side in (served.base, served.sd, closed.base, closed.sd):
        assert float(side.ttft_s) > compute
    m = serving.sides(hw, dep, tgt, dr, dec)
    assert float(closed.base.ttft_s) == pytest.approx(float(m.t_of(jnp.ones(2, F64))[0]) + 2048 * float(m.c_p[0]),
                                                      rel=1e-9)


def test_derivatives_through_the_closed_loop_match_finite_differences():
    hw, dep, tgt, dr, dec = Scenario(**BLOG).build(F64)

    def f(h, d, n):
        c = CLOSED(h, dep, tgt, dr, d, n)
        return jnp.stack([c.sd.throughput_req_s, c.base.ttft_s, c.ratio_e2e])

    def moved(x):  # the three inputs at once: x = (hbm_bytes_per_s, alpha, prefill_efficiency)
        return hw.replace(hbm_bytes_per_s=x[0], prefill_efficiency=x[2]), dec.replace(alpha=x[1])

    names = ("hbm_bytes_per_s", "alpha", "prefill_efficiency")
    x0 = jnp.asarray([float(hw.hbm_bytes_per_s), float(dec.alpha), float(hw.prefill_efficiency)], F64)
    n = F64(24.0)
    # all three outputs by all three inputs in one forward pass (one compile instead of one per input); each
    # column is the derivative along one input with the others held, as a central difference moves one input
    g = jax.jit(jax.jacfwd(lambda x: f(*moved(x), n)))(x0)
    y0 = f(*moved(x0), n)
    for j, name in enumerate(names):
        e = 1e-5 * float(x0[j])
        step_j = jnp.zeros(3, F64).at[j].set(e)
        fd = (f(*moved(x0 + step_j), n) - f(*moved(x0 - step_j), n)) / (2 * e)
        for out in range(3):
            assert float(g[out, j]) == pytest.approx(float(fd[out]), rel=1e-4,
                                                     abs=1e-12 * abs(float(y0[out])) / float(x0[j])), (name, out)
    dn = jax.jit(jax.grad(lambda v: cc.closed(hw, dep, tgt, dr, dec, v).sd.batch))(n)  # the concurrency itself
    fd = (float(CLOSED(hw, dep, tgt, dr, dec, F64(24.01)).sd.batch)
          - float(CLOSED(hw, dep, tgt, dr, dec, F64(23.99)).sd.batch)) / 0.02
    assert float(dn) == pytest.approx(fd, rel=1e-4)


def test_float32_vmap_and_switch_off_concurrency():
    ns = [1.0, 8.0, 64.0, 400.0]
    trees64 = Scenario(**BLOG).build(F64)
    trees32 = Scenario(**BLOG).build(jnp.float32)
    per = jax.jit(jax.vmap(cc.closed, in_axes=(None,) * 5 + (0,)))(*trees32, jnp.asarray(ns, jnp.float32))
    assert per.sd.tpot_s.dtype == jnp.float32 and per.sd.tpot_s.shape == (4,)
    for i, n in enumerate(ns):
        want = CLOSED(*trees64, F64(n))
        for key in ("throughput_req_s", "tpot_s", "ttft_s", "batch"):
            assert float(getattr(per.sd, key)[i]) == pytest.approx(float(getattr(want.sd, key)), rel=2e-4), key
    curve = CURVE(*trees64, batched=True)
    off = float(curve.switch_off_concurrency)
    assert 1.0 < off < float(curve.max_concurrency_base)
    below, above = CLOSED(*trees64, F64(off * 0.99)), CLOSED(*trees64, F64(off * 1.01))
    assert float(below.ratio_e2e) > 1.0 > float(above.ratio_e2e)
    assert float(curve.ratio_e2e_one_client) == pytest.approx(float(CLOSED(*trees64, F64(1.0)).ratio_e2e), rel=1e-9)
    n_cap = float(curve.max_concurrency_base)  # the batch reaches its cap there
    assert not bool(CLOSED(*trees64, F64(n_cap * 0.99)).base.queued)
    assert bool(CLOSED(*trees64, F64(n_cap * 1.01)).base.queued)


def test_switch_off_sensitivity_matches_finite_differences(capsys, monkeypatch):
    """Elasticities of the switch-off concurrency (implicit function theorem at the root of the E2E ratio)
    against central differences of the switch-off concurrency the search finds at moved inputs; none where
    speculation never stops lowering E2E (a batch cap of 16: both sides queue, and at capacity it still
    pays). Through the API and the command line in float64 (one compile for both)."""
    r = api.serve_concurrency(Scenario(**BLOG), [64], sensitivity=True, dtype=F64)
    off = r["switch_off_concurrency"]
    assert 100.0 < off < r["max_concurrency_base"] and r["curve_status"] == "stops_paying"  # ~124 clients
    hw, dep, tgt, dr, dec = Scenario(**BLOG).build(F64)
    trees = dict(hw=hw, op=dec, load=dec.load)
    for name, tree, field in (("alpha", "op", "alpha"), ("hbm_bytes_per_s", "hw", "hbm_bytes_per_s"),
                              ("flops_per_s", "hw", "flops_per_s"), ("output_len", "load", "output_len")):
        def moved(x):
            t = trees[tree].replace(**{field: F64(x)})
            h, d = (t, dec) if tree == "hw" else (hw, t if tree == "op" else dec.replace(load=t))
            return float(CURVE(h, dep, tgt, dr, d, batched=True).switch_off_concurrency)

        x0 = float(getattr(trees[tree], field))
        e = 1e-4 * x0
        fd = (moved(x0 + e) - moved(x0 - e)) / (2 * e)
        assert r["derivatives"][name] == pytest.approx(fd, rel=1e-5), name  # ~1e-8 here
        assert r["elasticities"][name] == pytest.approx(fd * x0 / off, rel=1e-5), name
    assert list(r["elasticities"])[0] == "alpha" and "context" not in r["elasticities"]  # the lengths set it
    never = api.serve_concurrency(Scenario(**{**BLOG, "max_num_seqs": 16}), [64], sensitivity=True, dtype=F64)
    assert never["switch_off_concurrency"] is None and never["curve_status"] == "helps_throughout"
    assert set(never["elasticities"]) == set(r["elasticities"]) and not any(never["elasticities"].values())
    assert not any(never["derivatives"].values())
    real = api.serve_concurrency  # the command line on the compile above: in float64
    monkeypatch.setattr(api, "serve_concurrency", lambda sc, n, sensitivity=False, **kw: real(sc, n, sensitivity, F64,
                                                                                           **kw))
    with pytest.raises(SystemExit) as e:
        main(ARGS + ["--concurrency", "64", "--sensitivity", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert e.value.code == 0 and out["elasticities"] == pytest.approx(r["elasticities"], rel=1e-12)
    assert out["derivatives"] == pytest.approx(r["derivatives"], rel=1e-12)
    with pytest.raises(SystemExit) as e:
        main(ARGS + ["--concurrency", "64", "--sensitivity"])
    text = capsys.readouterr().out
    assert e.value.code == 0 and "elasticities of the switch-off concurrency (% per % change" in text
    assert re.search(rf"\n  alpha +{r['elasticities']['alpha']:.4f}\n", text), text


def test_api_and_cli_concurrency(capsys):
    r = api.serve_concurrency(Scenario(**BLOG), [1, 64, 1000])
    p = r["points"]
    keys = {"concurrency", "request_throughput_base_req_s", "request_throughput_sd_req_s", "batch_base", "batch_sd",
            "prompt_tokens_per_iter_base", "itl_sd_s", "tpot_base_s", "tpot_sd_s", "ttft_base_s", "ttft_sd_s",
            "e2e_base_s", "e2e_sd_s", "throughput_base_tok_s", "throughput_sd_tok_s", "queue_sd_s", "speedup_tpot",
            "ratio_e2e", "status_base", "status_sd", "status", "prefill_bound_sd"}
    assert keys <= set(p[0])
    assert [q["status"] for q in p] == ["ok", "ok", "both_queued"] and p[2]["status_sd"] == "queued"
    assert p[0]["request_throughput_sd_req_s"] * p[0]["e2e_sd_s"] == pytest.approx(1.0, rel=1e-5)
    assert {"switch_off_concurrency", "max_concurrency_base", "max_throughput_sd_req_s", "curve_status"} <= set(r)
    assert r["curve_status"] == "stops_paying" and r["inputs"]["input_len"] == 256
    args = ARGS + ["--concurrency", "1", "--concurrency", "64", "--concurrency", "1000"]
    with pytest.raises(SystemExit) as e:
        main(args + ["--json"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["points"][1]["tpot_sd_s"] == pytest.approx(p[1]["tpot_sd_s"], rel=1e-6)
    assert out["switch_off_concurrency"] == pytest.approx(r["switch_off_concurrency"], rel=1e-6)
    with pytest.raises(SystemExit) as e:
        main(args)
    text = capsys.readouterr().out
    assert e.value.code == 0 and "switch-off concurrency" in text and "both_queued" in text
    assert "elasticities" not in out and "elasticities" not in text
    for extra, msg in ((["--qps", "1"], "give --qps (an open loop) or --concurrency (a closed loop), not both"),
                       (["--concurrency", "0"], "concurrency=0.0; expected an integer 1 <= concurrency <= 1e8"),
                       (["--concurrency", "2.5"], "concurrency=2.5"),
                       (["--tpot-slo", "0.1"], "are for request rates (--qps), not --concurrency")):
        with pytest.raises(SystemExit) as e:
            main(args + extra)
        err = capsys.readouterr().err
        assert e.value.code == 2 and msg in err and len(err.strip().splitlines()) == 1, err


def test_concurrency_figure_draws_what_the_api_says(tmp_path, capsys):
    """`plot serving --x concurrency`: TPOT and output throughput over N per side, the switch-off concurrency and
    the batch caps of `api.serve_concurrency` (the closed loop's own search, whatever the plotted grid)."""
    from specjax.outputs import curves, plots

    scs = {f"alpha={a}": Scenario(**{**BLOG, "alpha": a}) for a in (0.6, 0.7)}
    df, marks = curves.concurrency_grid(scs, points=3)  # 3 client counts: the compiled shapes of the test above
    fig, data = plots.concurrency_figure(df, marks)
    want = api.serve_concurrency(Scenario(**BLOG), [1, 64, 1000])  # the shapes of test_api_and_cli_concurrency
    m = marks["alpha=0.7"]
    for key in ("switch_off_concurrency", "max_concurrency_base", "max_concurrency_sd"):
        assert m[key] == pytest.approx(want[key], rel=1e-5), key
    assert marks["alpha=0.6"]["switch_off_concurrency"] < m["switch_off_concurrency"]
    assert data.height == 2 and df.height == 6 and df["concurrency"].max() >= m["max_concurrency_base"]
    one = df.filter((df["label"] == "alpha=0.7") & (df["concurrency"] == 1.0)).row(0, named=True)
    assert one["tpot_sd_s"] == pytest.approx(want["points"][0]["tpot_sd_s"], rel=1e-5)
    assert one["throughput_sd_tok_s"] == pytest.approx(want["points"][0]["throughput_sd_tok_s"], rel=1e-5)
    assert set(df.filter(df["concurrency"] > m["max_concurrency_sd"] * 1.01)["status_sd"]) == {"queued"}
    assert len(plots.save(fig, tmp_path / "closed")) == 2
    plot = ["plot", "serving", *ARGS[1:], "--out", str(tmp_path / "cli")]
    for bad, msg in ((["--x", "batch"], "x='batch'; plot serving takes --x qps or concurrency"),
                     (["--y", "qps"], "y='qps'; plot serving takes")):
        with pytest.raises(SystemExit) as e:
            main(plot + bad)
        err = capsys.readouterr().err
        assert e.value.code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "cli.png").exists()


SPEC = """
name = "closed_tiny"
hardware = ["h100-sxm"]
engine = "vllm"
[[pairs]]
target = "llama-3-70b"
drafter = "model"
draft = "qwama-0.5b"
tp = 4
draft_tp = 1
[fixed]
k = 4
alpha = 0.7
input_len = 256
output_len = 256
max_num_seqs = 256
chunk_tokens = 2048
{extra}
[axes]
{axes}
[reduce]
kind = "serve_concurrency"
"""


def test_serve_concurrency_sweep_matches_the_api(tmp_path):
    from specjax.engine import sweep
    from specjax.errors import SpecError
    from specjax.inputs import spec
    from specjax.outputs import io

    sweep.run(spec.from_text(SPEC.format(extra="", axes="concurrency = [1, 64, 1000]"), "c.toml"), tmp_path / "a")
    df = io.read_results(tmp_path / "a").collect().sort("concurrency_reqs")
    want = api.serve_concurrency(Scenario(**BLOG), [1, 64, 1000])["points"]
    assert df.height == 3 and df["status"].to_list() == [p["status"] for p in want]
    for row, p in zip(df.iter_rows(named=True), want):
        for key in ("request_throughput_sd_req_s", "batch_base", "tpot_sd_s", "ttft_base_s", "queue_sd_s",
                    "ratio_e2e"):
            assert row[key] == pytest.approx(p[key], rel=1e-5, abs=1e-9), key
    with pytest.raises(SpecError, match="give concurrency in"):
        spec.from_text(SPEC.format(extra="", axes="output_len = [128]").replace("output_len = 256\n", ""), "c.toml")


def test_closed_loop_reports_tpot_percentiles_over_requests(capsys):
    """Acceptance that varies by request (docs/model.md §10.1) in the closed loop: each request's TPOT is the
    iteration over its own tau there too; 100k simulated requests (tests/reference.py) at the kernel's iteration
    give its percentiles within 1%. (Here because this file compiles the closed loop's program anyway.)"""
    from specjax.cost.spread import PERCENTILES

    r = api.serve_concurrency(Scenario(**BLOG, acceptance_spread=0.8), [1, 64, 1000])
    sp = r["acceptance_spread"]
    for p in r["points"]:
        assert p["tpot_sd_p99_s"] == pytest.approx(p["tpot_sd_s"] * sp["tpot_factor_p99"], rel=1e-6)
    sim = ref.request_tpot_simulation(r["points"][1]["itl_sd_s"], (0.7,), 4, 0.8)
    assert [r["points"][1][f"tpot_sd_p{x:g}_s"] for x in PERCENTILES] == pytest.approx(list(sim["percentiles"]),
                                                                                       rel=1e-2)
    with pytest.raises(SystemExit) as e:
        main(ARGS + ["--acceptance-spread", "0.8", "--concurrency", "1", "--concurrency", "64", "--concurrency",
                     "1000"])
    text = capsys.readouterr().out
    assert e.value.code == 0 and "log-odds spread 0.8 (shift" in text and " p90 sd " in text
