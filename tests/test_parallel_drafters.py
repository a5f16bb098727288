"""Parallel drafters (docs/model.md §5.1: PARD, P-EAGLE, DFlash): p passes over B x k tokens, by hand, against the
plain-Python reference, k = 1 against the chain drafter of the same model, where the switch-off batch moves,
gradients, DFlash configs as --draft, and the inputs every entry point reads (CLI, optimize, sweeps, CSVs)."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from specjax.cost.roofline import pass_cost
from specjax.cost.speculative import step
from specjax.errors import SpecError
from specjax.inputs import models
from specjax.inputs.scenario import Scenario

F64 = jnp.float64
PARD = dict(target="llama-3.1-8b", hardware="h200", drafter="parallel", draft="pard-llama-3.2-1b")
CHAIN = dict(target="llama-3.1-8b", hardware="h200", drafter="model", draft="llama-3.2-1b")


@pytest.fixture(autouse=True)
def _strict(strict_promotion):
    """Every kernel test runs under strict dtype promotion."""


def test_one_pass_over_b_times_k_tokens_by_hand():
    """Pure roofline, one roofline per pass, batch 2, k = 4, no context: the draft is one pass of the 1B model
    over 8 tokens: max(2 n P / F, (P b_w + n kv_write) / W), P = dense + head params (the tied embedding is
    the head). T_sd = that + T_target(2, 5)."""
    sc = Scenario(**PARD, k=4, alpha=0.7, batch=2, context=0.0, engine="roofline", roofline="pass")
    hw, dep, tgt, dr, dec = sc.build(F64)
    r = step(hw, dep, tgt, dr, dec)
    a = models.load_architecture("pard-llama-3.2-1b")
    n, params = 2 * 4, a.p_dense + a.p_head
    kv_write = n * a.n_layers * a.kv_elems_per_tok * 2  # bf16 K and V of the 8 new tokens
    flops_t, bytes_t = 2 * n * params / float(hw.flops_per_s), (params * 2 + kv_write) / float(hw.hbm_bytes_per_s)
    assert float(r.t_draft_s) == pytest.approx(max(flops_t, bytes_t), rel=1e-12)
    assert bytes_t > flops_t  # batch 2: still the weights' read
    assert float(r.t_sd_step_s) == pytest.approx(float(r.t_draft_s) + float(r.t_verify_s), rel=1e-12)
    # the chain of the same model: four passes over 2 tokens, each reading the weights again
    chain = step(*Scenario(**CHAIN, k=4, alpha=0.7, batch=2, context=0.0, engine="roofline",
                           roofline="pass").build(F64))
    assert float(chain.t_sd_step_s - chain.t_verify_s) == pytest.approx(4 * float(r.t_draft_s), rel=1e-3)


@pytest.mark.parametrize("passes", [1, 3])
def test_passes_and_the_per_pass_overhead(passes):
    """With an engine profile: T_sd = p (T_draft(B, k) + T_draft_fixed) + T_target(B, k+1) + T_step_fixed."""
    sc = Scenario(**PARD, k=5, alpha=0.8, batch=16, context=4096.0, engine="vllm", draft_passes=passes)
    hw, dep, tgt, dr, dec = sc.build(F64)
    r = step(hw, dep, tgt, dr, dec)
    one = float(pass_cost(hw, dep.drafter(), dr, F64(16), F64(5), F64(4096)).t_s) + float(hw.draft_overhead_s)
    assert float(hw.draft_overhead_s) > 0 and float(hw.step_overhead_s) > 0
    assert float(r.t_draft_s) == pytest.approx(one, rel=1e-12)
    assert float(r.t_sd_step_s) == pytest.approx(passes * one + float(r.t_verify_s) + float(hw.step_overhead_s),
                                                 rel=1e-12)


@pytest.mark.parametrize("case", range(8))
def test_kernel_matches_reference(case):
    rng = np.random.default_rng(100 + case)
    target, draft = [("llama-3.1-8b", "pard-llama-3.2-1b"), ("qwen3-8b", "dflash-qwen3-8b"),
                     ("llama-3.1-8b", "dflash-llama-3.1-8b"), ("qwen3-8b", "eagle3-qwen3-8b")][case % 4]
    k, passes = int(rng.integers(1, 16)), int(rng.integers(1, 5))
    acc = dict(acceptance_vector=tuple(rng.uniform(0.3, 0.95, 3))) if case % 2 else \
        dict(alpha=float(rng.uniform(0.3, 0.9)))
    sc = Scenario(target=target, hardware="h200", drafter="parallel", draft=draft, k=k, draft_passes=passes,
                  batch=float(rng.integers(1, 300)), context=float(rng.uniform(100, 20000)),
                  engine=("vllm", "sglang", "roofline")[case % 3], **acc)
    hw, dep, tgt, dr, dec = sc.build(F64)
    r = step(hw, dep, tgt, dr, dec)
    want = ref.speedup(ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(dr), sc.batch, k, sc.resolved_alpha(),
                       sc.context, rates=sc.rates(), passes=passes)
    assert float(r.speedup) == pytest.approx(want, rel=1e-11)


@pytest.mark.parametrize("pair", [("pard-llama-3.2-1b", "model", "llama-3.2-1b"),
                                  ("eagle3-llama-3.1-8b", "eagle", "eagle3-llama-3.1-8b")])
def test_k_1_is_the_chain_drafter_of_the_same_model(pair):
    par, kind, chain = pair
    for batch, ctx in ((1.0, 512.0), (96.0, 8192.0)):
        kw = dict(target="llama-3.1-8b", hardware="h200", k=1, alpha=0.75, batch=batch, context=ctx, engine="vllm")
        a = step(*Scenario(drafter="parallel", draft=par, **kw).build(F64))
        b = step(*Scenario(drafter=kind, draft=chain, **kw).build(F64))
        for name in a._fields:
            assert float(getattr(a, name)) == pytest.approx(float(getattr(b, name)), rel=1e-12), name


_step = jax.jit(step)


def _b_off(sc, lo=1.0, hi=4096.0):
    """The batch where S falls through 1 (S decreases on [lo, hi] here), by bisection on the step kernel."""
    hw, dep, tgt, dr, dec = sc.build(F64)
    s = lambda b: float(_step(hw, dep, tgt, dr, dec.replace(batch=F64(b))).speedup)  # noqa: E731
    assert s(lo) > 1 > s(hi)
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if s(mid) > 1 else (lo, mid)
    return lo


def test_switch_off_batch_against_the_chain_twin():
    """The same 1B draft model, chain (k passes over B tokens) or parallel (p passes over B x k), equal acceptance,
    short context (the weights and FLOPs, not the KV, decide). Batch 1 is memory-bound: one parallel pass reads
    the weights once, the chain k times, so its draft costs k / p times less. At large batch both are
    compute-bound over the same B x k tokens: the ratio falls to about 1 (the chain still reads its KV k times),
    so p = 1 keeps a higher switch-off batch than the chain and p = 4 (DFlash-like denoising passes) pays more
    at batch 1 but stops paying at a smaller batch."""
    kw = dict(k=8, alpha=0.9, context=128.0, engine="roofline")
    chain = Scenario(**CHAIN, **kw)

    def draft_time(sc, batch):
        hw, dep, tgt, dr, dec = sc.build(F64)
        r = _step(hw, dep, tgt, dr, dec.replace(batch=F64(batch)))
        return float(r.t_sd_step_s - r.t_verify_s), float(r.speedup)

    for p in (1, 4):
        par = Scenario(**PARD, draft_passes=p, **kw)
        (c1, s_c1), (p1, s_p1) = draft_time(chain, 1.0), draft_time(par, 1.0)
        assert c1 / p1 == pytest.approx(8 / p, rel=0.01) and s_p1 > s_c1
        big = draft_time(chain, 4096.0)[0] / draft_time(par, 4096.0)[0]
        assert 1.0 / p < big < 1.5 / p
    b_chain, b_par1 = _b_off(chain), _b_off(Scenario(**PARD, **kw))
    b_par4 = _b_off(Scenario(**PARD, draft_passes=4, **kw))
    assert b_par1 > b_chain * 1.1 and b_par4 < b_chain * 0.9  # measured 137, 120, 95
    assert 64 < b_chain < 256  # the crossing lies where the 1B draft passes over B x 8 tokens are compute-bound


def test_gradients_finite_and_match_differences():
    sc = Scenario(target="qwen3-8b", hardware="h200", drafter="parallel", draft="dflash-qwen3-8b", k=7, alpha=0.8,
                  batch=64, context=2048.0, engine="vllm", draft_passes=2)
    hw, dep, tgt, dr, dec = sc.build(F64)

    def s(x):
        return step(hw.replace(hbm_efficiency=x[0], draft_overhead_s=x[1]), dep, tgt, dr,
                    dec.replace(alpha=x[2], batch=x[3], k=x[4], draft_passes=x[5])).speedup

    x = jnp.asarray([float(hw.hbm_efficiency), float(hw.draft_overhead_s), 0.8, 64.0, 7.0, 2.0], F64)
    g = np.asarray(jax.grad(s)(x))
    assert np.all(np.isfinite(g)) and g[5] < 0 and g[2] > 0
    for i in range(6):
        h = 1e-6 * max(abs(float(x[i])), 1e-3)
        fd = (float(s(x.at[i].add(h))) - float(s(x.at[i].add(-h)))) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-4, abs=1e-9), i


def test_dflash_config_as_draft(tmp_path):
    """DFlash's config.json: the fc over the tapped target layers, its own layers and KV, the target's LM head
    (read, not stored); block_size at the top level or in dflash_config; a path works as the slug does."""
    a = models.load_architecture("dflash-llama-3.1-8b")
    assert (a.block_size, a.dflash_features) == (10, 5) and a.p_extra_read == 5 * 4096 * 4096
    tgt = models.load_architecture("llama-3.1-8b")
    m = models.dflash_head(a, tgt)
    assert float(m.p_head) == 128256 * 4096 and float(m.head_resident) == 0.0 and float(m.p_stored) == 0.0
    per_layer = 4096 * (32 + 2 * 8) * 128 + 32 * 128 * 4096 + 3 * 4096 * 12288
    assert float(m.total_params) == 5 * per_layer + 5 * 4096 * 4096
    cfg = json.loads((models.PRESET_DIR / "dflash-qwen3-8b.json").read_text())
    cfg.pop("_specjax")
    cfg["dflash_config"] = {"block_size": cfg.pop("block_size"), "target_layer_ids": [1, 9, 17, 25, 33],
                            "mask_token_id": 151669}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    kw = dict(target="qwen3-8b", hardware="h200", drafter="parallel", k=15, accepted_length=6.5, batch=8)
    assert float(step(*Scenario(draft=str(p), **kw).build(F64)).speedup) == \
        float(step(*Scenario(draft="dflash-qwen3-8b", **kw).build(F64)).speedup)
    cfg["dflash_config"]["target_layer_ids"] = "1,9"
    p.write_text(json.dumps(cfg))
    with pytest.raises(SpecError, match="target_layer_ids"):
        models.load_architecture(p)


@pytest.mark.parametrize("kw, message", [
    (dict(drafter="model", draft="dflash-llama-3.1-8b"), "expected drafter=parallel"),
    (dict(drafter="eagle", draft="eagle3-llama-3.1-8b", draft_passes=2), "draft_passes=2 is for a parallel drafter"),
    (dict(drafter="parallel", draft="pard-llama-3.2-1b", draft_passes=0), "1 <= draft_passes <= 64"),
    (dict(drafter="parallel", draft="pard-llama-3.2-1b", tree_topk=2, tree_tokens=5), "needs a chain drafter"),
    (dict(drafter="parallel", draft="eagle3-qwen3-8b"), "EAGLE head with hidden_size 3072"),
    (dict(drafter="parallel"), "needs a draft model"),
    # a DFlash block of 10 tokens holds the last verified token and 9 drafts (the Llama drafter's block_size)
    (dict(drafter="parallel", draft="dflash-llama-3.1-8b", k=10), "k=10; expected 1 <= k <= 9: the DFlash drafter"),
])
def test_bad_input_is_one_line(kw, message):
    kw = {"k": 3, **kw}
    with pytest.raises(SpecError) as e:
        Scenario(target="llama-3.2-3b" if kw.get("draft") == "eagle3-qwen3-8b" else "llama-3.1-8b",
                 hardware="h200", alpha=0.7, **kw).check()
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_optimize_searches_the_block_size():
    from specjax import api
    from specjax.search import optimize
    sc = Scenario(target="qwen3-8b", hardware="h200", drafter="parallel", draft="dflash-qwen3-8b", k=15, alpha=0.85,
                  context=1024.0, engine="vllm")
    hw, dep, tgt, dr, dec = sc.build()
    both = jax.jit(jax.vmap(lambda b: (optimize.search(hw, dep, tgt, dr, dec.replace(batch=b)).k_star,
                                       optimize.brute_force(hw, dep, tgt, dr, dec.replace(batch=b))[0])))
    got, want = both(jnp.asarray([1.0, 128.0], dec.batch.dtype))
    ks = [float(k) for k in got]
    assert ks == [float(k) for k in want]  # the gradient search over the block size finds the brute-force k*
    assert ks[0] > ks[1] >= 1  # long blocks at batch 1, shorter ones once the block's pass costs compute
    with pytest.raises(SpecError, match="chain drafter"):
        api.optimize_trees(sc, [1.0])


def test_cli_point_takes_draft_passes(capsys):
    from specjax.cli import main
    with pytest.raises(SystemExit) as e:
        main(["point", "--target", "llama-3.1-8b", "--hardware", "h200", "--drafter", "parallel", "--draft",
              "pard-llama-3.2-1b", "--draft-passes", "2", "--k", "6", "--alpha", "0.8", "--batch", "4", "--json",
              "--engine", "roofline"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    r = out["results"][0] if "results" in out else out
    want = step(*Scenario(**PARD, draft_passes=2, k=6, alpha=0.8, batch=4, engine="roofline").build())
    assert r["speedup"] == pytest.approx(float(want.speedup), rel=1e-5)
    assert out["inputs"]["draft_passes"] == 2


def test_a_sweep_with_a_passes_axis(tmp_path):
    from specjax.engine import sweep
    from specjax.inputs import spec
    from specjax.outputs import io
    text = """
        name = "p"
        hardware = ["h200"]
        engine = "roofline"
        [[pairs]]
        target = "llama-3.1-8b"
        drafter = "parallel"
        draft = "pard-llama-3.2-1b"
        [fixed]
        alpha = 0.8
        context = 512
        [axes]
        batch = [1, 256]
        k = [2, 8]
        draft_passes = [1, 3]
        """
    sweep.run(spec.from_text(text, "p.toml"), tmp_path / "o")
    df = io.read_results(tmp_path / "o").collect()
    assert df.height == 8
    for row in df.iter_rows(named=True):
        sc = Scenario(**PARD, alpha=0.8, context=512.0, engine="roofline", batch=row["batch_seqs"],
                      k=int(row["k_tokens"]), draft_passes=int(row["draft_passes"]))
        assert row["speedup"] == pytest.approx(float(step(*sc.build()).speedup), rel=1e-5)


def test_measurement_rows_of_chain_and_parallel_drafters_stack(tmp_path):
    from specjax.engine import validate
    from specjax.inputs import measured
    src = tmp_path / "rows.csv"
    header = ("series,target,drafter,draft,hardware,tp,batch,k,acceptance_rate,accepted_length,context,weight_dtype,"
              "measured_speedup,metric,approximate,source_url,engine,draft_passes")
    rows = ["a,llama-3.1-8b,model,llama-3.2-1b,h200,1,8,4,0.8,,1024,bf16,1.5,latency,no,https://x.org/a,vllm,",
            "b,llama-3.1-8b,parallel,pard-llama-3.2-1b,h200,1,8,4,0.8,,1024,bf16,2.0,latency,no,https://x.org/a,vllm,",
            "c,qwen3-8b,parallel,dflash-qwen3-8b,h200,1,8,7,0.8,,1024,bf16,2.5,latency,no,https://x.org/a,vllm,2"]
    src.write_text("\n".join([header, *rows]) + "\n")
    loaded = measured.load(src)
    assert [r.draft_passes for r in loaded] == [None, None, 2] and not any(r.unsupported for r in loaded)
    df, _ = validate.evaluate(loaded)
    for r, got in zip(loaded, df["predicted_speedup"].to_list()):
        kw = dict(target=r.target, hardware="h200", drafter=r.drafter, draft=r.draft, k=r.k, alpha=0.8, batch=8,
                  context=1024.0, engine="vllm", draft_passes=r.draft_passes)
        assert got == pytest.approx(float(step(*Scenario(**kw).build()).speedup), rel=1e-4)
    src.write_text(src.read_text().replace("https://x.org/a,vllm,\nb", "https://x.org/a,vllm,2\nb", 1))
    with pytest.raises(SpecError, match="draft_passes"):
        measured.load(src)


def test_reference_passes_none_is_the_chain():
    """The reference's own limit: passes=None is the k-pass chain; passes=1 at k=1 is the same pass."""
    sc = Scenario(**CHAIN, k=1, alpha=0.7, batch=4, engine="roofline")
    hw, _, tgt, dr, _ = sc.build(F64)
    args = (ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(dr), 4.0, 1, 0.7, 2048.0)
    assert ref.speedup(*args, passes=1) == pytest.approx(ref.speedup(*args), rel=1e-14)
    assert math.isfinite(ref.speedup(*args[:4], 6, 0.7, 2048.0, passes=2))


def test_a_dflash_block_caps_k_in_optimize_and_advise():
    """A DFlash drafter fills a block of block_size tokens, the first the last verified one: optimize and advise
    search k up to block_size - 1 (15 here) whatever k_max asks; PARD (no block in its config) keeps k_max."""
    from specjax import api
    from specjax.engine import advise
    sc = Scenario(target="qwen3-8b", hardware="h200", drafter="parallel", draft="dflash-qwen3-8b", k=15,
                  alpha=0.95, context=1024.0, engine="vllm")
    assert api.block_k(sc) == 15 and api.block_k(Scenario(**PARD, k=4, alpha=0.7)) is None
    r = api.optimize(sc, [1.0], k_max=32, method="brute")  # the cap is the search's range, whatever the method
    assert r["k_max"] == 15 and 1 <= r["k_star_by_batch"][0]["k_star"] <= 15
    _, table, _ = advise.schedule(sc, 4, k_max=32)
    assert np.asarray(table).shape == (4, 15)
    assert api.optimize(Scenario(**PARD, k=4, alpha=0.7), [1.0], k_max=20, method="brute")["k_max"] == 20


@pytest.mark.parametrize("draft, vllm, trtllm, sglang", [
    ("pard-llama-3.2-1b", ("draft_model", True), "PARD", None),
    ("dflash-llama-3.1-8b", ("dflash", None), "DFlash", "DFLASH"),
])
def test_each_engine_names_the_parallel_drafter(draft, vllm, trtllm, sglang):
    """vLLM: draft_model + parallel_drafting (PARD, from 0.16) or dflash (0.20); TensorRT-LLM: PARD or DFlash;
    SGLang: DFLASH with a block of k + 1 tokens, nothing for PARD (a one-line error naming who serves it)."""
    from specjax.engine import advise
    sc = Scenario(target="llama-3.1-8b", hardware="h200", drafter="parallel", draft=draft, k=4, alpha=0.8,
                  context=1024.0, engine="vllm")
    ranges, table, _ = advise.schedule(sc, 32, k_max=8)
    assert max(k for _, _, k in ranges) > 0
    spec = advise.emit("vllm", sc, ranges, table)["config"]["speculative_config"]
    assert (spec["method"], spec.get("parallel_drafting")) == vllm
    old = advise.emit("vllm", sc, ranges, table, version="0.12")
    assert any("first in 0." in w for w in old["warnings"])
    assert advise.emit("trtllm", sc, ranges, table)["config"]["speculative_config"]["decoding_type"] == trtllm
    if sglang is None:
        with pytest.raises(SpecError, match="serves no parallel draft model.*vllm, trtllm"):
            advise.emit("sglang", sc, ranges, table)
        return
    sg = advise.emit("sglang", sc, ranges, table)
    cfg, k = sg["config"], sg["runs"][0][2]
    assert cfg["speculative_algorithm"] == "DFLASH" and "speculative_num_steps" not in cfg
    assert cfg["speculative_dflash_block_size"] == cfg["speculative_num_draft_tokens"] == k + 1 <= 16
    assert f"--speculative-dflash-block-size {k + 1}" in sg["command_line"]
