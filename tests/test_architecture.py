"""The architecture's promises: one-way imports without cycles, registries that take a new drafter
kind, a new reduction and a new ingest format from a test alone, string statuses in files and JSON,
status words on the status types only, strict dtypes."""

import ast
import importlib
import json
import pathlib

import jax
import jax.numpy as jnp
import polars as pl
import pytest

from specjax import Scenario, api, crossover, step
from specjax.engine import sweep
from specjax.inputs import drafters, ingest, models, spec
from specjax.outputs import io
from specjax.search import optimize, reductions, sensitivity
from specjax.cost.status import Curve, Point, Serving

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
        sc = Scenario(engine="roofline",
                      target="llama-3.1-8b", hardware="h100-sxm", drafter="toy-head", batch=8, k=3, alpha=0.7)
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


def test_toy_ingest_format_through_the_registry_alone(tmp_path, capsys):
    """A made-up engine log ("TOYSPEC batch=B drafts=D accepted=A" lines): detected, read and written by
    `specjax ingest` without --format, from one `register` call."""
    def toy_log(path):
        out = {}
        for line in pathlib.Path(path).read_text().splitlines():
            b, d, a = (float(w.split("=")[1]) for w in line.split()[1:])
            out.setdefault(int(b), ingest.Totals()).add(d, a)
        return out

    ingest.register(ingest.Format("toy-log", "toy", ingest.ACCEPTANCE, lambda head: "TOYSPEC" in head,
                                  ingest.per_file(toy_log), "a toy engine's log"))
    try:
        path = tmp_path / "toy.log"
        path.write_text("TOYSPEC batch=4 drafts=10 accepted=15\nTOYSPEC batch=4 drafts=30 accepted=25\n"
                        "TOYSPEC batch=16 drafts=8 accepted=4\n")
        assert ingest.detect(path) == "toy-log"
        from specjax.cli import main

        with pytest.raises(SystemExit) as e:
            main(["ingest", str(path), "--out", str(tmp_path / "acc.csv"), "--json"])
        assert e.value.code == 0, capsys.readouterr().err
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert (out["format"], out["engine"], out["kind"]) == ("toy-log", "toy", ingest.ACCEPTANCE)
        rows = pl.read_csv(tmp_path / "acc.csv").sort("batch")
        assert rows["batch"].to_list() == [4, 16] and rows["intervals"].to_list() == [2, 1]
        assert rows["accepted_length"].to_list() == pytest.approx([1 + 40 / 40, 1 + 4 / 8])
    finally:
        ingest.REGISTRY.pop("toy-log")


def test_statuses_are_strings_in_json_and_files(tmp_path):
    assert Point.names() == ("ok", "sd_over_memory", "base_over_memory", "model_does_not_fit", "invalid_input")
    assert Curve.names() == ("stops_paying", "helps_throughout", "never_helps", "hurts_at_small_batch",
                             "helps_with_dips", "invalid_input", "sd_does_not_fit")
    sc = Scenario(engine="roofline",
                  target="gpt-oss-120b", hardware="h200", draft_cost=0.1, batch=8, alpha=0.7, kv_dtype="fp8")
    assert json.loads(json.dumps(api.point(sc)))["status"] in Point.names()
    assert api.crossover(sc)["status"] in Curve.names()
    text = ('hardware = ["h200"]\n[[pairs]]\ntarget = "gpt-oss-120b"\ndrafter = "ratio"\ndraft_cost = 0.1\n'
            '[fixed]\nk = 3\n[axes]\nalpha = [0.0, 0.7]\n[reduce]\nkind = "crossover"\n')
    sweep.run(spec.from_text(text, "x.toml"), tmp_path)
    df = io.read_results(tmp_path).collect()
    assert df.schema["status"] == pl.Enum(list(Curve.names()))
    assert set(df["status"].cast(pl.String)) <= set(Curve.names())


def _docstrings(tree):
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_status_names_are_spelled_only_on_the_status_types():
    """Outside `cost/status.py` a status is a member (`Curve.STOPS_PAYING`) or asked of its type, never a
    string (docstrings may name one); and every curve status has its sentences, so a new one cannot
    break the text of `crossover` or `serve`."""
    names = set(Point.names()) | set(Curve.names()) | set(Serving.names())
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "cost" / "status.py":
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        found += [f"{path.relative_to(PKG)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs]
    assert not found, "status names spelled outside cost/status.py:\n" + "\n".join(found)
    for member in Curve:
        for which in ("message", *Curve.SENTENCES):
            assert isinstance(member.text(which), str)  # no field given: each reads "-"
    assert Curve.STOPS_PAYING.text("over_rate", switch_off_qps="4.2").startswith("speculation lowers TPOT up to 4.2")
    assert [Serving.of(n) for n in Serving.names()] == list(Serving)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_kernels_pass_under_strict_promotion(dtype, strict_promotion):
    """Strict promotion is enforced while tracing, and the result dtypes are known after tracing: the search
    kernels are traced (`jax.eval_shape`, as `jax.jit` traces them in the API and the sweep) rather than
    run op by op, which compiled every loop again on each call. `step` also runs."""
    for kw in (dict(drafter="eagle", draft="eagle3-llama-3.1-8b"), dict(drafter="ratio", draft_cost=0.1)):
        trees = Scenario(engine="roofline",
                         target="llama-3.1-8b", hardware="h100-sxm", batch=16, k=3, alpha=0.7, **kw).build(dtype)
        r = jax.jit(step)(*trees)
        assert r.speedup.dtype == dtype and r.status.dtype == jnp.int8 and 1.0 < float(r.speedup) < 4.0
        assert jax.eval_shape(crossover.find, *trees).crossover_batch.dtype == dtype
        assert jax.eval_shape(sensitivity.crossover_sensitivity, *trees)[2]["alpha"].dtype == dtype
        assert jax.eval_shape(optimize.search, *trees).k_star.dtype == dtype
        assert jax.eval_shape(optimize.switch_off_batch, *trees).dtype == dtype


def _command_params(name):
    """Option names (parameter names) of CLI command `name`, read from the typer app."""
    import typer.main

    app_mod = importlib.import_module("specjax.cli.app")

    return {p.name for p in typer.main.get_command(app_mod.app).commands[name].params}


def test_every_user_input_maps_to_exactly_one_catalogue_row():
    """One schema: Scenario fields, every model command's model flags (plot included), the load flags, spec
    pair and [fixed] keys, CSV input columns and the JSON echo each come from the catalogue, one row each."""
    import dataclasses

    from specjax import catalogue
    app_mod = importlib.import_module("specjax.cli.app")
    from specjax.inputs import measured

    rows = catalogue.INPUTS
    fields = {f.name for f in dataclasses.fields(Scenario)} - {"source"}
    assert fields == set(catalogue.SCENARIO)
    model_flags = {r.name for r in app_mod.flag_rows("model")}
    assert model_flags and model_flags <= fields
    for command in ("point", "crossover", "sensitivity", "optimize", "serve", "advise", "plot"):
        params = _command_params(command)
        assert model_flags <= params, (command, model_flags - params)
        # an option that names an input is that input's row (no second spelling of the same input)
        own = {p for p in params if p in rows and p not in model_flags and rows[p].flag is None}
        assert not own - {"batch", "qps", "concurrency", "acceptance_spread"}, (command, own)
    assert {r.name for r in app_mod.flag_rows("load")} <= _command_params("serve")
    assert set(spec.pair_keys()) - {"label"} == set(catalogue.PAIR) and all(rows[n].pair for n in catalogue.PAIR)
    assert all(rows[n].fixed for n in catalogue.FIXED)
    csv = [r.csv for r in rows.values() if r.csv]
    assert len(csv) == len(set(csv))  # a column names one input
    assert set(csv) <= set(measured.COLUMNS + measured.optional_columns())
    assert not set(csv) & set(measured.MEASUREMENT)
    sc = Scenario(target="llama-3.1-8b", hardware="h100-sxm", draft_cost=0.1, alpha=0.7, input_len=100,
                  output_len=10, qps=1.0, max_num_seqs=8, chunk_tokens=512)
    echo = api.inputs(sc)
    # qps given; draft_passes is echoed for a parallel drafter only, acceptance_spread where given (serve's flag)
    assert set(echo) - {"gpus", "rates", "scheduler_source"} == set(catalogue.ECHO) - {"concurrency", "draft_passes",
                                                                                       "acceptance_spread"}
    assert catalogue.INPUTS["engine"].default == Scenario.__dataclass_fields__["engine"].default


def test_cost_layer_imports_nothing_of_the_project_outside_it():
    _, files = _graph()
    for m, path in files.items():
        if m.startswith("specjax.cost"):
            outside = {i for i in _imports(path) if i.startswith("specjax") and not i.startswith("specjax.cost")}
            assert not outside, (m, outside)


def test_toy_input_through_the_catalogue_alone(tmp_path):
    """A new input is one catalogue row (here the target's dense parameters, a leaf no input names yet): the
    Scenario field with its range check, its effect on the kernel, the JSON echo, the CLI flag, the spec's
    [fixed] key and axis, and the CSV column all follow without editing another file."""
    import typer

    from specjax import catalogue
    app_mod = importlib.import_module("specjax.cli.app")
    from specjax.inputs import measured
    from specjax.inputs import scenario as scenario_mod
    from specjax.errors import SpecError

    row = catalogue.register(catalogue.Input(
        "toy_dense_params", "target", ("p_dense",), 1, 1e13, "dense parameters", "toy_dense_params", fixed=True,
        integer=True, sensitivity=False, scenario=True, flag="model", csv="toy_dense_params",
        help="The target's dense params (toy)."))
    try:
        Toy = scenario_mod.define()
        base = dict(target="llama-3.1-8b", hardware="h100-sxm", draft_cost=0.1, alpha=0.7, engine="roofline")
        dense = int(Toy(**base).build()[2].p_dense)
        full, half = api.point(Toy(**base)), api.point(Toy(**base, toy_dense_params=dense // 2))
        assert 0.5 < half["t_target_s"] / full["t_target_s"] < 0.6  # half the dense weights (the head stays)
        with pytest.raises(SpecError, match=r"toy_dense_params=0; expected an integer 1 <= toy_dense_params <= 1e13"):
            Toy(**base, toy_dense_params=0)
        assert api.inputs(Toy(**base, toy_dense_params=16))["toy_dense_params"] == 16
        app = typer.Typer()
        original, app_mod.app = app_mod.app, app
        try:
            app_mod.model_command(lambda model: print(model["toy_dense_params"]))
        finally:
            app_mod.app = original
        from typer.testing import CliRunner

        out = CliRunner().invoke(app, ["--target", "x", "--hardware", "y", "--toy-dense-params", "12"])
        assert out.exit_code == 0 and out.output.strip() == "12", out.output
        assert "toy_dense_params" in measured.optional_columns()
        fixed = spec._fixed({"fixed": {"toy_dense_params": 12}}, "toy.toml")
        assert fixed == {"toy_dense_params": 12} and "toy_dense_params" in catalogue.AXES
        with pytest.raises(SpecError, match="fixed.toy_dense_params=0"):
            spec._fixed({"fixed": {"toy_dense_params": 0}}, "toy.toml")
    finally:
        catalogue.unregister(row.name)
    assert "toy_dense_params" not in catalogue.AXES and "toy_dense_params" not in measured.optional_columns()


def test_csv_input_columns_take_the_catalogue_range(tmp_path):
    """A CSV column is checked against its input's row: tree_topk is 1..64 everywhere (the CSV took 4096)."""
    from specjax.errors import SpecError
    from specjax.inputs import measured

    lines = (pathlib.Path(__file__).parents[1] / "data/measured/trees.csv").read_text().splitlines()[:2]
    head, row = lines[0].split(","), lines[1].split(",")
    row[head.index("tree_topk")] = "100"
    path = tmp_path / "t.csv"
    path.write_text(lines[0] + "\n" + ",".join(row) + "\n")
    with pytest.raises(SpecError, match=r"line 2, column tree_topk: '100'; expected empty or an integer "
                                        r"1 <= tree_topk <= 64"):
        measured.load(path)
