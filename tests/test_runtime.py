"""The compilation cache and the startup profile: a second run reads the cache (counted by JAX's own
events, not timed), a corrupt entry is skipped with a one-line warning, --no-cache and an unusable
directory run without it, and the default directory is per user, outside the project."""

import json
import os
import pathlib
import re
import subprocess
import sys

from specjax import runtime

POINT = ["point", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "4", "--drafter", "ngram",
         "--k", "3", "--alpha", "0.6", "--json"]


def run(args, cache, cwd):
    env = dict(os.environ, SPECJAX_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "specjax", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def counts(stderr):
    m = re.search(r"compilation cache (.*): (\d+) hits, (\d+) misses", stderr)
    assert m, stderr
    return m[1], int(m[2]), int(m[3])


def test_second_run_reads_the_cache_and_a_corrupt_entry_is_skipped(tmp_path):
    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    first = run(["--profile", *POINT], cache, work)
    assert first.returncode == 0, first.stderr
    where, hits, misses = counts(first.stderr)
    assert where == str(cache) and hits == 0 and misses >= 1
    entries = sorted(cache.glob("*-cache"))
    assert len(entries) == misses  # every compiled kernel was written
    lines = [ln for ln in first.stderr.splitlines() if ln.startswith("profile:")]
    assert [ln.split()[1] for ln in lines] == ["import", "trace", "lower", "compile", "run", "total", "compilation",
                                                  "executable"]
    second = run(["--profile", *POINT], cache, work)
    _, hits2, misses2 = counts(second.stderr)
    assert misses2 == 0 and 1 <= hits2 <= misses  # the entry points come from the executable store (test_store)
    assert json.loads(second.stdout) == json.loads(first.stdout)
    for e in entries:
        e.write_bytes(b"not a compiled kernel")
    third = run(["--profile", *POINT], cache, work)
    assert third.returncode == 0 and json.loads(third.stdout) == json.loads(first.stdout)
    warned = [ln for ln in third.stderr.splitlines() if ln.startswith("specjax: warning:")]
    assert warned and all("Error reading persistent compilation cache entry" in w for w in warned)
    assert counts(third.stderr)[2] == hits2  # each entry it read, compiled again (and rewritten)
    assert list(work.iterdir()) == []  # nothing written where the command ran


def test_no_cache_and_an_unusable_directory(tmp_path):
    off = run(["--no-cache", "--profile", *POINT], tmp_path / "never", tmp_path)
    assert off.returncode == 0 and counts(off.stderr)[0] == "off" and not (tmp_path / "never").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    bad = run(["--profile", *POINT], blocker / "cache", tmp_path)
    assert bad.returncode == 0 and "specjax: warning: compilation cache off" in bad.stderr
    assert counts(bad.stderr)[0] == "off"
    env_off = run(["--profile", *POINT], "off", tmp_path)
    assert counts(env_off.stderr)[0] == "off"


def test_default_directory_is_per_user(monkeypatch, tmp_path):
    monkeypatch.delenv(runtime.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert runtime.default_cache_dir() == tmp_path / "xdg" / "specjax" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert runtime.default_cache_dir() == pathlib.Path.home() / ".cache" / "specjax" / "jax"
    monkeypatch.setenv(runtime.ENV, "OFF")
    assert runtime.default_cache_dir() is None
