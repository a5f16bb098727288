"""Per-position acceptance, draft trees, a bounded draft KV cache and self-speculation (docs/model.md §4.3,
§4.4, §5.2): hand values, limits (equal rates = i.i.d., a topk-1 tree = the chain, exactly), costs by
hand, the plain-Python reference, the published tree ordering, and the edge checks."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from specjax.cost.acceptance import (conditional_rates, tokens_from_rates, tokens_per_step, tokens_per_tree_step,
                                     tree_widths)
from specjax.cost.roofline import pass_cost
from specjax.cost.speculative import step
from specjax.errors import SpecError
from specjax.inputs.scenario import Scenario

F64 = jnp.float64


@pytest.fixture(autouse=True)
def _strict(strict_promotion):
    """Every kernel test runs under strict dtype promotion."""


def test_tau_from_a_vector_by_hand():
    rates = jnp.asarray([0.8, 0.6, 0.5], F64)
    assert float(tokens_from_rates(rates, F64(3))) == pytest.approx(1 + 0.8 + 0.48 + 0.24, rel=1e-14)
    # beyond the vector the last rate repeats: positions 4 and 5 add 0.24 * 0.5 and 0.24 * 0.25
    assert float(tokens_from_rates(rates, F64(5))) == pytest.approx(2.52 + 0.12 + 0.06, rel=1e-14)
    assert float(tokens_from_rates(rates, F64(2.5))) == pytest.approx(1 + 0.8 + 0.48 + 0.5 * 0.24, rel=1e-14)
    assert float(tokens_from_rates(rates, F64(0))) == 1.0


def test_position_rates_become_conditional_rates():
    r = (0.601, 0.286, 0.128)  # vLLM's per-position acceptance (issue 20780's format)
    a = conditional_rates(r)
    assert a == pytest.approx([0.601, 0.286 / 0.601, 0.128 / 0.286], rel=1e-14)
    sc = Scenario(engine="roofline", target="llama-3.1-8b", hardware="h100-sxm", drafter="ngram", k=3, position_rates=r)
    assert float(step(*sc.build(F64)).tokens_per_step) == pytest.approx(1 + sum(r), rel=1e-12)


@pytest.mark.parametrize("alpha", [0.3, 0.7, 0.95])
@pytest.mark.parametrize("length", [2, 8])
def test_equal_rates_equal_the_iid_formula_and_its_gradient(alpha, length):
    for k in range(1, 7):
        vec = tokens_from_rates(jnp.full(length, alpha, F64), F64(k))
        assert float(vec) == pytest.approx(float(tokens_per_step(F64(alpha), F64(k))), rel=1e-12)
        g_vec = jax.grad(lambda a: tokens_from_rates(jnp.full(length, a), F64(k)))(F64(alpha))
        g_iid = jax.grad(tokens_per_step)(F64(alpha), F64(k))
        assert float(g_vec) == pytest.approx(float(g_iid), rel=1e-10)


def test_tree_widths_and_tau_estimate_by_hand():
    # depth 3, topk 2, 6 tokens (SpecDecode-Bench's d3w2): 5 candidates kept as 2, 2, 1
    assert [float(w) for w in tree_widths(F64(2), F64(6), F64(3), 4)] == [2.0, 2.0, 1.0, 0.0]
    assert [float(w) for w in tree_widths(F64(4), F64(21), F64(3), 3)] == [4.0, 8.0, 8.0]
    assert [float(w) for w in tree_widths(F64(1), F64(5), F64(4), 4)] == [1.0, 1.0, 1.0, 1.0]
    a = 0.7
    p = (1 - 0.3 ** 2, a, 0.5 * a)  # 2 children of the root; 2 over 2 parents; 1 over 2 parents
    want = 1 + p[0] + p[0] * p[1] + p[0] * p[1] * p[2]
    got = float(tokens_per_tree_step(lambda d: F64(a), F64(2), F64(6), F64(3)))
    assert got == pytest.approx(want, rel=1e-13)
    assert got == pytest.approx(ref.tree_tau(lambda d: a, 2, 6, 3), rel=1e-13)


BASE = dict(target="qwen3-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-qwen3-8b", context=180.0)


@pytest.mark.parametrize("acceptance", [dict(alpha=0.7), dict(accepted_length=2.4), dict(acceptance_vector=(0.8, 0.6))])
def test_a_topk_1_tree_is_the_chain_exactly(acceptance):
    for batch in (1.0, 64.0):
        chain = step(*Scenario(**BASE, k=3, batch=batch, engine="vllm", **acceptance).build(F64))
        tree = step(*Scenario(**BASE, k=3, batch=batch, engine="vllm", tree_topk=1, tree_tokens=4,
                              **acceptance).build(F64))
        for name, v in chain._asdict().items():
            assert float(getattr(tree, name)) == pytest.approx(float(v), rel=1e-13, abs=1e-300), name  # to rounding


def test_tree_draft_and_verify_costs_by_hand():
    sc = Scenario(**BASE, k=3, batch=4.0, alpha=0.7, tree_topk=4, tree_tokens=21, engine="vllm")
    hw, dep, tgt, dr, dec = sc.build(F64)
    r = step(hw, dep, tgt, dr, dec)
    B, L = F64(4), F64(180)
    first = float(pass_cost(hw, dep, dr, B, F64(1), L).t_s) + float(hw.draft_overhead_s)
    wide = float(pass_cost(hw, dep, dr, B, F64(4), L).t_s) + float(hw.draft_overhead_s)
    verify = float(pass_cost(hw, dep, tgt, B, F64(21), L).t_s)
    assert float(r.t_verify_s) == pytest.approx(verify, rel=1e-13)
    assert float(r.t_sd_step_s) == pytest.approx(first + 2 * wide + verify + float(hw.step_overhead_s), rel=1e-13)
    # the verify pass scores 21 tokens per sequence: its dense FLOPs are 2 x 4 x 21 x P_dense
    flops = pass_cost(hw.replace(roofline="pass"), dep, tgt, B, F64(21), F64(0)).flops
    assert float(flops) >= 2 * 4 * 21 * float(tgt.p_dense)


def test_draft_kv_budget_by_hand():
    sc = Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="model", draft="llama-3.2-1b", k=3,
                  alpha=0.7, batch=16.0, context=8192.0, draft_kv_budget=512, engine="roofline")
    hw, dep, tgt, dr, dec = sc.build(F64)
    r = step(hw, dep, tgt, dr, dec)
    assert float(r.t_draft_s) == pytest.approx(float(pass_cost(hw, dep, dr, F64(16), F64(1), F64(512)).t_s),
                                               rel=1e-13)
    # memory: the drafter stores min(L + k + 1, 512) tokens of KV per sequence
    t, d = ref.as_floats(tgt), ref.as_floats(dr)
    assert float(r.max_batch_sd) == ref.max_batch(ref.as_floats(hw), [t, d], [8196, 512])
    full = step(*Scenario(**{**sc.__dict__, "draft_kv_budget": None}).build(F64))
    assert float(r.max_batch_sd) > float(full.max_batch_sd) and float(r.t_draft_s) < float(full.t_draft_s)


def test_self_speculation():
    kw = dict(target="llama-3.1-8b", hardware="h100-sxm", drafter="self", k=3, alpha=0.8, context=32768.0,
              engine="roofline")
    r = step(*Scenario(**kw, batch=32.0, draft_kv_budget=512).build(F64))
    base_only = step(*Scenario(**kw, batch=32.0, draft_kv_budget=512).build(F64))
    assert float(r.max_batch_base) == float(base_only.max_batch_base)
    # the weights are not stored twice: only the bounded draft KV is added to memory
    t = ref.as_floats(Scenario(**kw, draft_kv_budget=512).build(F64)[2])
    hw = ref.as_floats(Scenario(**kw, draft_kv_budget=512).build(F64)[0])
    per = ref.kv_per_seq(t, 32772) + ref.kv_per_seq(t, 512)
    assert float(r.max_batch_sd) == math.floor((hw["hbm_bytes"] * 0.9 - ref.weight_bytes(t)) / per)
    assert float(r.speedup) > 1.0  # MagicDec: at long context a bounded-KV self-draft pays at batch 32
    # with a budget covering the whole context the self-draft is the target: it can never pay
    for batch in (1.0, 64.0):
        full = step(*Scenario(**kw, batch=batch, draft_kv_budget=1e6).build(F64))
        assert float(full.speedup) <= 1.0


@pytest.mark.parametrize("case", range(12))
def test_kernel_matches_reference_with_vectors_trees_and_budgets(case):
    rng = np.random.default_rng(case)
    target, drafter, draft = [("qwen3-8b", "eagle", "eagle3-qwen3-8b"), ("llama-3.1-8b", "model", "llama-3.2-1b"),
                              ("gpt-oss-120b", "eagle", "eagle3-gpt-oss-120b"),
                              ("llama-3.1-8b", "self", None)][case % 4]
    k = int(rng.integers(1, 6))
    topk = int(rng.choice([1, 2, 4]))
    tokens = k + 1 if topk == 1 else int(rng.integers(k + 1, min(64, 1 + sum(topk ** d for d in range(1, k + 1))) + 1))
    tree = dict(tree_topk=topk, tree_tokens=tokens) if case % 3 else {}
    acc = dict(acceptance_vector=tuple(rng.uniform(0.2, 0.95, int(rng.integers(1, 5))))) if case % 2 else \
        dict(alpha=float(rng.uniform(0.2, 0.95)))
    budget = float(rng.choice([256, 4096])) if drafter == "self" or case % 5 == 0 else None
    sc = Scenario(target=target, hardware="h200", drafter=drafter, draft=draft, k=k, batch=float(rng.integers(1, 512)),
                  context=float(rng.uniform(100, 30000)), engine="vllm", draft_kv_budget=budget, **tree, **acc)
    hw, dep, tgt, dr, dec = sc.build(F64)
    r = step(hw, dep, tgt, dr, dec)
    want = ref.speedup(ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(dr), sc.batch, k, sc.resolved_alpha(),
                       sc.context, rates=sc.rates(), tree=(topk, tokens) if tree else None,
                       kv_budget=budget if budget else math.inf)
    assert float(r.speedup) == pytest.approx(want, rel=1e-11)


def test_wide_trees_win_at_batch_1_and_lose_by_batch_64():
    """SpecDecode-Bench Fig. 2 (Qwen3-8B + EAGLE-3, SGLang, H100, GSM8K): the chain's measured accepted
    length 2.25 gives alpha; the trees are predicted from that alpha alone."""
    alpha = Scenario(engine="roofline", **BASE, k=3, accepted_length=2.25).resolved_alpha()
    shapes = {"chain": {}, "d3w2": dict(tree_topk=2, tree_tokens=6), "d3w4": dict(tree_topk=4, tree_tokens=21)}
    s = {b: {n: float(step(*Scenario(**BASE, k=3, alpha=alpha, batch=b, engine="sglang", **kw).build(F64)).speedup)
             for n, kw in shapes.items()} for b in (1.0, 64.0, 128.0)}
    assert s[1.0]["d3w4"] > s[1.0]["d3w2"] > s[1.0]["chain"]  # measured 1.73 / 1.68 / 1.65
    for b in (64.0, 128.0):
        assert s[b]["d3w4"] < s[b]["d3w2"] and s[b]["d3w4"] < s[b]["chain"]  # measured 0.64 / 1.09 / 1.31 at 64
    assert s[128.0]["d3w4"] < 1.0  # measured 0.56


@pytest.mark.parametrize("kw,message", [
    (dict(tree_topk=2), "give both tree_topk and tree_tokens"),
    (dict(tree_topk=2, tree_tokens=16), "tree_tokens=16; expected 4 <= tree_tokens <= 15"),
    (dict(tree_topk=1, tree_tokens=6), "tree_tokens=6; expected k + 1 = 4 for tree_topk = 1"),
    (dict(tree_topk=2, tree_tokens=3), "tree_tokens=3; expected 4 <= tree_tokens"),
    (dict(k=17, tree_topk=2, tree_tokens=40), "k=17; expected a tree depth <= 16"),
    (dict(drafter="ngram", draft=None, tree_topk=2, tree_tokens=6), "a draft tree needs a drafter that runs a model"),
    (dict(drafter="self", draft=None), "drafter='self' needs draft_kv_budget"),
    (dict(draft_kv_budget=0), "draft_kv_budget=0; expected 1 <="),
    (dict(alpha=None, position_rates=(0.3, 0.6)), "position_rates=[0.3, 0.6]; expected non-increasing rates"),
    (dict(acceptance_vector=(0.5,)), "give exactly one of alpha, accepted_length, acceptance_vector and "
                                     "position_rates (got alpha, acceptance_vector)"),
    (dict(alpha=None, acceptance_vector=(0.5, 1.5)), "acceptance_vector[1]=1.5; expected 0 <= alpha <= 1"),
])
def test_bad_trees_and_vectors_name_the_field(kw, message):
    args = dict(BASE, k=3, alpha=0.7)
    args.update(kw)
    with pytest.raises(SpecError) as e:
        Scenario(engine="roofline", **args).check()
    assert message in str(e.value), str(e.value)


def test_sweeps_take_tree_shapes_vectors_and_budgets(tmp_path):
    from specjax.engine import sweep
    from specjax.inputs import spec
    from specjax.outputs import io
    text = """
        name = "t"
        hardware = ["h100-sxm"]
        engine = "roofline"
        [[pairs]]
        target = "qwen3-8b"
        drafter = "eagle"
        draft = "eagle3-qwen3-8b"
        [fixed]
        k = 3
        context = 512
        acceptance_vector = [0.8, 0.6, 0.5]
        [axes]
        batch = [1, 64]
        tree_topk = [1, 2, 4]
        tree_tokens = [4, 6, 15, 21]
        draft_kv_budget = [256, 1e9]
        """
    sp = spec.from_text(text, "t.toml")
    sweep.run(sp, tmp_path / "o")
    df = io.read_results(tmp_path / "o").collect()
    assert df.height == 2 * 3 * 4 * 2
    for row in df.iter_rows(named=True):
        w, n = int(row["tree_topk"]), int(row["tree_tokens"])
        valid = (w == 1 and n == 4) or (w > 1 and 4 <= n <= 1 + sum(w ** d for d in (1, 2, 3)))
        if not valid:
            assert row["status"] == "invalid_input", row
            continue
        sc = Scenario(**BASE_SWEEP, batch=row["batch_seqs"], tree_topk=w, tree_tokens=n,
                      draft_kv_budget=row["draft_kv_budget_tokens"])
        assert row["speedup"] == pytest.approx(float(step(*sc.build()).speedup), rel=2e-5), row
    with pytest.raises(SpecError, match="give exactly one of alpha"):
        spec.from_text(text.replace("context = 512", "context = 512\nalpha = 0.7"), "t.toml")


BASE_SWEEP = dict(target="qwen3-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-qwen3-8b", k=3, context=512.0,
                  acceptance_vector=(0.8, 0.6, 0.5), engine="roofline")


def test_cli_trees_vectors_and_the_tree_search(capsys):
    import json
    from specjax.cli import main
    base = ["--target", "qwen3-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft", "eagle3-qwen3-8b",
            "--k", "3", "--context", "180", "--engine", "sglang", "--json"]
    with pytest.raises(SystemExit) as e:
        main(["point", *base, "--tree-topk", "4", "--tree-tokens", "21", "--accepted-length", "2.92", "--batch", "1"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens_per_step"] == pytest.approx(2.92, rel=1e-5)  # a measured tree tau is used as given
    assert out["inputs"]["tree_topk"] == 4 and out["inputs"]["tree_tokens"] == 21
    with pytest.raises(SystemExit) as e:
        main(["optimize", *base, "--accepted-length", "2.25", "--trees", "--batch", "1", "--batch", "128"])
    assert e.value.code == 0
    rows = json.loads(capsys.readouterr().out)["shape_by_batch"]
    assert rows[0]["topk"] > 1 and rows[0]["speedup"] > rows[0]["chain_speedup"]  # a tree wins at batch 1
    assert rows[1]["topk"] == 1 and rows[1]["depth"] <= 3  # a short chain at batch 128
    with pytest.raises(SystemExit) as e:
        main(["point", *base, "--acceptance-vector", "0.8,x", "--batch", "1"])
    assert e.value.code == 2 and "0.8,x" in capsys.readouterr().err


def test_tree_estimate_unrolls_only_the_levels_it_needs():
    """A scenario's tree unrolls its own depth (`Decode.tree_max_depth`): the same numbers, bit for bit, as
    the full 16 levels; a point deeper than the bound is invalid_input, never a silently short sum."""
    sc = Scenario(engine="roofline",
                  target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b", k=3,
                  alpha=0.7, tree_topk=4, tree_tokens=21, batch=8)
    hw, dep, tgt, dr, dec = sc.build(F64)
    assert dec.tree_max_depth == 3
    own, full = step(hw, dep, tgt, dr, dec), step(hw, dep, tgt, dr, dec.replace(tree_max_depth=16))
    assert float(own.speedup) == float(full.speedup) and float(own.tokens_per_step) == float(full.tokens_per_step)
    short = step(hw, dep, tgt, dr, dec.replace(tree_max_depth=2))
    assert int(short.status) == 4  # Point.INVALID_INPUT


def test_accepted_length_is_solved_in_the_build_dtype():
    """alpha from tau follows the dtype policy: a float64 build solves in float64 (it solved in float32)."""
    sc = Scenario(engine="roofline", **BASE, k=3, accepted_length=2.25)
    a64, a32 = sc.resolved_alpha(F64), sc.resolved_alpha()
    tau = lambda a: 1 + a + a**2 + a**3  # noqa: E731  chain of k = 3: tau = sum of alpha^i
    assert abs(tau(a64) - 2.25) < 1e-12 < abs(tau(a32) - 2.25) + 1e-12
    assert float(sc.build(F64)[4].alpha) == a64
