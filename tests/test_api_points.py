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
            assert np.float32(row[key]) == np.float32(p[key]), key
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
