"""Expert parallelism, attention data parallelism and the drafter's own TP (docs/model.md §2.4, §2.5): hand-derived
collectives and per-rank costs, the pure-TP numbers of the previous release unchanged, memory per rank,
the plain-Python reference on random layouts, and the edge checks."""

import dataclasses
import json
import pathlib
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from specjax.cost.roofline import all_to_all_time, comm_time, expected_experts, operator_costs
from specjax.cost.speculative import Decode, Deployment, step
from specjax.errors import SpecError
from specjax.inputs import hardware, models
from specjax.inputs.scenario import Scenario
from specjax.inputs import spec as spec_mod

F64 = jnp.float64


@pytest.fixture(autouse=True)
def _strict(strict_promotion):
    """Every kernel test runs under strict dtype promotion."""


def hw64(slug="h200", **kw):
    return hardware.load(slug).resolve("bf16", F64).replace(**{k: F64(v) for k, v in kw.items()})


def lay64(tp=1, ep=1, dp=1, draft_tp=0, imbalance=1.0):
    return Deployment(tp=F64(tp), memory_fraction=F64(0.9), ep=F64(ep), dp_attention=F64(dp), draft_tp=F64(draft_tp),
                      expert_imbalance=F64(imbalance))


def ds64():
    return models.target(models.load_architecture("deepseek-v3"), weight_dtype="fp8", dtype=F64)


def test_all_to_all_bytes_and_time_by_hand():
    hw, m = hw64(), ds64()
    # 8 GPUs, DP attention 8, EP 8: each GPU owns 64/8 tokens, sends each to r = 8 experts, 7/8 off-rank
    sent = 64 / 8 * 8 * 7168 * 2.0
    assert sent == 917504.0
    t = float(all_to_all_time(hw, lay64(dp=8, ep=8), m, F64(64)))
    assert t == pytest.approx(7 / 8 * sent / 450e9 + 5e-6, rel=1e-12)
    # 16 GPUs over two 8-GPU nodes: half the destinations are on the other node (over the network)
    sent16 = 64 / 16 * 8 * 7168 * 2.0
    t16 = float(all_to_all_time(hw, lay64(dp=16, ep=16), m, F64(64)))
    assert t16 == pytest.approx(max((15 / 16 - 0.5) * sent16 / 450e9, 0.5 * sent16 / 5e10) + 1e-5, rel=1e-12)
    assert float(all_to_all_time(hw, lay64(tp=8), m, F64(64))) == 0.0  # no EP, no all-to-all


def test_comm_time_with_dp_attention_and_ep_by_hand():
    hw, m = hw64(), ds64()
    n = 8.0
    # tp = 1 inside each DP rank: no attention all-reduce; the 3 dense layers all-reduce the gathered 8
    # tokens over all 8 GPUs; the 58 MoE layers dispatch and combine (expert groups of one GPU: no reduce)
    ar8 = 2 * 7 / 8 * n * 7168 * 2 / 450e9 + 5e-6
    a2a = 7 / 8 * (n / 8 * 8 * 7168 * 2) / 450e9 + 5e-6
    got = float(comm_time(hw, lay64(dp=8, ep=8), m, F64(n), F64(1)))
    assert got == pytest.approx(3 * ar8 + 58 * 2 * a2a, rel=1e-12)
    # attention TP 8 with MoE TP 4 x EP 2 (TensorRT-LLM's DeepSeek-R1 layout): tokens are on every GPU after
    # attention, so the MoE layers combine with the all-reduce of tensor parallelism: 2 per layer
    ar_attn = 2 * 7 / 8 * n * 7168 * 2 / 450e9 + 5e-6
    got = float(comm_time(hw, lay64(tp=8, ep=2), m, F64(n), F64(1)))
    assert got == pytest.approx(2 * 61 * ar_attn, rel=1e-12)
    assert got == float(comm_time(hw, lay64(tp=8), m, F64(n), F64(1)))
    # DP attention 2 x TP 4 with EP 4: expert groups of 8 / 4 = 2 GPUs reduce their n r / 4 outputs
    ar4 = 2 * 3 / 4 * (n / 2) * 7168 * 2 / 450e9 + 5e-6
    ar8 = 2 * 7 / 8 * n * 7168 * 2 / 450e9 + 5e-6
    a2a = 3 / 4 * (n / 8 * 8 * 7168 * 2) / 450e9 + 5e-6
    ar_group = 2 * 1 / 2 * (n * 8 / 4) * 7168 * 2 / 450e9 + 5e-6
    got = float(comm_time(hw, lay64(tp=4, dp=2, ep=4), m, F64(n), F64(1)))
    assert got == pytest.approx(61 * ar4 + 3 * ar8 + 58 * (2 * a2a + ar_group), rel=1e-12)


@pytest.mark.parametrize("imbalance", [1.0, 1.3])
def test_distinct_experts_per_rank(imbalance):
    m = ds64()
    n = 5.0
    u = 256 * (1 - (1 - 8 / 256) ** n)
    assert float(expected_experts(F64(n), F64(256), F64(8))) == pytest.approx(u, rel=1e-12)
    flops, nbytes = operator_costs(hw64(), lay64(tp=8, ep=8, imbalance=imbalance), m, F64(n), F64(1), F64(100))
    # E/8 = 32 experts per rank, U(n)/8 of them touched, each whole on its rank (G/ep = 1), x imbalance
    per_rank = u / 8
    assert float(nbytes[2]) == pytest.approx(58 * per_rank * 44040192 * 1.0 * imbalance, rel=1e-12)
    assert float(flops[2]) == pytest.approx(2 * n * 58 * 8 * 44040192 / 8 * imbalance, rel=1e-12)
    # the expected bytes per GPU are the same as pure TP's (U(n)/ep experts whole vs U(n) experts / tp)
    _, tp_bytes = operator_costs(hw64(), lay64(tp=8), m, F64(n), F64(1), F64(100))
    assert float(nbytes[2]) == pytest.approx(float(tp_bytes[2]) * imbalance, rel=1e-12)


def test_imbalance_inert_without_ep():
    """Without EP every GPU holds 1/G of every expert: an imbalance factor cannot change the pass (it did)."""
    m = ds64()
    ops = [operator_costs(hw64(), lay64(tp=8, imbalance=imb), m, F64(5.0), F64(1), F64(100)) for imb in (1.0, 1.7)]
    assert float(ops[1][0][2]) == float(ops[0][0][2]) and float(ops[1][1][2]) == float(ops[0][1][2])


# speedup, T_sd, max batch with and without the drafter, from the previous release (commit 585cfe3, pure TP)
RELEASE_1 = [
    (dict(target="llama-3-70b", drafter="ratio", draft_cost=0.1, tp=4),
     [(1.9436244426104148, 0.010580214442666668, 272), (1.8239426726290198, 0.015207076522666667, 272),
      (1.0376202451138201, 0.14416360101344006, 272)]),
    (dict(target="deepseek-v3", hardware="b200", drafter="mtp", tp=8, weight_dtype="fp8"),
     [(1.3712057657644152, 0.0023005021275613272, 261), (1.7801967797843328, 0.013827907948364348, 261),
      (1.952417697040558, 0.04285383561955739, 261)]),
    (dict(target="mixtral-8x22b", drafter="model", draft="mixtral-8x7b", tp=4),
     [(0.7475830684355437, 0.015829266773333333, 89), (1.1917287545567063, 0.03649095707007706, 89),
      (0.8011231043255986, 0.1371931458362513, 89)]),
    (dict(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b",
          engine=str(pathlib.Path(__file__).parent / "data" / "vllm_release1.toml")),
     [(1.73189680959581, 0.010625585220098772, 99), (1.949037625871343, 0.01694164472015666, 99),
      (1.7418655714468219, 0.13823050988664892, 99)]),
]


@pytest.mark.parametrize("case", range(len(RELEASE_1)))
def test_ep_1_dp_1_reproduce_the_pure_tp_release_exactly(case):
    kw, want = RELEASE_1[case]
    kw = dict(dict(hardware="h200"), **kw)
    for batch, (s, t_sd, mb) in zip((1.0, 37.0, 512.0), want):
        sc = Scenario(**{"engine": "roofline", **kw}, ep=1, dp_attention=1, batch=batch, k=3, alpha=0.7, context=4096)
        r = step(*sc.build(F64))
        assert float(r.speedup) == s and float(r.t_sd_step_s) == t_sd and float(r.max_batch_sd) == mb


def test_memory_per_rank_with_dp_attention_by_hand():
    hw, m = hw64(), ds64()
    w = float(m.weight_bytes)
    kv_seq = 576 * 2.0 * 61 * 8193
    dec = Decode(batch=F64(1), k=F64(0), alpha=F64(0.5), context=F64(8192))
    zero = models.Model.zeros(F64)
    # TP 8: weights over 8 GPUs; MLA's latent is not split by heads: every GPU holds every sequence's KV
    r8 = step(hw, lay64(tp=8), m, zero, dec)
    assert float(r8.max_batch_base) == np.floor((141e9 * 0.9 - w / 8) / kv_seq)
    # DP attention 8 x EP 8: attention projections whole on every rank, 1/8 of the sequences per rank
    w_rank = (w + 7 * 11413422080.0 * 1.0) / 8
    rdp = step(hw, lay64(dp=8, ep=8), m, zero, dec)
    assert float(rdp.max_batch_base) == np.floor((141e9 * 0.9 - w_rank) / (kv_seq / 8))
    assert float(rdp.max_batch_base) > 6 * float(r8.max_batch_base)  # 459 vs 74 sequences of 8k


def test_draft_tp_runs_the_drafter_on_its_own_gpus():
    hw = hw64()
    tgt = models.target(models.load_architecture("llama-3.1-70b"), dtype=F64)
    draft = models.target(models.load_architecture("llama-3.2-1b"), dtype=F64)
    dec = Decode(batch=F64(4), k=F64(3), alpha=F64(0.7), context=F64(2048))
    same, own = step(hw, lay64(tp=4), tgt, draft, dec), step(hw, lay64(tp=4, draft_tp=1), tgt, draft, dec)
    from specjax.cost.roofline import pass_cost
    assert float(own.t_draft_s) == pytest.approx(float(pass_cost(hw, lay64(), draft, F64(4), F64(1), F64(2048)).t_s),
                                                 rel=1e-12)
    assert float(own.t_draft_s) != float(same.t_draft_s) and float(own.t_verify_s) == float(same.t_verify_s)
    assert float(own.max_batch_sd) < float(same.max_batch_sd)  # the whole drafter sits on one GPU


LAYOUTS = {"deepseek-v3": [(8, 8, 1), (1, 8, 8), (2, 4, 4), (8, 2, 1), (4, 16, 4), (1, 32, 32)],
           "gpt-oss-120b": [(8, 4, 1), (1, 4, 8), (2, 2, 2), (4, 1, 2)],
           "qwen3-30b-a3b": [(2, 8, 4), (1, 16, 16), (4, 4, 1)],
           "mixtral-8x7b": [(2, 8, 4), (1, 2, 2), (8, 8, 1)]}


@pytest.mark.parametrize("slug", list(LAYOUTS))
def test_kernel_matches_reference_on_random_layouts(slug):
    rng = np.random.default_rng(len(slug))
    arch = models.load_architecture(slug)
    tgt = models.target(arch, dtype=F64)
    drafts = {"mtp": models.mtp_head(arch, dtype=F64) if arch.mtp_layers else None,
              "model": models.target(models.load_architecture("qwen3-0.6b"), dtype=F64),
              "none": models.Model.zeros(F64)}
    for tp, ep, dp in LAYOUTS[slug]:
        for _ in range(4):
            hw = hw64(str(rng.choice(["h200", "b200", "gb200"])), gpus_per_node=float(rng.choice([8, 16, 72])),
                      fixed_overhead_s=float(rng.choice([0.0, 1e-4])), layer_overhead_s=float(rng.choice([0, 2e-5])))
            kind = str(rng.choice([k for k, v in drafts.items() if v is not None]))
            draft_tp = float(rng.choice([0, 1, 2])) if kind == "model" else 0.0
            imb = float(rng.choice([1.0, 1.25]))
            b, k = int(rng.integers(1, 4096)), int(rng.integers(1, 5))
            a, L = rng.uniform(0.3, 0.95), rng.uniform(0, 3e4)
            dep = lay64(tp, ep, dp, draft_tp, imb)
            r = step(hw, dep, tgt, drafts[kind], Decode(batch=F64(b), k=F64(k), alpha=F64(a), context=F64(L)))
            h, t, d = ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(drafts[kind])
            lay = ref.layout_of(tp, ep, dp, imb, draft_tp)
            assert float(r.speedup) == pytest.approx(ref.speedup(h, t, d, b, k, a, L, lay=lay), rel=1e-11)
            mb = ref.max_batch(h, [t, d], L + k + 1, layouts=[lay, ref.drafter_layout(lay)])
            assert abs(float(r.max_batch_sd) - mb) <= max(1.0, 1e-9 * mb)


@pytest.mark.parametrize("kw,message", [
    (dict(target="deepseek-v3", drafter="mtp", tp=8, ep=3), "ep=3; expected a divisor of the replica's tp x"),
    (dict(target="deepseek-v3", drafter="mtp", tp=8, ep=16), "ep=16; expected a divisor of the replica's tp x "
                                                            "dp_attention = 8 GPUs"),
    (dict(target="gpt-oss-120b", drafter="ngram", tp=1, dp_attention=3, ep=3), "a divisor of the 128 routed experts"),
    (dict(target="llama-3.1-70b", drafter="ngram", tp=4, ep=2), "no routed experts"),
    (dict(target="llama-3.1-70b", drafter="model", draft="llama-3.2-1b", tp=4, draft_tp=3), "draft_tp=3; expected a "
                                                                                             "divisor"),
    (dict(target="llama-3.1-70b", drafter="ngram", tp=4, draft_tp=1), "drafter='ngram' runs none"),
    (dict(target="deepseek-v3", drafter="mtp", tp=1, dp_attention=0), "dp_attention=0; expected an integer 1 <="),
    (dict(target="gpt-oss-120b", drafter="ngram", tp=1, expert_imbalance=0.5), "expert_imbalance=0.5; expected 1 <="),
    (dict(target="gpt-oss-120b", drafter="ngram", tp=2, expert_imbalance=1.5), "expert_imbalance=1.5; expected 1 "
                                                                                "unless --ep > 1"),
])
def test_layout_errors_name_the_field(kw, message):
    with pytest.raises(SpecError, match=None) as e:
        Scenario(engine="roofline", hardware="h200", alpha=0.7, **kw).check()
    assert message in str(e.value), str(e.value)


SPEC = textwrap.dedent("""
    name = "layouts"
    hardware = ["h200"]
    engine = "roofline"
    [[pairs]]
    target = "gpt-oss-120b"
    drafter = "ngram"
    label = "tp2"
    tp = 2
    [[pairs]]
    target = "gpt-oss-120b"
    drafter = "ngram"
    label = "dp4-ep4"
    tp = 1
    dp_attention = 4
    ep = 4
    [fixed]
    alpha = 0.7
    k = 3
    context = 2048
    [axes]
    batch = [1, 64, 1024]
    """)


def test_sweep_layout_pairs_and_axes(tmp_path):
    from specjax.engine import sweep
    from specjax.outputs import io
    spec = spec_mod.from_text(SPEC, "layouts.toml")
    sweep.run(spec, tmp_path / "a")
    df = io.read_results(tmp_path / "a").collect().sort("pair", "batch_seqs")
    for row in df.iter_rows(named=True):
        layout = dict(tp=2) if row["pair"] == "tp2" else dict(tp=1, dp_attention=4, ep=4)
        sc = Scenario(engine="roofline",
                      target="gpt-oss-120b", hardware="h200", drafter="ngram", alpha=0.7, k=3, context=2048,
                      batch=row["batch_seqs"], **layout)
        assert row["speedup"] == pytest.approx(float(step(*sc.build()).speedup), rel=1e-5)
    # ep as an axis over a tp axis: ep = 4 on tp = 2 does not divide the replica -> invalid_input, not a number
    text = SPEC.split("[[pairs]]")[0] + "[[pairs]]\ntarget = \"gpt-oss-120b\"\ndrafter = \"ngram\"\n" + \
        SPEC.split("[fixed]")[1].join(["[fixed]", ""]) + "tp = [2, 4]\nep = [1, 4]\n"
    spec2 = spec_mod.from_text(text, "axes.toml")
    sweep.run(spec2, tmp_path / "b")
    df2 = io.read_results(tmp_path / "b").collect()
    bad = df2.filter((pl_col("tp_gpus") == 2) & (pl_col("ep_gpus") == 4))
    assert bad.height == 3 and set(bad["status"].cast(str)) == {"invalid_input"}
    good = df2.filter(pl_col("ep_gpus") == 4).filter(pl_col("tp_gpus") == 4)
    assert set(good["status"].cast(str)) == {"ok"}
    with pytest.raises(SpecError, match="axes.ep = 3 for pair"):
        spec_mod.from_text(text.replace("ep = [1, 4]", "ep = [1, 3]"), "axes.toml")
    with pytest.raises(SpecError, match="ep is both a pair key and an axis"):
        spec_mod.from_text(SPEC + "ep = [1, 2]\n", "both.toml")


def pl_col(name):
    import polars as pl
    return pl.col(name)


def test_validate_reads_layout_columns(tmp_path):
    from specjax.engine import validate
    from specjax.inputs import measured
    src = (tmp_path / "rows.csv")
    header = ("series,target,drafter,draft,hardware,tp,batch,k,acceptance_rate,accepted_length,context,weight_dtype,"
              "measured_speedup,metric,approximate,source_url,engine,t_base_s,t_sd_step_s,ep,dp_attention")
    rows = [f"dsr1-k{k},deepseek-v3,mtp,,b200,8,1,{k},,{tau},2048,nvfp4,{s},latency,no,https://x.org/a,trtllm,,,2,1"
            for k, tau, s in ((1, 1.92, 1.78), (3, 2.82, 2.28))]
    src.write_text("\n".join([header, *rows]) + "\n")
    loaded = measured.load(src)
    assert [r.ep for r in loaded] == [2, 2] and not any(r.unsupported for r in loaded)
    df, _ = validate.evaluate(loaded)
    sc = Scenario(target="deepseek-v3", hardware="b200", drafter="mtp", tp=8, ep=2, k=3, accepted_length=2.82,
                  context=2048, weight_dtype="nvfp4", engine="trtllm")
    want = float(step(*sc.build()).speedup)
    got = df.filter(df["k"] == 3)["predicted_speedup"][0]
    assert got == pytest.approx(want, rel=1e-4) and df["ep"].to_list() == [2, 2]
    bad = src.read_text().replace(",2,1\n", ",3,1\n", 1)
    src.write_text(bad)
    assert "ep=3" in (measured.load(src)[0].unsupported or "")


def test_cli_point_echoes_the_layout(capsys):
    from specjax.cli import main
    with pytest.raises(SystemExit) as e:
        main(["point", "--target", "deepseek-v3", "--hardware", "h200", "--drafter", "mtp", "--tp", "1",
              "--dp-attention", "8", "--ep", "8", "--alpha", "0.7", "--k", "2", "--batch", "4", "--json", "--engine",
              "roofline"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["inputs"]["dp_attention"] == 8 and out["inputs"]["ep"] == 8 and out["inputs"]["gpus"] == 8
    assert out["inputs"]["draft_tp"] is None and out["inputs"]["kv_dtype"] == "bf16"  # as the build reads it


def test_plot_takes_the_layout_and_tree_flags(tmp_path):
    from specjax.cli import main
    for extra in (["--drafter", "mtp", "--tp", "1", "--dp-attention", "8", "--ep", "8"],
                  ["--drafter", "mtp", "--tp", "8", "--ep", "2", "--tree-topk", "2", "--tree-tokens", "5"]):
        out = tmp_path / f"fig{len(extra)}"
        with pytest.raises(SystemExit) as e:
            main(["plot", "speedup", "--target", "deepseek-v3", "--hardware", "h200", "--alpha", "0.8", "--k", "2",
                  "--engine", "roofline", "--out", str(out), *extra])
        assert e.value.code == 0 and out.with_suffix(".png").exists()
    with pytest.raises(SystemExit) as e:
        main(["plot", "speedup", "--target", "deepseek-v3", "--hardware", "h200", "--alpha", "0.8", "--drafter", "mtp",
              "--tp", "8", "--ep", "3", "--out", str(tmp_path / "bad")])
    assert e.value.code == 2


def test_layout_what_if_under_vmap_equals_the_layout_built_directly():
    """`parallel` is set by builders, never read off leaves: a tensor-parallel deployment edited to
    dp_attention = 2 under vmap runs the general kernels and equals the layout built directly."""
    base = Scenario(target="llama-3.1-70b", hardware="h200", drafter="eagle", draft="eagle3-llama-3.1-70b",
                    tp=4, batch=64, k=3, alpha=0.7, kv_dtype="fp8", engine="vllm")
    hw, deploy, tgt, draft, dec = base.build()
    assert not deploy.parallel  # pure TP: the fast path
    what_if = jax.vmap(lambda a: step(hw, deploy.replace(dp_attention=a), tgt, draft, dec).t_sd_step_s)(
        jnp.asarray([1.0, 2.0], jnp.float32))
    direct = [float(jax.jit(step)(*dataclasses.replace(base, dp_attention=a).build()).t_sd_step_s) for a in (1, 2)]
    assert deploy.replace(dp_attention=2.0).parallel and not deploy.replace(tp=8.0).parallel
    np.testing.assert_allclose(np.asarray(what_if), direct, rtol=1e-6)
