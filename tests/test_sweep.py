"""Sweeps end to end: grids read back with polars vs point calls, reductions, sharding,
multiple processes, interruption and resume, metadata, and bad specs."""

import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import polars as pl
import pytest

from specjax import api
from specjax.outputs import io
from specjax.inputs import spec
from specjax.engine import sweep
from specjax.errors import SpecError
from specjax.inputs.scenario import Scenario
from sweep_helpers import assert_same, canonical, specjax

DATA = pathlib.Path(__file__).parent / "data"
ROOT = pathlib.Path(__file__).parents[1]


def cli(capsys, *args):
    """`specjax ARGS` in this process: (exit code, stdout, stderr)."""
    from specjax.cli import main

    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_tiny_sweep_matches_point_calls(tmp_path):
    s = spec.load(DATA / "tiny.toml")
    assert s.rows == 2 * 2 * 3 * 2 * 2
    res = sweep.run(s, tmp_path)
    assert res["chunks_written"] == 2 * 2 * 2  # 12 rows per combo in chunks of 7
    df = io.read_results(tmp_path).collect()
    assert df.height == s.rows and set(df["hardware"]) == {"h100-sxm", "mi300x"}
    for row in df.sample(12, seed=1).iter_rows(named=True):
        pair = next(p for p in s.pairs if p.label == row["pair"])
        sc = Scenario(engine="roofline",
                      target=pair.target, hardware=row["hardware"], drafter=pair.drafter, draft=pair.draft,
                      draft_cost=pair.draft_cost, batch=row["batch_seqs"], k=3, alpha=row["alpha"], context=1024.0)
        hw, dep, t, d, dec = sc.build(jnp.float64)
        if pair.target == "gpt-oss-20b":
            t = t.replace(n_experts=jnp.float64(row["n_experts"]))
            want = api.to_python(jax.jit(__import__("specjax").step)(hw, dep, t, d, dec))
            assert row["status"] in ("ok", "sd_over_memory", "base_over_memory", "model_does_not_fit")
            assert row["speedup"] == pytest.approx(want["speedup"], rel=2e-5)
            assert row["t_verify_s"] == pytest.approx(want["t_verify_s"], rel=2e-5)
        else:  # a dense target has no experts to vary: marked, not silently computed
            assert row["status"] == "invalid_input" and row["valid"] is False and row["speedup"] is None


def test_metadata_and_manifest(tmp_path):
    s = spec.load(DATA / "tiny.toml")
    sweep.run(s, tmp_path)
    part = next(tmp_path.glob("hardware=*/pair=*/part-*.parquet"))
    meta = pl.read_parquet_metadata(part)
    assert meta["specjax_spec"] == s.text and meta["specjax_spec_sha256"] == s.sha256
    assert json.loads(meta["specjax_versions"])["jax"] == jax.__version__
    man = json.loads((tmp_path / "_manifest.json").read_text())
    assert man["rows"] == s.rows and man["spec_sha256"] == s.sha256
    assert (tmp_path / "_spec.toml").read_text() == s.text
    assert not list(tmp_path.rglob(".*tmp*"))


def test_seed_sweep_crossover_and_rows(tmp_path):
    s = spec.load(ROOT / "sweeps" / "seed.toml")
    sweep.run(s, tmp_path)
    df = io.read_results(tmp_path).collect()
    llama = df.filter(pl.col("pair") == "llama-3-70b+ratio").sort("batch_seqs")
    first_below = llama.filter(pl.col("speedup") < 1)["batch_seqs"][0]
    assert 222.35 <= first_below <= 222.35 * (4096 ** (1 / 240))  # the next grid point after B* = 222.35
    assert (llama["status"] == "model_does_not_fit").all()  # 141 GB of bf16 weights on a 141 GB GPU
    assert df.filter(pl.col("batch_seqs") > 1000)["k_star"].min() == 0


def test_crossover_reduction_with_sensitivity(tmp_path):
    text = (ROOT / "sweeps" / "seed.toml").read_text().split("[axes]")[0].replace("alpha = 0.814\n", "")
    text += "[axes]\nalpha = [0.7, 0.814, 0.9]\n[reduce]\nkind = \"crossover\"\n[sensitivity]\n" \
            "inputs = [\"alpha\", \"hbm_bytes_per_s\"]\n"
    s = spec.from_text(text, "inline.toml")
    sweep.run(s, tmp_path)
    df = io.read_results(tmp_path).collect().sort("pair", "alpha")
    row = df.filter((pl.col("pair") == "gpt-oss-120b+ratio") & ((pl.col("alpha") - 0.814).abs() < 1e-6))
    assert row["crossover_batch"][0] == pytest.approx(1974.04, rel=1e-3)
    assert row["beyond_memory"][0] is True
    sc = Scenario(engine="roofline",
                  target="gpt-oss-120b", hardware="h200", drafter="ratio", draft_cost=0.145, k=2, alpha=0.814,
                  kv_dtype="fp8", roofline="pass")
    sens = api.sensitivity(sc)
    assert row["elasticity_alpha"][0] == pytest.approx(sens["elasticities"]["alpha"], rel=1e-3)
    assert np.all(np.diff(df.filter(pl.col("pair") == "llama-3-70b+ratio")["crossover_batch"].to_numpy()) > 0)


def test_max_speedup_and_best_k_reductions(tmp_path):
    base = (ROOT / "sweeps" / "seed.toml").read_text().split("[optimize]")[0]
    s = spec.from_text(base + "[reduce]\nkind = \"max_speedup\"\n", "a.toml")
    sweep.run(s, tmp_path / "a")
    a = io.read_results(tmp_path / "a").collect().sort("pair")
    assert a.height == 2 and a["max_speedup"][0] == pytest.approx(1.919, abs=2e-3)
    text = base.replace("k = 2\n", "").replace("batch = { start = 1, stop = 4096, num = 241, scale = \"log\" }",
                                                "batch = [1, 64, 512]")
    s = spec.from_text(text + "[reduce]\nkind = \"best_k\"\n[optimize]\nk_max = 8\n", "b.toml")
    sweep.run(s, tmp_path / "b")
    b = io.read_results(tmp_path / "b").collect().sort("pair", "batch_seqs")
    got = b.filter(pl.col("pair") == "llama-3-70b+ratio")["k_star"].to_list()
    assert got[0] == 5 and got[2] == 0
    s = spec.from_text(text + "[reduce]\nkind = \"best_k\"\n[optimize]\nk_max = 8\nmethod = \"brute\"\n", "c.toml")
    sweep.run(s, tmp_path / "c")
    c = io.read_results(tmp_path / "c").collect().sort("pair", "batch_seqs")
    assert c["k_star"].to_list() == b["k_star"].to_list() and c["k_relaxed"].is_null().all()


def test_no_recompilation_after_first_chunk(tmp_path, monkeypatch):
    """The chunk kernel is traced once for a whole sweep (12 chunks over 4 hardware x pair combinations:
    shapes never change) and not again for a second sweep of the same spec. Traces are counted by a
    Python side effect in the traced function (a chunk size no other test uses: a kernel of its own)."""
    from specjax.engine import sweep_kernel

    traces = []
    real = sweep_kernel.point
    monkeypatch.setattr(sweep_kernel, "point", lambda *a: traces.append(1) or real(*a))
    s = spec.from_text((DATA / "tiny.toml").read_text().replace("chunk_size = 7", "chunk_size = 5"), "tiny5.toml")
    first = sweep.run(s, tmp_path / "first")
    assert first["chunks_written"] == 4 * 3 and len(traces) == 1  # 12 rows per combination in chunks of 5
    second = sweep.run(s, tmp_path / "second")
    assert second["chunks_written"] == 4 * 3 and len(traces) == 1
    assert_same(canonical(tmp_path / "first"), canonical(tmp_path / "second"))


def test_sharded_over_four_devices_equals_one(tmp_path, capsys):
    """Four host devices need XLA_FLAGS before JAX starts: a subprocess; the one-device run is this process
    (in float32, as a fresh process evaluates). The subprocess's XLA_FLAGS replace the suite's (conftest.py), so it
    compiles at XLA's default optimisation and emitters: bit-identical columns also say the suite's faster-compiling
    flags change no number."""
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    with jax.enable_x64(False):
        code, _, err = cli(capsys, "sweep", DATA / "tiny.toml", "--out", tmp_path / "one", "--devices", "1", "--quiet")
    r4 = specjax("sweep", str(DATA / "tiny.toml"), "--out", str(tmp_path / "four"), "--devices", "4", "--quiet",
                 "--json", env=env)
    assert code == 0 and r4.returncode == 0, err + r4.stderr
    assert json.loads(r4.stdout)["devices"] == 4
    assert_same(canonical(tmp_path / "one"), canonical(tmp_path / "four"))


def test_two_processes_union_equals_one(tmp_path, capsys):
    port = 20000 + os.getpid() % 20000
    args = ["sweep", str(DATA / "tiny.toml"), "--out", str(tmp_path / "multi"), "--quiet", "--num-processes", "2",
            "--coordinator", f"localhost:{port}"]
    procs = [subprocess.Popen([sys.executable, "-m", "specjax", *args, "--process-id", str(i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    with jax.enable_x64(False):  # the single run in this process, float32 as the two processes evaluate
        code, _, err = cli(capsys, "sweep", DATA / "tiny.toml", "--out", tmp_path / "single", "--quiet")
    assert code == 0, err
    mans = [json.loads((tmp_path / "multi" / f"_manifest.{i}.json").read_text()) for i in range(2)]
    assert sum(m["chunks_written"] for m in mans) == 8 and all(m["chunks_written"] == 4 for m in mans)
    assert_same(canonical(tmp_path / "multi"), canonical(tmp_path / "single"))


BAD_SPECS = [  # (top-level lines, [fixed] lines, [axes] lines, extra sections, expected message)
    ("frobnicate = 1", "alpha = 0.5", "batch = [1]", "", "unknown top-level key 'frobnicate'"),
    ("", "alpha = 0.5", "batchh = [1]", "", "unknown axis 'batchh'"),
    ("", "alpha = 0.5", "batch = []", "", "axes.batch=[]"),
    ("", "alpha = 0.5", "batch = [-4, 8]", "", "axes.batch=-4"),
    ("", "alpha = 0.5", "batch = { start = 64, stop = 8, num = 4 }", "", "the range is inverted"),
    ("", "", "batch = [1]\nalpha = { start = 0.1, stop = 1.2, num = 4 }", "", "axes.alpha.stop=1.2"),
    ("", "alpha = 0.5", "batch = { start = 1, stop = 8, num = 0 }", "", "axes.batch.num=0"),
    ("", "alpha = 0.5", "batch = [1]", "[reduce]\nkind = \"median\"", "reduce.kind='median'"),
    ("", "alpha = 1.5", "batch = [1]", "", "fixed.alpha=1.5"),
    ("", "", "batch = [1]", "", "give exactly one of alpha, accepted_length"),
    ("chunk_size = 0", "alpha = 0.5", "batch = [1]", "", "chunk_size=0"),
    ("", "alpha = 0.5", "batch = [1]", "[reduce]\nkind = \"crossover\"", "remove it"),
    ("", "alpha = 0.5", "batch = [1]", "[sensitivity]\ninputs = [\"alpha\"]", "needs reduce.kind = 'crossover'"),
]


@pytest.mark.parametrize("top,fixed,axes,extra,msg", BAD_SPECS)
def test_bad_specs_name_file_and_field(tmp_path, capsys, top, fixed, axes, extra, msg):
    text = (f'{top}\nhardware = ["h200"]\n[[pairs]]\ntarget = "llama-3.1-8b"\ndrafter = "ngram"\n'
            f"[fixed]\n{fixed}\n[axes]\n{axes}\n{extra}\n")
    p = tmp_path / "bad.toml"
    p.write_text(text)
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "sweep", p, "--out", out)
    assert code == 2 and msg in err and "bad.toml" in err, err
    assert len(err.strip().splitlines()) == 1 and stdout == ""
    assert not out.exists()


def test_unknown_preset_in_spec(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('hardware = ["h300"]\n[[pairs]]\ntarget = "llama-3.1-8b"\ndrafter = "ngram"\n'
                 '[fixed]\nalpha = 0.5\n[axes]\nbatch = [1]\n')
    with pytest.raises(SpecError, match="unknown hardware 'h300'"):
        spec.load(p)


def test_every_shipped_spec_validates():
    names = {p.stem for p in (ROOT / "sweeps").glob("*.toml")}
    assert names >= {"seed", "dense_vs_moe", "hardware", "long_context", "big"}
    for p in (ROOT / "sweeps").glob("*.toml"):
        s = spec.load(p)
        assert s.rows >= 1
    assert spec.load(ROOT / "sweeps" / "big.toml").points >= 100_000_000


def test_lock_refuses_second_writer(tmp_path):
    s = spec.load(DATA / "tiny.toml")
    (tmp_path / io.LOCK).write_text(f"{__import__('socket').gethostname()} {os.getpid()}")
    with pytest.raises(SpecError, match="another sweep is writing"):
        sweep.run(s, tmp_path)
    (tmp_path / io.LOCK).write_text(f"{__import__('socket').gethostname()} 999999")  # stale: taken over
    sweep.run(s, tmp_path)
    assert not (tmp_path / io.LOCK).exists()


def test_more_than_2_31_rows_needs_x64(tmp_path, capsys):
    p = tmp_path / "huge.toml"
    p.write_text('hardware = ["h100-sxm"]\nchunk_size = 1048576\n[[pairs]]\ntarget = "llama-3.1-8b"\n'
                 'drafter = "ngram"\n[axes]\nbatch = { start = 1, stop = 4096, num = 4096, scale = "log" }\n'
                 "alpha = { start = 0.0, stop = 1.0, num = 4096 }\ncontext = { start = 0, stop = 131072, num = 512 }\n")
    try:  # a fresh process is float32 (the test session runs with x64 on): --x64 turns it on
        jax.config.update("jax_enable_x64", False)
        code, _, err = cli(capsys, "sweep", p, "--dry-run", "--out", tmp_path / "o")
        assert code == 2 and "need 64-bit indices; run with --x64" in err and len(err.strip().splitlines()) == 1
        code, out, err = cli(capsys, "sweep", p, "--dry-run", "--x64", "--json", "--out", tmp_path / "o")
        assert code == 0, err
        assert jax.config.jax_enable_x64
    finally:
        jax.config.update("jax_enable_x64", True)
    d = json.loads(out)
    assert d["points"] == 4096 * 4096 * 512 and d["chunks"] == 8192 and d["est_peak_rss_bytes"] < 2e9
    assert not (tmp_path / "o").exists()


def test_spec_refuses_colliding_or_unsafe_hardware_names_and_indivisible_tp_axes(tmp_path):
    """Partition labels must be unique and round-trip (hardware=<stem>); a tp axis gets the checks the
    CLI applies to one tp (heads and widths divide)."""
    from specjax.inputs import hardware as _hw

    preset = (_hw.PRESET_DIR / "h100-sxm.toml").read_text()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for f in (tmp_path / "a" / "gpu.toml", tmp_path / "b" / "gpu.toml", tmp_path / "x=y.toml"):
        f.write_text(preset)
    base = ('name = "t"\nengine = "roofline"\nhardware = {hw}\n[[pairs]]\ntarget = "llama-3.1-8b"\n'
            'drafter = "ngram"\n[fixed]\nk = 3\nalpha = 0.7\nbatch = 8\n')
    two = f'["{tmp_path / "a" / "gpu.toml"}", "{tmp_path / "b" / "gpu.toml"}"]'
    with pytest.raises(SpecError, match="share the result directory hardware=gpu"):
        spec.from_text(base.format(hw=two), "s.toml")
    with pytest.raises(SpecError, match="letters, digits and . _ \\+ -"):
        spec.from_text(base.format(hw=f'["{tmp_path / "x=y.toml"}"]'), "s.toml")
    with pytest.raises(SpecError, match="axes.tp = 3 .*a divisor of the 32 attention heads"):
        spec.from_text(base.format(hw='["h100-sxm"]') + "[axes]\ntp = [1, 2, 3, 4]\n", "s.toml")
    ok = spec.from_text(base.format(hw='["h100-sxm"]') + "[axes]\ntp = [1, 2, 4, 8]\n", "s.toml")
    assert ok.rows == 4
