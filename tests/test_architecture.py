"""The architecture's promises: one-way imports without cycles, registries that take a new drafter
kind and a new reduction from a test alone, string statuses in files and JSON, strict dtypes."""

import ast
import json
import pathlib

import jax
import jax.numpy as jnp
import polars as pl
import pytest

from specjax import Scenario, api, crossover, step
from specjax.engine import sweep
from specjax.inputs import drafters, models, spec
from specjax.outputs import io
from specjax.search import optimize, reductions, sensitivity
from specjax.cost.status import Curve, Point

PKG = pathlib.Path(__file__).parents[1] / "specjax"
# modules of the model and search layers: pure JAX, no files, tables, figures or command line
PURE = ("cost", "search")
FORBIDDEN = {"polars", "matplotlib", "typer", "rich", "specjax.outputs", "specjax.cli", "specjax.inputs",
             "specjax.engine"}


def _module_name(path):
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path):
    """Absolute names of the modules `path` imports (relative imports resolved)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def _graph():
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    return {m: {i for i in _imports(p) if i in files} for m, p in files.items()}, files


def test_no_import_cycles():
    graph, _ = _graph()
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for n in graph[m]:
            if n == m or n.startswith(m + "."):  # a package importing its own submodules
                continue
            if state.get(n) == "open":
                raise AssertionError(f"import cycle: {' -> '.join(stack + [n])}")
            if n not in state:
                visit(n, stack + [n])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_model_and_search_layers_import_no_io_tables_plots_or_cli():
    _, files = _graph()
    pure = [m for m in files if any(m.startswith(f"specjax.{layer}") for layer in PURE)]
    assert len(pure) >= 8, pure  # the layers exist
    for m in pure:
        bad = {i for i in _imports(files[m]) if any(i == f or i.startswith(f + ".") for f in FORBIDDEN)}
        assert not bad, f"{m} imports {sorted(bad)}"


def test_toy_drafter_and_reduction_through_the_registries_alone(tmp_path):
    """A drafter whose pass costs the target's own LM head, and a reduction that keeps the step time."""
    def half_head(target, draft, dts):
        m = models.target(target, **{k: v for k, v in dts.items() if k != "expert_dtype"})
        zero = jnp.zeros_like(m.p_dense)
        return m.replace(p_dense=zero, p_expert=zero, n_moe_layers=zero, n_full_layers=zero, p_stored=zero,
                         head_resident=zero, n_layers=zero + 1.0)

    def keep_step_time(hw, deploy, tgt, draft, dec, invalid, values, cfg):
        r = step(hw, deploy, tgt, draft, dec)
        return reductions.masked(invalid, t_sd_ms=r.t_sd_step_s * 1e3), r.status, r.status == int(Point.OK)

    drafters.register(drafters.DrafterKind("toy-head", "a drafter of one LM head", half_head))
    reductions.register(reductions.Reduction("step_ms", keep_step_time, Point, needs_batch=True,
                                             summary=(("t_sd_ms", ("min", "max")),)))
    try:
        sc = Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="toy-head", batch=8, k=3, alpha=0.7)
        r = api.point(sc)
        assert r["status"] == "ok" and 1.0 < r["speedup"] < 4.0
        assert r["t_draft_s"] == pytest.approx(128256 * 4096 * 2 / 3.35e12, rel=0.05)  # one head read
        text = ('engine = "roofline"\nhardware = ["h100-sxm"]\n[[pairs]]\ntarget = "llama-3.1-8b"\n'
                'drafter = "toy-head"\n[fixed]\nk = 3\nalpha = 0.7\n[axes]\nbatch = [1, 8, 64]\n'
                '[reduce]\nkind = "step_ms"\n')
        s = spec.from_text(text, "toy.toml")
        sweep.run(s, tmp_path)
        df = io.read_results(tmp_path).collect().sort("batch_seqs")
        assert df["t_sd_ms"][1] == pytest.approx(r["t_sd_step_s"] * 1e3, rel=1e-5)
        from specjax.outputs import summary

        assert summary.summarize(tmp_path)["t_sd_ms_max"][0] == pytest.approx(df["t_sd_ms"].max())
    finally:
        drafters.REGISTRY.pop("toy-head")
        reductions.REGISTRY.pop("step_ms")


def test_statuses_are_strings_in_json_and_files(tmp_path):
    assert Point.names() == ("ok", "sd_over_memory", "base_over_memory", "model_does_not_fit", "invalid_input")
    assert Curve.names() == ("stops_paying", "helps_throughout", "never_helps", "hurts_at_small_batch",
                             "helps_with_dips", "invalid_input")
    sc = Scenario(target="gpt-oss-120b", hardware="h200", draft_cost=0.1, batch=8, alpha=0.7, kv_dtype="fp8")
    assert json.loads(json.dumps(api.point(sc)))["status"] in Point.names()
    assert api.crossover(sc)["status"] in Curve.names()
    text = ('hardware = ["h200"]\n[[pairs]]\ntarget = "gpt-oss-120b"\ndrafter = "ratio"\ndraft_cost = 0.1\n'
            '[fixed]\nk = 3\n[axes]\nalpha = [0.0, 0.7]\n[reduce]\nkind = "crossover"\n')
    sweep.run(spec.from_text(text, "x.toml"), tmp_path)
    df = io.read_results(tmp_path).collect()
    assert df.schema["status"] == pl.Enum(list(Curve.names()))
    assert set(df["status"].cast(pl.String)) <= set(Curve.names())


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_kernels_pass_under_strict_promotion(dtype, strict_promotion):
    """Strict promotion is enforced while tracing, and the result dtypes are known after tracing: the search
    kernels are traced (`jax.eval_shape`, as `jax.jit` traces them in the API and the sweep) rather than
    run op by op, which compiled every loop again on each call. `step` also runs."""
    for kw in (dict(drafter="eagle", draft="eagle3-llama-3.1-8b"), dict(drafter="ratio", draft_cost=0.1)):
        trees = Scenario(target="llama-3.1-8b", hardware="h100-sxm", batch=16, k=3, alpha=0.7, **kw).build(dtype)
        r = jax.jit(step)(*trees)
        assert r.speedup.dtype == dtype and r.status.dtype == jnp.int8 and 1.0 < float(r.speedup) < 4.0
        assert jax.eval_shape(crossover.find, *trees).crossover_batch.dtype == dtype
        assert jax.eval_shape(sensitivity.crossover_sensitivity, *trees)[2]["alpha"].dtype == dtype
        assert jax.eval_shape(optimize.search, *trees).k_star.dtype == dtype
        assert jax.eval_shape(optimize.switch_off_batch, *trees).dtype == dtype
