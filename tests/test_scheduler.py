"""The engine's scheduler limits as defaults (`inputs.scheduler`): per engine and GPU class, a
speculative SGLang server's cap, the user's value winning, and the JSON echo saying which was used."""

import pytest

from specjax import api
from specjax.errors import SpecError
from specjax.inputs import engines, hardware, scheduler
from specjax.inputs.scenario import Scenario

LOAD = dict(target="llama-3.1-8b", draft_cost=0.1, alpha=0.7, input_len=1000, output_len=100)


def limits(engine, hw, speculative=True):
    return scheduler.engine_limits(engines.load(engine), engines.load(engines.DEFAULT), hardware.load(hw),
                                   speculative)


@pytest.mark.parametrize("engine, hw, want", [
    ("vllm", "h200", (1024, 8192)), ("vllm", "h100-sxm", (1024, 8192)), ("vllm", "b200", (1024, 8192)),
    ("vllm", "a100-80gb", (256, 2048)), ("vllm", "l40s", (256, 2048)),  # vLLM keeps the A100 on the small values
    ("sglang", "h100-sxm", (48, 8192)), ("sglang", "b200", (48, 16384)), ("sglang", "l40s", (48, 8192)),
    ("sglang", "rtx-3090", (48, 2048)), ("trtllm", "h200", (2048, 8192)),
    ("roofline", "h200", (1024, 8192)), ("generic", "mi355x", (1024, 8192)),  # no table: vLLM's
])
def test_engine_defaults_per_gpu_class(engine, hw, want):
    got = limits(engine, hw)
    assert (got["max_num_seqs"], got["chunk_tokens"]) == want


def test_sglang_caps_only_a_speculative_server():
    assert limits("sglang", "h200", speculative=False)["max_num_seqs"] == 2048
    assert limits("vllm", "h200", speculative=False)["max_num_seqs"] == 1024


def test_scenario_load_uses_the_engine_default_and_a_user_value_wins():
    sc = Scenario(hardware="h200", engine="vllm", **LOAD)
    assert (float(sc.load().max_num_seqs), float(sc.load().chunk_tokens)) == (1024.0, 8192.0)
    assert float(Scenario(hardware="h200", engine="sglang", **LOAD).load().max_num_seqs) == 48.0
    mine = Scenario(hardware="h200", engine="sglang", max_num_seqs=96, chunk_tokens=512, **LOAD)
    assert (float(mine.load().max_num_seqs), float(mine.load().chunk_tokens)) == (96.0, 512.0)
    assert mine.scheduler_limits()["max_num_seqs"] == (96, "given")


def test_the_plain_side_runs_as_the_engine_would_without_speculation():
    """SGLang caps a speculative server at 48 running requests and a plain one at its request pool: the
    comparison's plain side keeps the plain cap (docs/model.md §11), so at 64 clients only speculation queues."""
    import jax.numpy as jnp

    from specjax.search import concurrency

    sc = Scenario(hardware="h200", engine="sglang", **LOAD)
    assert [float(c) for c in sc.load().caps] == [2048.0, 48.0]
    assert api.inputs(sc)["plain_max_num_seqs"] == 2048
    mine = Scenario(hardware="h200", engine="sglang", max_num_seqs=96, **LOAD)  # the user's cap: both servers
    assert [float(c) for c in mine.load().caps] == [96.0, 96.0] and "plain_max_num_seqs" not in api.inputs(mine)
    assert [float(c) for c in Scenario(hardware="h200", engine="vllm", **LOAD).load().caps] == [1024.0, 1024.0]
    c = concurrency.closed(*sc.build(jnp.float32), concurrency=64.0)
    assert not bool(c.base.queued) and bool(c.sd.queued) and float(c.base.batch) > 48.0 >= float(c.sd.batch) - 1e-3


def test_echo_states_the_values_and_where_they_came_from():
    echo = api.inputs(Scenario(hardware="h200", engine="sglang", chunk_tokens=4096, **LOAD))
    assert echo["max_num_seqs"] == 48 and echo["chunk_tokens"] == 4096
    assert echo["scheduler_source"]["chunk_tokens"] == "given"
    why = echo["scheduler_source"]["max_num_seqs"]
    assert why.startswith("sglang's default on h200") and "speculative" in why and "server_args.py" in why
    why = api.inputs(Scenario(hardware="h200", engine="roofline", **LOAD))["scheduler_source"]["max_num_seqs"]
    assert "vllm's default (engine roofline states none)" in why and ">= 70 GiB" in why
    assert "scheduler_source" not in api.inputs(Scenario(hardware="h200", target="llama-3.1-8b", draft_cost=0.1,
                                                         alpha=0.7))  # a decode batch has no load


@pytest.mark.parametrize("table, field", [
    ({"max_num_seqs": 0, "chunk_tokens": 8}, "scheduler.max_num_seqs"),
    ({"max_num_seqs": 8}, "scheduler"),
    ({"max_num_seqs": 8, "chunk_tokens": 8, "batch": 3}, "scheduler.batch"),
    ({"max_num_seqs": 8, "chunk_tokens": 8, "tier": [{"chunk_tokens": 8}]}, "scheduler.tier[0]"),
    ({"max_num_seqs": 8, "chunk_tokens": 8, "tier": [{"min_hbm_gib": -1}]}, "scheduler.tier[0].min_hbm_gib"),
])
def test_a_bad_scheduler_table_names_the_field(table, field):
    with pytest.raises(SpecError, match=field.replace("[", r"\[").replace("]", r"\]")):
        scheduler.from_table(table, "x.toml")


def test_text_echo_gives_the_short_source_of_each_limit(capsys):
    """The text echo of serve/advise says where each scheduler limit came from in a few words (the part of the
    source before its first ';'; --json keeps the whole text), names sharing a source joined."""
    from specjax.cli.app import print_inputs

    long = "vllm's default on h100-sxm, 75 GiB >= 70 GiB; vLLM v0.10 to v0.11, vllm/engine/arg_utils.py ..."
    print_inputs(dict(max_num_seqs=1024.0, chunk_tokens=8192.0,
                      scheduler_source=dict(max_num_seqs=long, chunk_tokens=long)))
    out = capsys.readouterr().out
    assert "scheduler_source=max_num_seqs+chunk_tokens: vllm's default on h100-sxm, 75 GiB >= 70 GiB" in out
    assert "arg_utils" not in out and "{" not in out
    print_inputs(dict(scheduler_source=dict(max_num_seqs="given", chunk_tokens=long)))
    assert "scheduler_source=max_num_seqs: given; chunk_tokens: vllm's default" in capsys.readouterr().out
