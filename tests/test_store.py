"""The store of compiled executables (`specjax.store`): a second process with the same inputs compiles
nothing (the store's own counters and JAX's compile events, through `--profile`) and prints the same bytes;
a directory or entry that another user could have written is refused; a damaged entry is compiled again
with a one-line warning; two processes at once both succeed; the packed calling convention gives the
plain jit's numbers; eviction keeps the most recently used entries."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from specjax import store
from specjax.cost.speculative import step
from specjax.inputs.scenario import Scenario

CROSSOVER = ["crossover", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle",
             "--draft", "eagle3-llama-3.1-8b", "--k", "3", "--alpha", "0.7", "--json"]
# the store's permission checks and concurrent writers do not depend on the program: `point` compiles in a
# fraction of the crossover's time (each of those tests compiles it cold two or three times)
POINT = ["point", *CROSSOVER[1:], "--batch", "8"]


def run(args, cache, cwd):
    env = dict(os.environ, SPECJAX_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "specjax", "--profile", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def store_counts(stderr):
    m = re.search(r"executable store (.*): (\d+) loaded, (\d+) compiled, (\d+) stored", stderr)
    assert m, stderr
    return m[1], int(m[2]), int(m[3]), int(m[4])


def seconds(stderr, part):
    return float(re.search(rf"profile: {part} ([\d.]+) s", stderr)[1])


def test_a_second_process_compiles_nothing_and_a_damaged_entry_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    first = run(CROSSOVER, cache, tmp_path)
    assert first.returncode == 0, first.stderr
    where, loaded, compiled, stored = store_counts(first.stderr)
    assert where == str(cache / "executables") and loaded == 0 and compiled == stored >= 1
    entries = sorted((cache / "executables").glob("*.exe"))
    assert len(entries) == stored
    second = run(CROSSOVER, cache, tmp_path)
    assert store_counts(second.stderr)[1:] == (stored, 0, 0)
    assert second.stdout == first.stdout  # bit-identical output
    assert seconds(second.stderr, "trace") < 0.1 * seconds(first.stderr, "trace")  # the entry point was not traced
    data = entries[0].read_bytes()
    entries[0].write_bytes(data[:-100] + bytes(100))  # damaged: the checksum no longer matches
    third = run(CROSSOVER, cache, tmp_path)
    assert third.returncode == 0 and third.stdout == first.stdout
    warned = [ln for ln in third.stderr.splitlines() if "stored executable" in ln]
    assert len(warned) == 1 and warned[0].startswith("specjax: warning:") and "compiling again" in warned[0]
    assert store_counts(third.stderr)[2:] == (1, 1)  # compiled and rewritten
    assert run(CROSSOVER, cache, tmp_path).stdout == first.stdout


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX ownership")
def test_a_directory_or_entry_others_may_write_is_refused(tmp_path):
    cache = tmp_path / "cache"
    assert run(POINT, cache, tmp_path).returncode == 0
    os.chmod(cache, 0o777)
    open_dir = run(POINT, cache, tmp_path)
    assert open_dir.returncode == 0
    lines = [ln for ln in open_dir.stderr.splitlines() if ln.startswith("specjax: warning:")]
    assert len(lines) == 1 and "writable by group or others" in lines[0] and str(cache) in lines[0]
    assert store_counts(open_dir.stderr)[0] == "off"  # nothing loaded from it
    os.chmod(cache, 0o700)
    entry = next((cache / "executables").glob("*.exe"))
    os.chmod(entry, 0o666)
    open_entry = run(POINT, cache, tmp_path)
    assert "refused" in open_entry.stderr and store_counts(open_entry.stderr)[2] >= 1
    assert store.unsafe(tmp_path / "missing").startswith("cannot be read")
    if os.getuid() == 0:  # root may hand a file to another user: one that is not ours is refused
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, 12345, 12345)
        assert "owned by uid 12345" in store.unsafe(other)


def test_two_processes_at_once_both_succeed(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, SPECJAX_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-m", "specjax", *POINT], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    assert outs[0][0] == outs[1][0]
    assert not list((cache / "executables").glob(".tmp-*"))  # no temporary left behind


def test_packed_program_equals_plain_jit_and_memory_reuse(tmp_path, monkeypatch):
    import jax

    sc = Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b", k=3,
                  alpha=0.7, batch=16)
    trees = sc.build()
    monkeypatch.setattr(store, "_dir", None)
    # the step program (the crossover search packs the same trees and compiles ~10x longer)
    fresh = store.jit(step)
    packed = fresh(*trees)
    plain = jax.jit(step)(*trees)
    for a, b in zip(jax.tree_util.tree_leaves(packed), jax.tree_util.tree_leaves(plain)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert type(packed) is type(plain)
    before = store.COUNTS["compiled"]
    for b in (1.0, 8.0, 300.0):  # the same structure: one program, reused
        fresh(*trees[:4], trees[4].replace(batch=np.float32(b)))
    assert store.COUNTS["compiled"] == before and len(fresh.memory) == 1
    fresh(*trees[:4], trees[4].replace(k=np.float64(3.0)))  # another leaf dtype: another program
    assert len(fresh.memory) == 2


def test_eviction_keeps_the_most_recently_used(tmp_path):
    for i, name in enumerate(("old", "mid", "new")):
        p = tmp_path / f"{name}.exe"
        p.write_bytes(b"x" * 100)
        os.utime(p, (1000 + i, 1000 + i))
    store.evict(tmp_path, max_bytes=250)
    assert sorted(p.stem for p in tmp_path.glob("*.exe")) == ["mid", "new"]
    store.evict(pathlib.Path(tmp_path), max_bytes=0)
    assert not list(tmp_path.glob("*.exe"))


def test_an_entry_compiled_when_jax_cache_holds_the_program_still_runs(tmp_path):
    """JAX decides once per process whether its persistent cache is used: an entry point compiled after other
    programs (scenario building) used to come out of JAX's cache when that held the same program (the store's
    key had changed, e.g. an edited checkout, while the program had not), and such an executable serializes
    without its object code: every later process warned "does not run" and compiled again. Store entries
    are now compiled with the cache really off, so the entry made in that situation loads and runs."""
    cache = tmp_path / "cache"
    point = ["point", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "3", "--alpha", "0.7",
             "--drafter", "ngram", "--json"]
    first = run(point, cache, tmp_path)
    assert first.returncode == 0, first.stderr
    for p in (cache / "executables").glob("*.exe"):  # the store forgets, JAX's cache keeps its programs
        p.unlink()
    second = run(point, cache, tmp_path)
    assert second.returncode == 0 and store_counts(second.stderr)[2] >= 1, second.stderr
    third = run(point, cache, tmp_path)
    assert third.returncode == 0 and "warning" not in third.stderr, third.stderr
    assert store_counts(third.stderr)[1:3] == (store_counts(second.stderr)[2], 0)  # loaded, none compiled
    assert third.stdout == first.stdout


def test_a_loaded_entry_that_does_not_run_is_compiled_again_with_one_warning(tmp_path, monkeypatch):
    """Defence in depth: a stored executable that loads but fails when run (JAX raises JaxRuntimeError) is
    dropped, compiled again and replaced, with one warning; the answer is the plain jit's."""
    import jax.numpy as jnp

    class JaxRuntimeError(RuntimeError):  # what jax.errors raises, matched by name as the store does
        pass

    old = store.directory()
    store.enable(tmp_path / "exe")
    try:
        f = store.jit(lambda x: jnp.sin(x) * 2.0)
        x = np.float32(0.3)
        want = f(x)
        f.memory.clear()  # a new process: the entry comes from the store
        real = store.Program.__call__

        def broken(self, leaves):
            if self.stored is not None:
                raise JaxRuntimeError("NOT_FOUND: Function wrapped_slice not found")
            return real(self, leaves)

        monkeypatch.setattr(store.Program, "__call__", broken)
        with pytest.warns(UserWarning, match="does not run .*compiling again"):
            got = f(x)
        assert np.asarray(got) == np.asarray(want)
        assert len(list((tmp_path / "exe").glob("*.exe"))) == 1  # replaced, not duplicated
    finally:
        store.enable(old)


def test_validate_and_advise_go_through_the_store(tmp_path, capsys):
    """A warm `validate` (rows per batch, alpha fitted at anchors) and `advise` load every program they run
    from the store and compile none; the output is the same bytes."""
    from specjax.cli import main

    rows = (pathlib.Path(__file__).parents[1] / "data" / "measured" / "public.csv").read_text().splitlines()[:16]
    csv = tmp_path / "rows.csv"
    csv.write_text("\n".join(rows) + "\n")
    cache = ["--cache-dir", str(tmp_path / "cache")]
    advise = ["advise", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft",
              "eagle3-llama-3.1-8b", "--alpha", "0.7", "--max-num-seqs", "32", "--k-max", "4", "--json"]
    for args in (["validate", str(csv), "--json"], advise):
        runs = []
        for _ in range(2):
            store.forget()  # as a new process: no program kept in memory
            before = dict(store.COUNTS)
            with pytest.raises(SystemExit) as e:
                main([*cache, *args])
            assert e.value.code == 0, capsys.readouterr().err
            runs.append((capsys.readouterr().out, {k: store.COUNTS[k] - before[k] for k in before}))
        (cold_out, cold), (warm_out, warm) = runs
        assert cold["compiled"] >= 1 and cold["stored"] == cold["compiled"], (args[0], cold)
        assert warm["compiled"] == 0 and warm["loaded"] == cold["compiled"] + cold["loaded"], (args[0], warm)
        assert warm_out == cold_out
