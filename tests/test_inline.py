"""`specjax.inline`: `api.point`'s step program runs on specjax's own synchronous CPU client, compiled there or
loaded there from the store, and answers what the same program on JAX's default client and `api.points` (a
batched program on JAX's default client) answer, bit for bit; it can be turned off, and JAX's own
configuration is left as it was."""

import math

import jax
import numpy as np
import pytest

from specjax import api, inline, store
from specjax.cost.speculative import step
from specjax.inputs.scenario import Scenario

SC = Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b", k=3,
              alpha=0.7, batch=16)
COLS = dict(batch=[1.0, 7.0, 300.0, 4096.0, 64.0], k=[1, 4, 2, 8, 0], alpha=[0.5, 0.73, 0.9, 0.61, 0.8],
            context=[2048.0, 100.0, 32768.0, 0.0, 8192.0])
ROWS = [{c: v[i] for c, v in COLS.items()} for i in range(len(COLS["batch"]))]

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the inline client serves a CPU backend only")


def _bound(sc):
    """The `store.Bound` that `api.point` holds for this scenario's structure under the current setting."""
    (found,) = [b for key, (b, *_) in api._BOUND.items() if key[0] == sc.structure() and key[-1] == inline.enabled()]
    return found


def _client_of(bound):
    """The client the bound program's outputs live on (where it ran)."""
    (device,) = bound.program.exe(bound.packs, bound.rest)[0].devices()
    return device.client


def _same_as_points_row(p, row, ulp=0):
    """Every field of one `api.point` answer equals the `api.points` row: float32 bit for bit, or within `ulp`
    units in the last place."""
    assert set(p) <= set(row)
    for key, v in p.items():
        w = row[key]
        if isinstance(v, (str, bool)) or v is None:
            assert (w is None or not math.isfinite(w)) if v is None and not isinstance(w, str) else w == v, key
        else:
            a, b = (int(np.float32(x).view(np.int32)) for x in (v, w))
            assert abs(a - b) <= ulp, (key, v, w)


def test_point_runs_inline_and_equals_the_default_client_and_points():
    async_dispatch = jax.config.values["jax_cpu_enable_async_dispatch"]
    try:
        inline.enable(True)
        on = [api.point(SC, **r) for r in ROWS]
        bound = _bound(SC)
        assert bound.program.inline and _client_of(bound) is inline.client()
        assert inline.client() is not jax.devices()[0].client
        inline.enable(False)
        off = [api.point(SC, **r) for r in ROWS]
        bound = _bound(SC)
        assert not bound.program.inline and _client_of(bound) is jax.devices()[0].client
    finally:
        inline.enable(None)
    assert on == off  # every field of every point, bit for bit (float32's shortest decimal; NaN, inf -> None)
    assert len({p["speedup"] for p in on}) == len(ROWS) and on[-1]["speedup"] == 1.0  # k=0: no speculation
    for p, r in zip(on, ROWS):  # the batched program on one row: the same bits
        _same_as_points_row(p, api.points(SC, **{c: np.asarray([v]) for c, v in r.items()}).row(0, named=True))
    # on several rows XLA vectorizes the batched program over them, which moves some fields by an ulp or two
    # (so on main before the inline client too: 27 of 120 rows differ, by 2 ulp at most; bench/README.md)
    df = api.points(SC, **{c: np.asarray(v) for c, v in COLS.items()})
    for i, p in enumerate(on):
        _same_as_points_row(p, df.row(i, named=True), ulp=2)
    assert jax.config.values["jax_cpu_enable_async_dispatch"] == async_dispatch  # JAX's own setting untouched


def test_a_stored_program_loads_onto_the_inline_client(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_dir", store._dir)  # restored afterwards
    store.enable(tmp_path / "exe")
    fresh = store.jit(step, inline=True)
    trees = SC.build()
    stored = store.COUNTS["stored"]
    compiled = fresh(*trees)
    assert store.COUNTS["stored"] == stored + 1 and next(iter(fresh.memory.values())).inline
    fresh.memory.clear()
    before = store.COUNTS["loaded"]
    loaded = fresh(*trees)
    (program,) = fresh.memory.values()
    assert store.COUNTS["loaded"] == before + 1 and program.stored is not None and program.inline
    try:
        inline.enable(False)
        default = api._step(*trees)  # the same step on JAX's default client
    finally:
        inline.enable(None)
    for a, b, c in zip(compiled, loaded, default):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes() == np.asarray(c).tobytes()


def test_off_by_the_environment_and_only_for_host_inputs(monkeypatch):
    fresh = store.jit(step, inline=True)
    monkeypatch.setattr(inline, "_on", None)
    monkeypatch.setenv(inline.ENV, "0")
    assert not inline.enabled() and inline.client() is None and fresh._device((("float32", (77,)),)) is None
    monkeypatch.setattr(inline, "_on", None)
    monkeypatch.setenv(inline.ENV, "1")
    assert inline.enabled() and inline.device() is not None
    assert fresh._device((("float32", (77,)),)) is inline.device()
    assert fresh._device((("float32", (76,)), None)) is None  # a leaf passed as it is (a jax.Array): not inline
    assert store.jit(step)._device((("float32", (77,)),)) is None  # an entry point not marked inline


def test_a_client_that_cannot_take_the_program_is_refused_and_the_default_one_serves(tmp_path, monkeypatch):
    """Where compiling or loading onto the inline client fails (another jax), the program is compiled or loaded
    for JAX's default device instead, and the inline client is not used again in the process."""
    import types

    monkeypatch.setattr(store, "_dir", store._dir)
    monkeypatch.setattr(inline, "_failed", None)
    store.enable(tmp_path / "exe")
    monkeypatch.setattr(inline, "device", lambda: types.SimpleNamespace(client="no such client"))
    fresh = store.jit(step, inline=True)
    trees = SC.build()
    compiled = fresh(*trees)
    (program,) = fresh.memory.values()
    assert not program.inline and "compiling for it failed" in inline.refused() and inline.client() is None
    monkeypatch.setattr(inline, "_failed", None)  # the stored entry: loading onto the inline client fails too
    fresh.memory.clear()
    loaded = fresh(*trees)
    (program,) = fresh.memory.values()
    assert program.stored is not None and not program.inline and "loading a stored program" in inline.refused()
    for a, b in zip(compiled, loaded):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    _, leaves, _ = fresh._program(*fresh.split(trees, {}))
    (device,) = program.exe(*store.pack_in(leaves, program.layout))[0].devices()
    assert device.client is jax.devices()[0].client


@pytest.mark.parametrize("as_array", [False, True])  # NumPy scalars (the bound program) or 0-d arrays (a build)
def test_the_answer_of_a_result_field_by_field(as_array):
    from specjax.cost.speculative import Result

    f = (lambda v: np.asarray(v)) if as_array else (lambda v: v)  # noqa: E731
    r = Result(speedup=f(np.float32(0.7)), tokens_per_step=f(np.float32(np.nan)), alpha=f(np.float32(np.inf)),
               t_target_s=f(np.float32(-0.0)), t_draft_s=f(np.float32(1e-9)), t_verify_s=f(np.float32(3.0e9)),
               t_sd_step_s=f(np.float32(-np.inf)), throughput_base_tok_s=f(np.float32(1762.8807)),
               throughput_sd_tok_s=f(np.float32(0.1)), max_batch_base=f(np.float32(123456789.0)),
               max_batch_sd=f(np.float32(np.nan)), feasible=f(np.float32(np.nan)),
               verify_compute_bound=f(np.float32(1.0)), status=f(np.int8(3)))
    got = api._point_dict(r)
    assert list(got) == [*Result._fields[:-3], "feasible", "status", "bound"]
    assert got == dict(speedup=0.7, tokens_per_step=None, alpha=None, t_target_s=-0.0, t_draft_s=1e-9, t_verify_s=3e9,
                       t_sd_step_s=None, throughput_base_tok_s=1762.8807, throughput_sd_tok_s=0.1,
                       max_batch_base=123456790,  # float32's shortest decimal of 123456792, as every writer gives it
                       max_batch_sd=None, feasible=False, status="model_does_not_fit", bound="compute")
    flags = api._point_dict(r._replace(feasible=f(np.float32(1.0)), verify_compute_bound=f(np.float32(0.0))))
    assert flags["feasible"] is True and flags["bound"] == "memory"
