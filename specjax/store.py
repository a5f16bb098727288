"""A store of compiled executables: a warm call skips tracing, lowering and compiling.

JAX's persistent compilation cache (`runtime`) saves only XLA's compile; every process still traces and
lowers each entry point (0.4-1.6 s of a warm `crossover` or `optimize`). `jit(fun, static_argnames)`
here is `jax.jit` with one more layer: on a call it computes a key from everything that changes the
program, and loads the compiled executable stored under that key, or compiles it once and stores it.

The key (`Stored.key`): the function's module and name; the static arguments' values; the pytree
structure of the dynamic arguments (static dataclass fields are part of it) and each leaf's shape,
dtype and weak type; the backend, its platform version and device kind (on a CPU, the processor's
model and flags: an executable compiled for another CPU may not run); jax, jaxlib and specjax
versions with a hash of specjax's source files (an edited checkout never loads an old program);
`jax_enable_x64`, the default matmul precision and `XLA_FLAGS`.

An entry is code (a pickled executable, `jax.experimental.serialize_executable`): it is read only from
a directory owned by this user that no one else may write (checked on every load; otherwise the store
is refused with one warning and the call compiles), only from a file owned by this user, and only
after its checksum matches. Entries are written to a temporary file and renamed (atomic: two processes
may write the same entry; each reader sees a whole file or none); a damaged or unreadable entry is
compiled again with a one-line warning and replaced. Above `MAX_BYTES` the least recently used entries
are deleted (each load touches its file). `enable(None)` (`--no-cache`, `SPECJAX_CACHE_DIR=off`)
turns it off: calls go to `jax.jit` unchanged.

An entry point marked `inline` (`jit(..., inline=True)`: `api.point`'s step) compiles or loads each program
whose inputs are all host arrays onto `specjax.inline`'s CPU client, which runs each call in the caller's
thread instead of JAX's dispatch thread; it is the same executable either way (a stored entry loads onto
either client, and the key does not change).

Counters (`COUNTS`: loaded, compiled, stored, refused, damaged) are what `specjax --profile` prints and
what the tests count; within a process loaded executables are kept in memory.
"""

import functools
import hashlib
import inspect
import os
import pathlib
import pickle
import platform
import stat
import tempfile
import warnings
import weakref

import numpy as np

from . import inline as _inline

MAGIC = b"specjax-exe-1\n"
MAX_BYTES = 1 << 30  # 1 GiB of stored executables; least recently used deleted beyond
SUFFIX = ".exe"
RUNTIME_ERRORS = ("JaxRuntimeError", "XlaRuntimeError")  # what a loaded executable that cannot run raises

COUNTS = dict(loaded=0, compiled=0, stored=0, refused=0, damaged=0)
_dir = None        # the directory in use, or None (off)
_refused = set()   # directories refused in this process (one warning each)
_ALL = weakref.WeakSet()  # every entry point (`forget`)


def enable(path):
    """Use `path` (a directory, created if missing) for stored executables; None turns the store off."""
    global _dir
    _dir = None if path is None else pathlib.Path(path)
    if _dir is not None:
        try:
            _dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as e:
            warnings.warn(f"executable store off ({_dir}: {e})", UserWarning, stacklevel=2)
            _dir = None
    return _dir


def directory():
    """The directory in use, or None."""
    return _dir


def unsafe(path):
    """Why `path` may not be loaded from (not owned by this user, or writable by group or others), or None."""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); chmod go-w it"
    return None


def _usable():
    """The directory, if every load from it is safe now (checked on each load), else None (one warning)."""
    d = _dir
    if d is None:
        return None
    why = unsafe(d)
    if why is None:
        return d
    COUNTS["refused"] += 1
    if d not in _refused:
        _refused.add(d)
        warnings.warn(f"executable store {d} refused: {why}; compiling instead", UserWarning, stacklevel=3)
    return None


@functools.cache
def _source_hash():
    """sha256 of specjax's source files (names and contents), so an edited checkout never loads old code."""
    root = pathlib.Path(__file__).parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


@functools.cache
def _cpu():
    """The processor's model and feature flags (Linux), else the machine name."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    keep = [ln for ln in text.splitlines() if ln.split(":")[0].strip() in ("model name", "flags", "Features")]
    return platform.machine() + "|" + hashlib.sha256("\n".join(sorted(set(keep))).encode()).hexdigest()


@functools.cache
def _process():
    """What, besides the arguments and the configuration, changes the compiled program (fixed per process)."""
    import jax
    import jaxlib

    from . import __version__

    dev = jax.devices()[0]
    cpu = _cpu() if dev.platform == "cpu" else ""
    return (jax.__version__, jaxlib.__version__, __version__, _source_hash(), dev.platform,
            dev.client.platform_version, dev.device_kind, jax.device_count(), cpu, os.environ.get("XLA_FLAGS", ""))


def _environment():
    import jax

    return (*_process(), bool(jax.config.jax_enable_x64), str(jax.config.jax_default_matmul_precision))


class Stored:
    """`jax.jit(fun, static_argnames=...)` whose compiled executables are kept in the store (see module)."""

    def __init__(self, fun, static_argnames=(), inline=False):
        import jax

        self.fun = fun
        self.inline = inline  # compiled or loaded onto `inline.client()` where every input is a host array
        self.jitted = jax.jit(fun, static_argnames=static_argnames)
        self.signature = inspect.signature(fun)
        self.static = frozenset((static_argnames,) if isinstance(static_argnames, str) else static_argnames)
        base = getattr(fun, "func", fun)  # a functools.partial: the function it wraps, and its bound keywords
        bound = getattr(fun, "keywords", {}) or {}
        self.name = f"{base.__module__}.{base.__qualname__}{sorted(bound.items())!r}"
        self.memory = {}
        _ALL.add(self)
        functools.update_wrapper(self, base)

    def split(self, args, kwargs):
        """(static arguments by name, dynamic arguments by name), every argument named."""
        bound = self.signature.bind(*args, **kwargs)
        named = dict(bound.arguments)
        return ({k: v for k, v in named.items() if k in self.static},
                {k: v for k, v in named.items() if k not in self.static})

    def memo(self, static, dynamic):
        """The in-memory key of a call: static values, tree structure, each leaf's type, shape and dtype
        (cheap: no abstract values are built; stricter than `key`, never looser), and for an entry point
        marked inline whether `specjax.inline` is on (one program in memory per setting)."""
        import jax

        leaves, tree = jax.tree_util.tree_flatten(dynamic)
        return (tuple(sorted(static.items())), tree,
                tuple((HOST if isinstance(x, HOST) else type(x), getattr(x, "shape", None), getattr(x, "dtype", None),
                       getattr(x, "weak_type", None)) for x in leaves), self.inline and _inline.enabled()), leaves

    def key(self, memo, leaves, layout):
        """The store key of a call (a hex digest): see the module docstring."""
        import jax

        avals = tuple(str(jax.typeof(x)) for x in leaves)
        text = repr((self.name, memo[0], str(memo[1]), avals, layout, _environment()))
        return hashlib.sha256(text.encode()).hexdigest()

    def __call__(self, *args, **kwargs):
        static, dynamic = self.split(args, kwargs)
        found = self._program(static, dynamic)
        if found is None:  # an unhashable static value or an argument JAX cannot type (jit will say what)
            return self.jitted(*args, **kwargs)
        program, leaves, memo = found
        try:
            return program(leaves)
        except Exception as e:  # noqa: BLE001  (`_runs_again` re-raises all but a stored program's runtime error)
            return self._runs_again(e, program, static, memo, leaves)(leaves)

    def bind(self, *args, **kwargs):
        """The compiled program of these arguments with its inputs packed once (`Bound`): calls that change
        only some scalar leaves write them into the packed arrays and run it, skipping the argument
        handling and packing of a call (a program loaded from the store runs once here, so that one that
        cannot run is compiled again now). None where a call would go to the plain jit."""
        static, dynamic = self.split(args, kwargs)
        found = self._program(static, dynamic)
        if found is None:
            return None
        program, leaves, memo = found
        if program.stored is not None:
            try:
                program(leaves)
            except Exception as e:  # noqa: BLE001
                program = self._runs_again(e, program, static, memo, leaves)
        paths = [tuple(getattr(k, "name", getattr(k, "key", getattr(k, "idx", k))) for k in path)
                 for path, _ in _flatten_with_path(dynamic)]
        return Bound(program, leaves, paths)

    def _runs_again(self, e, program, static, memo, leaves):
        """The program compiled again where `program`, loaded from the store, raised a runtime error `e` (seen:
        "Function wrapped_slice not found"): say so once, drop the entry, compile, replace it; else re-raise."""
        if program.stored is None or type(e).__name__ not in RUNTIME_ERRORS:
            raise e
        COUNTS["damaged"] += 1
        warnings.warn(f"stored executable {program.stored.name} does not run ({type(e).__name__}: "
                      f"{str(e).splitlines()[0][:200]}); compiling again", UserWarning, stacklevel=3)
        program.stored.unlink(missing_ok=True)
        fresh = self._compile(static, memo[1], leaves, program.layout, self._device(program.layout))
        COUNTS["compiled"] += 1
        if _dir is not None:
            self._save(program.stored.name[:-len(SUFFIX)], fresh)
        self.memory[memo] = fresh
        return fresh

    def _program(self, static, dynamic):
        """(program, leaves, in-memory key) of a call: kept in memory, loaded from the store or compiled (and
        stored); None where the plain jit must run it."""
        try:
            memo, leaves = self.memo(static, dynamic)
            program = self.memory.get(memo)
        except TypeError:
            return None
        if program is None:
            layout = in_layout(memo[2])
            try:
                digest = self.key(memo, leaves, layout)
            except TypeError:
                return None
            device = self._device(layout)
            program = self._load(digest, layout, device) if _dir is not None else None
            if program is None:
                program = self._compile(static, memo[1], leaves, layout, device)
                COUNTS["compiled"] += 1
                if _dir is not None:
                    self._save(digest, program)
            self.memory[memo] = program
        return program, leaves, memo

    def _device(self, layout):
        """The inline client's device where this entry point is marked inline and every input leaf of this
        layout is a host array (packed: nothing of JAX's default client is passed in), else None (JAX's
        default device)."""
        if not self.inline or any(spec is None for spec in layout):
            return None
        return _inline.device()

    def _compile(self, static, tree, leaves, layout, device=None):
        """Trace, lower and compile `fun` under the packed calling convention (`Program`), for `device` (the
        inline client's) where given; where that fails and JAX's default device succeeds, the inline client is
        refused for the rest of the process (`inline.refuse`) and the program is the default device's."""
        if device is None:
            return self._compile_for(static, tree, leaves, layout, None)
        try:
            return self._compile_for(static, tree, leaves, layout, device)
        except Exception as e:  # noqa: BLE001  (the function's own error raises again just below)
            program = self._compile_for(static, tree, leaves, layout, None)
            _inline.refuse(f"compiling for it failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
            return program

    def _compile_for(self, static, tree, leaves, layout, device):
        import jax
        import jax.numpy as jnp

        out = {}

        def inner(packs, rest):
            dynamic = jax.tree_util.tree_unflatten(tree, unpack_in(packs, rest, layout))
            flat, out["tree"] = jax.tree_util.tree_flatten(self.fun(**static, **dynamic))
            flat = [jnp.asarray(x) for x in flat]
            out["layout"] = tuple((str(x.dtype), tuple(x.shape)) for x in flat)
            return tuple(jnp.concatenate([x.ravel() for x, (d, _) in zip(flat, out["layout"]) if d == dt])
                         for dt in sorted({d for d, _ in out["layout"]}))

        # Compiled here, not read from JAX's persistent cache: an executable JAX loaded from its cache
        # serializes without its object code (deserialized, it fails: "Function ... not found"). JAX decides
        # once per process whether the cache is used, so turning the flag off is not enough once anything
        # has compiled: `reset_cache` (public, jax.experimental.compilation_cache) makes it ask again, before
        # this compile and after it.
        from jax.experimental.compilation_cache import compilation_cache

        was = jax.config.jax_enable_compilation_cache
        jax.config.update("jax_enable_compilation_cache", False)
        compilation_cache.reset_cache()
        try:
            on = {} if device is None else dict(in_shardings=jax.sharding.SingleDeviceSharding(device),
                                                out_shardings=jax.sharding.SingleDeviceSharding(device))
            exe = jax.jit(inner, **on).lower(*pack_in(leaves, layout)).compile()
        finally:
            jax.config.update("jax_enable_compilation_cache", was)
            compilation_cache.reset_cache()
        return Program(exe, layout, out["tree"], out["layout"], inline=device is not None)

    def _load(self, digest, layout, device=None):
        d = _usable()
        if d is None:
            return None
        path = d / f"{digest}{SUFFIX}"
        if not path.exists():
            return None
        why = unsafe(path)
        if why is not None:
            COUNTS["refused"] += 1
            warnings.warn(f"stored executable {path} refused: {why}; compiling instead", UserWarning, stacklevel=3)
            return None
        try:
            blob = path.read_bytes()
            head, rest = blob[:len(MAGIC)], blob[len(MAGIC):]
            check, payload = rest[:32], rest[32:]
            if head != MAGIC or hashlib.sha256(payload).digest() != check:
                raise ValueError("checksum does not match")
            blob, exe_in, exe_out, out_tree, out_layout = pickle.loads(payload)
            exe, device = _deserialize(blob, exe_in, exe_out, device)
            program = Program(exe, layout, out_tree, out_layout, stored=path, inline=device is not None)
        except Exception as e:  # noqa: BLE001  (any damage: compile again, say so once)
            COUNTS["damaged"] += 1
            warnings.warn(f"stored executable {path.name} unreadable ({type(e).__name__}: {e}); compiling again",
                          UserWarning, stacklevel=3)
            return None
        try:
            os.utime(path)  # least recently used: a load counts as a use
        except OSError:
            pass
        COUNTS["loaded"] += 1
        return program

    def _save(self, digest, program):
        d = _usable()
        if d is None:
            return
        try:
            from jax.experimental import serialize_executable

            payload = pickle.dumps((*serialize_executable.serialize(program.exe), program.out_tree, program.out_layout),
                                   protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001  (an executable that cannot be serialised is simply not stored)
            return
        blob = MAGIC + hashlib.sha256(payload).digest() + payload
        try:
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=SUFFIX)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                os.replace(tmp, d / f"{digest}{SUFFIX}")
            except BaseException:
                pathlib.Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:
            warnings.warn(f"executable store {d}: could not write ({e.strerror}); not stored", UserWarning,
                          stacklevel=3)
            return
        COUNTS["stored"] += 1
        evict(d)


def _deserialize(blob, exe_in, exe_out, device):
    """(the stored executable loaded onto `device`'s client, `device`), or where that fails (the checksum
    matched: the inline client is what failed) onto JAX's default client, (executable, None), with the inline
    client refused for the rest of the process."""
    from jax.experimental import serialize_executable

    if device is not None:
        try:
            return serialize_executable.deserialize_and_load(blob, exe_in, exe_out, backend=device.client), device
        except Exception as e:  # noqa: BLE001
            exe = serialize_executable.deserialize_and_load(blob, exe_in, exe_out)
            _inline.refuse(f"loading a stored program onto it failed ({type(e).__name__})")
            return exe, None
    return serialize_executable.deserialize_and_load(blob, exe_in, exe_out), None


HOST = (np.ndarray, np.generic)  # leaves packed on the host; a jax.Array or a Python scalar is passed as is


def in_layout(signatures):
    """Per input leaf: (dtype, shape) where it is a NumPy array or scalar (packed into one array per dtype
    with the others of its dtype), None where it is passed as it is. From `Stored.memo`'s leaf signatures."""
    return tuple((str(dt), tuple(shape)) if kind is HOST else None for kind, shape, dt, _ in signatures)


def pack_in(leaves, layout):
    """(one host array per dtype, in sorted dtype order; the leaves passed as they are)."""
    groups = {}
    rest = []
    for x, spec in zip(leaves, layout):
        if spec is None:
            rest.append(x)
        else:
            groups.setdefault(spec[0], []).append(x)
    packs = tuple(np.array(groups[d], dtype=d) if all(np.ndim(x) == 0 for x in groups[d])
                  else np.concatenate([np.ravel(x) for x in groups[d]]).astype(d) for d in sorted(groups))
    return packs, tuple(rest)


def unpack_in(packs, rest, layout):
    """The leaves again, inside the traced function (static slices of the packs)."""
    dtypes = sorted({spec[0] for spec in layout if spec is not None})
    at = dict.fromkeys(dtypes, 0)
    rest = iter(rest)
    leaves = []
    for spec in layout:
        if spec is None:
            leaves.append(next(rest))
            continue
        d, shape = spec
        n = int(np.prod(shape, dtype=np.int64))
        flat = packs[dtypes.index(d)]
        leaves.append(flat[at[d]:at[d] + n].reshape(shape))
        at[d] += n
    return leaves


class Program:
    """A compiled entry point with its calling convention: host leaves in one array per dtype in, one array
    per dtype out (one transfer each way instead of one per leaf: 77 scalars in, 30 out for `point`), the
    outputs unpacked on the host as NumPy arrays into the function's own output structure."""

    def __init__(self, exe, layout, out_tree, out_layout, stored=None, inline=False):
        self.exe, self.layout, self.out_tree, self.out_layout = exe, layout, out_tree, out_layout
        self.stored = stored  # the store file it was loaded from (None: compiled in this process)
        self.inline = inline  # on the inline client (`specjax.inline`), not JAX's default one
        self.out_dtypes = sorted({d for d, _ in out_layout})
        at = [0] * len(self.out_dtypes)
        self.out_slices = []  # per output leaf: (output array, start, stop, shape), fixed by the layout
        for d, shape in out_layout:
            i = self.out_dtypes.index(d)
            n = int(np.prod(shape, dtype=np.int64))
            self.out_slices.append((i, at[i], at[i] + n, shape))
            at[i] += n

    def __call__(self, leaves):
        return self.run(*pack_in(leaves, self.layout))

    def run(self, packs, rest, scalars=False):
        """The outputs of packed inputs (`pack_in`), in the function's output structure: NumPy arrays (with
        `scalars`, a 0-d output as a NumPy scalar of its dtype, the same value)."""
        import jax

        outs = [np.asarray(a) for a in self.exe(packs, rest)]
        return jax.tree_util.tree_unflatten(self.out_tree, [outs[i][a] if scalars and shape == () else
                                                            outs[i][a:b].reshape(shape)
                                                            for i, a, b, shape in self.out_slices])


class Bound:
    """A program with the inputs of one call packed (`Stored.bind`): `slot(*path)` is where a scalar leaf
    sits in the packs (its path in the arguments, e.g. ("dec", "batch")), and `bound([(slot, value), ...])`
    runs the program on a copy of the packs with those leaves written (cast to the leaf's dtype as
    `np.asarray(value, dtype)` casts): the same program, the same bits as a call with those leaves
    (`scalars`: 0-d outputs as NumPy scalars, `Program.run`)."""

    def __init__(self, program, leaves, paths):
        self.program = program
        self.packs, self.rest = pack_in(leaves, program.layout)
        dtypes = sorted({spec[0] for spec in program.layout if spec is not None})
        at = dict.fromkeys(dtypes, 0)
        self.slots = {}
        for path, spec in zip(paths, program.layout):
            if spec is None:
                continue
            d, shape = spec
            if shape == ():
                self.slots[path] = (dtypes.index(d), at[d])
            at[d] += int(np.prod(shape, dtype=np.int64))

    def slot(self, *path):
        """(pack, offset) of the scalar leaf at `path`; KeyError where there is none (not a packed scalar)."""
        return self.slots[path]

    def __call__(self, values=(), scalars=False):
        packs = tuple(p.copy() for p in self.packs)
        for (i, at), v in values:
            packs[i][at] = v
        return self.program.run(packs, self.rest, scalars)


def evict(d, max_bytes=None):
    """Delete the least recently used entries until the store holds at most `max_bytes`."""
    limit = MAX_BYTES if max_bytes is None else max_bytes
    entries = []
    for p in d.glob(f"*{SUFFIX}"):
        if p.name.startswith(".tmp-"):
            continue
        try:
            st = p.stat()
        except OSError:  # deleted by another process meanwhile
            continue
        entries.append((st.st_mtime, st.st_size, p))
    total = sum(s for _, s, _ in entries)
    for _, size, p in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        p.unlink(missing_ok=True)
        total -= size


def _flatten_with_path(tree):
    import jax

    return jax.tree_util.tree_flatten_with_path(tree)[0]


def forget():
    """Drop the programs every entry point keeps in memory (the stored files stay): a long run that
    compiles many shapes (leave-one-source-out folds) releases them with `jax.clear_caches()`."""
    for s in list(_ALL):
        s.memory.clear()


def jit(fun=None, *, static_argnames=(), inline=False):
    """`jax.jit` backed by the store; usable as `jit(f)`, `@jit` or `@jit(static_argnames=...)`. `inline`: its
    programs whose inputs are all host arrays run on `specjax.inline`'s client (each call run in the caller's
    thread; for entry points called once per point)."""
    if fun is None:
        return functools.partial(jit, static_argnames=static_argnames, inline=inline)
    return Stored(fun, static_argnames, inline)
