"""`api.points`: many operating points of one scenario in one call equal `api.point` one at a time, and bad
columns are refused with the field, the value and what is allowed."""

import dataclasses

import numpy as np
import pytest

from specjax import api
from specjax.errors import SpecError
from specjax.inputs.scenario import Scenario

SC = Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b", k=3,
              alpha=0.7, batch=16)


def test_points_equal_point_one_at_a_time():
    b, k, a = np.array([1.0, 64.0, 512.0, 4096.0]), np.array([1, 3, 5, 8]), np.array([0.5, 0.7, 0.8, 0.9])
    df = api.points(SC, batch=b, k=k, alpha=a, context=np.full(4, 4096.0))
    assert df.height == 4
    for i in range(4):
        p = api.point(dataclasses.replace(SC, batch=b[i], k=int(k[i]), alpha=a[i], context=4096))
        row = df.row(i, named=True)
        for key in ("speedup", "t_target_s", "t_sd_step_s", "tokens_per_step", "max_batch_sd"):
            # on several rows XLA vectorizes the batched program, which may move a field by 1-2 float32 ulp
            # (README "Python API"; tests/test_inline.py counts it on 120 rows)
            np.testing.assert_array_max_ulp(np.float32(row[key]), np.float32(p[key]), maxulp=2)
        assert (row["status"], row["bound"], row["feasible"]) == (p["status"], p["bound"], p["feasible"])
    assert df["status"].to_list()[-1] != "ok"  # 4096 sequences of 4k context do not fit one H100


@pytest.mark.parametrize("cols, text", [
    (dict(tp=[1, 2]), "'tp' is not a column points takes"),
    (dict(batch=[1.0, 2.0], k=[1]), "columns of different lengths"),
    (dict(k=[1, 2.5]), "k=2.5 at row 1; expected a whole number"),
    (dict(alpha=[0.5, 1.5]), "alpha"),
    (dict(batch=[1.0, float("nan")]), "batch has a non-finite value at row 1"),
    ({}, "no columns"),
])
def test_bad_columns_are_refused(cols, text):
    with pytest.raises(SpecError, match=None) as e:
        api.points(SC, **cols)
    assert text in str(e.value)


def _full_build(sc, dtype=None):
    """`api.point` the long way: a fresh build of the scenario and the packed program called on its leaves."""
    return api._point_dict(api._step(*sc.build(*(dtype,) if dtype else ())))


FAST = {  # structures whose points the loop varies (each goes through the bound program after its first)
    "eagle chain": (SC, dict(batch=[1.0, 7.0, 300.0, 4096.0], k=[1, 4, 2, 8], alpha=[0.5, 0.73, 0.9, 0.61],
                              context=[2048.0, 100.0, 32768.0, 0.0])),
    "tree, accepted length (k not free)": (
        Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b", k=3,
                 accepted_length=2.6, tree_topk=2, tree_tokens=6, batch=8),
        dict(batch=[1.0, 64.0, 512.0], context=[512.0, 4096.0, 8192.0])),
    "draft model, serving load, k 0 and k >= 1": (
        Scenario(target="qwen3-8b", hardware="h100-sxm", drafter="model", draft="qwen3-0.6b", k=3, alpha=0.7,
                 input_len=512, output_len=128, batch=4),
        dict(batch=[1.0, 16.0, 200.0], k=[0, 2, 5], alpha=[0.6, 0.8, 0.95])),
}


@pytest.mark.parametrize("name", FAST)
def test_point_one_at_a_time_is_bit_identical_to_a_full_build(name):
    from specjax import store

    base, cols = FAST[name]
    api.point(base)
    before = (store.COUNTS["compiled"], len(api._BOUND))
    n = len(next(iter(cols.values())))
    for i in range(n):
        sc = dataclasses.replace(base, **{c: v[i] for c, v in cols.items()})
        fast = api.point(sc)
        assert fast == _full_build(sc), (name, i)  # every field, bit for bit (NaN and inf are None in both)
    # one structure, one program: k crossing 0 (a serving load's scheduler defaults) is a second structure
    assert store.COUNTS["compiled"] == before[0]
    assert len(api._BOUND) == before[1] + (1 if "k" in cols and min(cols["k"]) == 0 else 0)


def test_point_in_float64_and_after_an_edited_file_is_a_full_build(tmp_path):
    sc64 = dataclasses.replace(SC, batch=33.0, alpha=0.77)
    assert api.point(sc64, dtype=np.float64) == _full_build(sc64, np.float64)
    assert api.point(sc64, dtype=np.float64)["speedup"] != api.point(sc64)["speedup"]  # float64 is not float32
    import shutil
    import time

    from specjax.inputs import models

    cfg = tmp_path / "tgt.json"
    shutil.copy(models.PRESET_DIR / "llama-3.1-8b.json", cfg)
    own = dataclasses.replace(SC, target=str(cfg))
    first = api.point(own)
    assert first == api.point(SC)  # the same config under another name
    text = cfg.read_text().replace('"num_hidden_layers": 32', '"num_hidden_layers": 40')
    assert text != cfg.read_text()
    time.sleep(0.01)
    cfg.write_text(text)
    edited = api.point(dataclasses.replace(own, batch=2.0))
    assert edited == _full_build(dataclasses.replace(own, batch=2.0)) and edited["t_target_s"] > first["t_target_s"]


def test_a_bad_value_in_the_loop_raises_the_one_line_error_of_a_fresh_scenario():
    api.point(SC)  # the structure is bound
    with pytest.raises(SpecError) as e:
        api.point(dataclasses.replace(SC, alpha=1.5))
    assert str(e.value) == "alpha=1.5; expected 0 <= alpha <= 1 (per-token acceptance)"
    with pytest.raises(SpecError) as e:
        api.point(dataclasses.replace(SC, batch=0.5))
    assert str(e.value).startswith("batch=0.5; expected 1 <= batch <= 1e8")
    long = dataclasses.replace(SC, context=200000.0)  # beyond the model's positions: checked by the bound path too
    with pytest.raises(SpecError) as warm:
        api.point(long)
    api._BOUND.clear()
    with pytest.raises(SpecError) as cold:
        api.point(long)
    assert str(warm.value) == str(cold.value) and "context=200000.0" in str(warm.value) \
        and "max_position_embeddings of llama-3.1-8b" in str(warm.value) and "\n" not in str(warm.value)


def test_point_with_values_is_point_of_the_replaced_scenario():
    """`api.point(sc, batch=..., k=..., alpha=..., context=...)` gives what `api.point(dataclasses.replace(sc,
    ...))` gives, and refuses what constructing that scenario refuses, with the same message."""
    tree = FAST["tree, accepted length (k not free)"][0]
    for sc, v in ((SC, dict(batch=300.0, k=5, alpha=0.81, context=1000.0)), (SC, dict(batch=2.0)),
                  (SC, dict(k=0, alpha=0.5)), (tree, dict(batch=64.0, k=4, tree_tokens=8)),  # k not free: in full
                  (FAST["draft model, serving load, k 0 and k >= 1"][0], dict(k=0, batch=3.0))):
        full = dataclasses.replace(sc, **v)
        assert api.point(sc, **v) == api.point(full) == _full_build(full)
    for bad in (dict(alpha=1.5), dict(batch=2.0, k=-1), dict(context=2e5), dict(k=2, alpha=float("nan")),
                dict(batch=1.0, tp=3)):
        with pytest.raises(SpecError) as fast:
            api.point(SC, **bad)
        with pytest.raises(SpecError) as full:
            api.point(dataclasses.replace(SC, **bad))
        assert str(fast.value) == str(full.value), bad
    dflash = Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="parallel", draft="dflash-llama-3.1-8b",
                      k=3, alpha=0.7, batch=8)
    assert api.point(dflash, k=9) == _full_build(dataclasses.replace(dflash, k=9))  # the block's last draft
    for call in (lambda: api.point(dflash, k=10), lambda: api.point(dataclasses.replace(dflash, k=10))):
        with pytest.raises(SpecError) as e:  # the structure is bound: the block is checked without a full build
            call()
        assert str(e.value).startswith("k=10; expected 1 <= k <= 9: the DFlash drafter 'dflash-llama-3.1-8b'")
