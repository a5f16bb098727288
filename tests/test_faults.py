"""Faults during sweeps: full disk, unwritable output, concurrent writers, kills at random points."""

import errno
import pathlib
import random
import signal
import subprocess
import sys
import time

import jax
import polars as pl
import pytest

from specjax.outputs import io
from specjax.inputs import spec
from specjax.engine import sweep
from specjax.errors import SpecError
from sweep_helpers import assert_same, canonical

DATA = pathlib.Path(__file__).parent / "data"


def cli(capsys, *args):
    """`specjax ARGS` in this process, evaluating in float32 as a fresh process does (the test session runs
    with x64 on): (exit code, stdout, stderr). Subprocesses only where the process boundary is the point."""
    from specjax.cli import main

    with jax.enable_x64(False), pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_full_disk_keeps_earlier_results_and_resumes(tmp_path_factory, monkeypatch):
    s = spec.load(DATA / "tiny.toml")
    tmp_path, clean = tmp_path_factory.mktemp("full"), tmp_path_factory.mktemp("clean")
    real = pl.DataFrame.write_parquet
    calls = {"n": 0}

    def failing(self, file, **kw):
        calls["n"] += 1
        if calls["n"] == 4:
            pathlib.Path(file).write_bytes(b"PAR1 half a file")  # a partial temporary, as a full disk leaves
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, file, **kw)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", failing)
    with pytest.raises(SpecError, match="No space left on device"):
        sweep.run(s, tmp_path)
    parts = sorted(tmp_path.glob("hardware=*/pair=*/part-*.parquet"))
    assert len(parts) == 3
    for p in parts:
        pl.read_parquet(p)  # intact
    assert not list(tmp_path.rglob(".*tmp*")), "temporary files are removed"
    assert not (tmp_path / io.LOCK).exists() and not (tmp_path / "_manifest.json").exists()
    monkeypatch.setattr(pl.DataFrame, "write_parquet", real)
    res = sweep.run(s, tmp_path, resume=True)
    assert res["chunks_skipped"] == 3 and res["chunks_written"] == 5
    sweep.run(s, clean)
    assert_same(canonical(tmp_path), canonical(clean))


def test_unwritable_output_directory(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = cli(capsys, "sweep", DATA / "tiny.toml", "--out", blocker / "out")
    assert code == 2 and "cannot create output directory" in err
    assert len(err.strip().splitlines()) == 1 and blocker.read_text() == "not a directory"


def test_two_concurrent_sweeps_do_not_corrupt(tmp_path, capsys):
    out = tmp_path / "shared"
    spec_path = tmp_path / "slow.toml"
    spec_path.write_text((DATA / "tiny.toml").read_text().replace("chunk_size = 7", "chunk_size = 1"))
    procs = [subprocess.Popen([sys.executable, "-m", "specjax", "sweep", str(spec_path), "--out", str(out), "--quiet"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    codes = sorted(r[2] for r in results)
    assert codes == [0, 2], results
    refused = next(r for r in results if r[2] == 2)[1]
    assert "another sweep is writing" in refused or "holds an earlier sweep" in refused
    code, _, err = cli(capsys, "sweep", spec_path, "--out", tmp_path / "clean", "--quiet")
    assert code == 0, err
    assert_same(canonical(out), canonical(tmp_path / "clean"))  # sibling directories, not nested


KILL_SPEC = """
name = "killme"
hardware = ["h100-sxm", "h200"]
chunk_size = 50
[[pairs]]
target = "qwen3-30b-a3b"
drafter = "model"
draft = "qwen3-0.6b"
[fixed]
k = 3
[axes]
batch = { start = 1, stop = 2048, num = 40, scale = "log" }
alpha = { start = 0.3, stop = 0.95, num = 30 }
context = [512, 4096, 32768]
[optimize]
k_max = 8
"""


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("clean")
    (d / "kill.toml").write_text(KILL_SPEC)
    from specjax.cli import main

    with jax.enable_x64(False), pytest.raises(SystemExit) as e:  # float32, as the killed processes run
        main(["sweep", str(d / "kill.toml"), "--out", str(d / "out"), "--quiet"])
    assert e.value.code == 0
    return d / "kill.toml", canonical(d / "out")


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_sigkill_at_random_point_then_resume_is_identical(tmp_path, clean_run, seed, capsys):
    spec_path, want = clean_run
    out = tmp_path / "killed"
    rng = random.Random(seed)
    target_parts = rng.randint(1, 120)
    p = subprocess.Popen([sys.executable, "-m", "specjax", "sweep", str(spec_path), "--out", str(out), "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while time.time() < deadline and p.poll() is None:
        if len(list(out.glob("hardware=*/pair=*/part-*.parquet"))) >= target_parts:
            break
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    p.wait()
    parts = list(out.glob("hardware=*/pair=*/part-*.parquet"))
    assert len(parts) < 144, "the kill must land before the end"
    for f in parts:
        pl.read_parquet(f)
    code, _, err = cli(capsys, "sweep", spec_path, "--out", out, "--resume", "--quiet")  # stale lock taken over
    assert code == 0, err
    assert_same(canonical(out), want)
    assert not list(out.rglob(".*.tmp-*")), "a killed writer's temporaries are removed on resume"
    assert io.read_results(out).select(pl.len()).collect().item() == want.height


def test_a_foreign_directory_is_refused_and_nothing_of_the_user_is_touched(tmp_path):
    """A sweep into a directory of the user's own files (their temporaries and a `_manifest.json` that
    is not ours included) is refused, with or without --overwrite, and every file stays as it was."""
    s = spec.load(DATA / "tiny.toml")
    out = tmp_path / "mine"
    (out / "deep").mkdir(parents=True)
    files = {out / "notes.txt": "mine", out / "deep" / ".draft.tmp-123": "half-written by my editor",
             out / ".x.tmp-9": "also mine"}
    for f, text in files.items():
        f.write_text(text)
    for overwrite in (False, True):
        with pytest.raises(SpecError, match="files specjax did not write"):
            sweep.run(s, out, overwrite=overwrite)
    assert all(f.read_text() == text for f, text in files.items())
    assert sorted(p.name for p in out.iterdir()) == [".x.tmp-9", "deep", "notes.txt"]


def test_only_our_temporaries_are_cleaned(tmp_path):
    s = spec.load(DATA / "tiny.toml")
    sweep.run(s, tmp_path)
    part = next(tmp_path.glob("hardware=*/pair=*/part-*.parquet"))
    ours = part.with_name(f".{part.name}.tmp-4242")
    ours.write_bytes(b"PAR1 half")
    (tmp_path / "._manifest.json.tmp-77").write_text("{")
    res = sweep.run(s, tmp_path, resume=True)
    assert res["chunks_written"] == 0 and not ours.exists() and not (tmp_path / "._manifest.json.tmp-77").exists()


def test_resume_refuses_a_changed_input_file(tmp_path):
    """--resume compares the resolved inputs (file bytes and package version), not just the spec text:
    editing a hardware file the spec names between runs would mix old and new results."""
    hw = tmp_path / "gpu.toml"
    hw.write_text((pathlib.Path(io.__file__).parents[1] / "presets" / "hardware" / "h100-sxm.toml").read_text())
    text = (DATA / "tiny.toml").read_text().replace('hardware = ["h100-sxm", "mi300x"]', f'hardware = ["{hw}"]')
    s = spec.from_text(text, "t.toml")
    out = tmp_path / "out"
    sweep.run(s, out)
    assert (out / sweep.INPUTS_FILE).read_text() == s.inputs_sha256()
    assert sweep.run(s, out, resume=True)["chunks_written"] == 0  # unchanged: resumes
    hw.write_text(hw.read_text().replace("hbm_bytes_per_s = 3.35e+12", "hbm_bytes_per_s = 4e12"))
    with pytest.raises(SpecError, match="changed since"):
        sweep.run(s, out, resume=True)
    assert sweep.run(s, out, overwrite=True)["chunks_written"] > 0


def test_report_never_replaces_an_earlier_sweep_silently(tmp_path, capsys):
    out = tmp_path / "rep"
    code, _, err = cli(capsys, "report", DATA / "tiny.toml", "--out", out)
    assert code == 0, err
    before = sorted(p.stat().st_mtime_ns for p in (out / "data").glob("hardware=*/pair=*/part-*.parquet"))
    code, _, err = cli(capsys, "report", DATA / "tiny.toml", "--out", out)
    assert code == 2 and "earlier sweep" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.stat().st_mtime_ns for p in (out / "data").glob("hardware=*/pair=*/part-*.parquet")) == before
    assert cli(capsys, "report", DATA / "tiny.toml", "--out", out, "--resume")[0] == 0
    assert cli(capsys, "report", DATA / "tiny.toml", "--out", out, "--overwrite")[0] == 0


def _small_fs(tmp_path, size="24k"):
    """A real, tiny tmpfs (a full disk that the writers themselves hit), or a visible skip."""
    import os
    import shutil

    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a real full disk needs root to mount a tmpfs (not root here)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True,
                       text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()[:80]})")
    return mnt


@pytest.mark.parametrize("kind", ["sweep", "validate", "calibrate", "plot"])
def test_real_full_disk_gives_one_line_and_leaves_no_temporary(tmp_path, kind, capsys):
    """On a real full file system (polars raises ComputeError, not OSError) every writer gives one line
    on stderr, exit 2, and leaves no hidden temporary behind."""
    mnt = _small_fs(tmp_path)
    try:
        public = pathlib.Path(__file__).parents[1] / "data" / "measured" / "public.csv"
        csv = tmp_path / "rows.csv"  # 40 rows: enough for calibrate to identify a term and reach its writer
        csv.write_text("".join(public.read_text().splitlines(keepends=True)[:41]))
        filler = mnt / "filler"
        if kind != "sweep":  # leave no room at all
            with open(filler, "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 1024)
                        f.flush()
                except OSError:
                    pass
        args = {"sweep": ["sweep", str(pathlib.Path(__file__).parents[1] / "sweeps" / "seed.toml"), "--out",
                          str(mnt / "out"), "--quiet"],
                "validate": ["validate", csv, "--out", str(mnt / "rows.csv")],
                "calibrate": ["calibrate", csv, "--steps", "10", "--out", str(mnt / "p.toml"), "--json"],
                "plot": ["plot", "roofline", "--target", "llama-3.1-8b", "--hardware", "h100-sxm",
                         "--out", str(mnt / "fig")]}[kind]
        code, _, err = cli(capsys, *args)
        assert code == 2, err[-800:]
        assert "No space left on device" in err and len(err.strip().splitlines()) == 1, err[-800:]
        assert not [p for p in mnt.rglob("*") if ".tmp" in p.name], list(mnt.rglob("*"))
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_a_plan_that_does_not_fit_in_memory_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    """What the dry run says will not fit is refused up front (it used to die of OOM halfway)."""
    from specjax.cli import main

    text = (DATA / "tiny.toml").read_text().replace("chunk_size = 7", "chunk_size = 20000")
    text = text.replace("batch = [1, 16, 256]\nalpha = [0.5, 0.8]", "alpha = { start = 0.1, stop = 0.9, num = 20000 }")
    path = tmp_path / "s.toml"
    path.write_text(text + '\n[reduce]\nkind = "crossover"\n')
    monkeypatch.setattr(sweep, "available_memory", lambda: int(5e8))
    with pytest.raises(SystemExit) as e:
        main(["sweep", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "one chunk needs about" in err and "smaller chunk_size" in err
    assert not (tmp_path / "out").exists()



def test_a_lock_with_an_impossible_pid_is_stale(tmp_path):
    """A lock file naming a pid no process can have (a huge or negative number) is taken over."""
    import socket
    from specjax.outputs import io
    for pid in ("99999999999999999999999999", "-5", "0"):
        (tmp_path / io.LOCK).write_text(f"{socket.gethostname()} {pid}")
        with io.locked(tmp_path):
            assert (tmp_path / io.LOCK).read_text().split()[1] != pid
        assert not (tmp_path / io.LOCK).exists()
