"""The process around the kernels: JAX's persistent compilation cache and a startup profile.

Cache: every command compiles its kernels once per machine, not once per run. The directory is
`$SPECJAX_CACHE_DIR`, else `$XDG_CACHE_HOME/specjax/jax`, else `~/.cache/specjax/jax` (never the
project or an output folder); `SPECJAX_CACHE_DIR=off` or `specjax --no-cache` turns it off. Processes
may share it: entries are read and written under a file lock (`filelock`) with least-recently-used
eviction above `MAX_BYTES`, and an entry JAX cannot read (corrupt, truncated, another JAX version) is
skipped with a warning and compiled again. The cache must be configured before the first compilation
of the process (JAX decides once per process whether to use it). Its subdirectory `executables` is
`store`'s: whole compiled entry points, so a warm call also skips tracing and lowering. Both hold
code this process runs: a directory not owned by this user, or writable by group or others, is refused
(one warning; the command compiles).

Profile: `Profile` counts cache hits and misses and sums JAX's own trace, lowering and compile
durations (`jax.monitoring` events) so `specjax --profile ...` can print where the time went.
"""

import os
import pathlib
import sys
import time
import warnings

from . import store

ENV = "SPECJAX_CACHE_DIR"
OFF = ("off", "0", "none", "")
MAX_BYTES = 4 << 30  # 4 GiB of compiled kernels, least recently used evicted beyond
STORE = "executables"  # the subdirectory of `store`'s serialized executables (traced, lowered and compiled)


def default_cache_dir():
    """The per-user cache directory (see the module docstring), or None when turned off by the environment."""
    env = os.environ.get(ENV)
    if env is not None:
        return None if env.strip().lower() in OFF else pathlib.Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "specjax" / "jax"


_enabled = None


def enable_cache(path=None):
    """Point JAX's persistent compilation cache at `path` (default `default_cache_dir()`); every compiled
    kernel is kept, whatever its compile time. Returns the directory, or None when the cache is off or
    the directory cannot be created (then a warning; the command runs without it)."""
    global _enabled
    store.enable(None)  # until this directory is known to be usable
    path = default_cache_dir() if path is None else pathlib.Path(path)
    if path is None:
        return None
    try:
        import filelock  # noqa: F401  (JAX takes it for locked reads and writes with eviction)

        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except (OSError, ImportError) as e:
        warnings.warn(f"compilation cache off ({path}: {e})", UserWarning, stacklevel=2)
        return None
    why = store.unsafe(path)
    if why is not None:  # both caches hold code that this process would run
        warnings.warn(f"compilation cache off ({path} is {why})", UserWarning, stacklevel=2)
        return None
    settings = dict(jax_compilation_cache_dir=str(path), jax_persistent_cache_min_compile_time_secs=0.0,
                    jax_persistent_cache_min_entry_size_bytes=0, jax_compilation_cache_max_size=MAX_BYTES)
    if "jax" in sys.modules:
        import jax

        for name, v in settings.items():
            jax.config.update(name, v)
    else:  # JAX not imported yet (a command may never need it): it reads these when it is
        os.environ.update({name.upper(): str(v) for name, v in settings.items()})
    store.enable(path / STORE)
    _enabled = path
    return path


def cache_dir():
    """The directory `enable_cache` configured in this process, or None."""
    return _enabled


class Profile:
    """Where a command's time goes: wall time since `start`, import of specjax (measured by the CLI),
    JAX tracing, lowering to MLIR, XLA compilation, and compilation-cache hits and misses.

    JAX reports its durations per compiled function (`jax.monitoring`); `run` is the wall time left."""

    TRACE = "/jax/core/compile/jaxpr_trace_duration"
    LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
    COMPILE = "/jax/core/compile/backend_compile_duration"
    HITS = "/jax/compilation_cache/cache_hits"
    MISSES = "/jax/compilation_cache/cache_misses"

    def __init__(self):
        self.durations = {self.TRACE: 0.0, self.LOWER: 0.0, self.COMPILE: 0.0}
        self.events = {self.HITS: 0, self.MISSES: 0}
        self.start = time.perf_counter()
        self.imported_s = None
        self.store_at_start = dict(store.COUNTS)

    def listen(self):
        """Register the listeners (once per process)."""
        import jax

        def on_duration(event, duration, **_):
            if event in self.durations:
                self.durations[event] += duration

        def on_event(event, **_):
            if event in self.events:
                self.events[event] += 1

        jax.monitoring.register_event_duration_secs_listener(on_duration)
        jax.monitoring.register_event_listener(on_event)
        return self

    def lines(self):
        """One line per part, seconds (the CLI prints them on stderr)."""
        wall = time.perf_counter() - self.start
        trace, lower, comp = (self.durations[k] for k in (self.TRACE, self.LOWER, self.COMPILE))
        imported = self.imported_s or 0.0
        run = max(wall - imported - trace - lower - comp, 0.0)
        where = cache_dir()
        return [f"profile: import {imported:.3f} s", f"profile: trace {trace:.3f} s", f"profile: lower {lower:.3f} s",
                f"profile: compile {comp:.3f} s", f"profile: run {run:.3f} s (and the rest)",
                f"profile: total {wall:.3f} s",
                f"profile: compilation cache {where if where else 'off'}: {self.events[self.HITS]} hits, "
                f"{self.events[self.MISSES]} misses",
                f"profile: executable store {store.directory() or 'off'}: {self.stored('loaded')} loaded, "
                f"{self.stored('compiled')} compiled, {self.stored('stored')} stored"]

    def stored(self, name):
        """The store's counter `name` since `listen`."""
        return store.COUNTS[name] - self.store_at_start[name]
