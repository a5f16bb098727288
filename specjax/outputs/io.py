"""Result files: atomic Parquet parts with metadata, the output-directory lock and manifest.

Layout of a sweep output directory:
  _spec.toml                    the spec text (written first; `--resume` checks it matches)
  _inputs.sha256                digest of the resolved inputs (file bytes, version); `--resume` checks it
  _manifest.json                written last, atomically: rows, chunks, hashes, versions, timing
  hardware=<slug>/pair=<label>/part-<chunk>.parquet   hive-partitioned result parts
Every file is written to a hidden temporary in the same directory and renamed into place, so
no partial file is ever visible. `pl.scan_parquet(DIR, hive_partitioning=True)` reads it back.
"""

import contextlib
import os
import pathlib
import socket
import sys
from importlib import metadata as _md

import polars as pl

from ..errors import SpecError, path_exists
from .finite import finite_frame, json_text

LOCK = ".specjax.lock"


def versions():
    """Package versions recorded in every result file."""
    out = {"python": sys.version.split()[0]}
    for pkg in ("specjax", "jax", "jaxlib", "numpy", "polars", "optax"):
        try:
            out[pkg] = _md.version(pkg)
        except _md.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def _tmp(path):
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _atomic(path, write):
    """Run `write(tmp)` on a hidden temporary beside `path`, fsync it and rename it into place.

    On any OS error (full disk, no permission) the temporary is removed and a `SpecError` names
    the file; an earlier file at `path` is left as it was. Writers report a real full disk in their own
    way (polars raises `ComputeError: ... underlying IO error: No space left on device`, matplotlib an
    `OSError` mid-figure), so both are caught here, not only the `OSError` a test would inject."""
    path = pathlib.Path(path)
    tmp = _tmp(path)
    make_parent(path)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, pl.exceptions.PolarsError) as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0] if str(e) else repr(e)
        why = why.split("IO error: ")[-1]
        raise SpecError(f"cannot write {str(path)!r}: {why}") from None


def write_bytes_atomic(path, data):
    """Write `data` to `path` atomically (POSIX rename)."""
    _atomic(path, lambda tmp: pathlib.Path(tmp).write_bytes(data))


def write_parquet_atomic(df, path, meta):
    """Write a polars DataFrame as Parquet with string key-value metadata, atomically; NaN and infinities
    are written as nulls (`outputs.finite`). The file is serialised in memory and written as bytes, so a
    full disk is the OS's `ENOSPC` ("No space left on device"), not polars' "parquet: File out of
    specification: Invalid thrift: transport error" (a part is one chunk, a table one file of rows)."""
    import io as _io

    buf = _io.BytesIO()
    finite_frame(df).write_parquet(buf, compression="zstd", statistics=True, metadata=meta)
    write_bytes_atomic(path, buf.getvalue())


def write_csv_atomic(df, path):
    """Write a polars DataFrame as CSV, atomically; NaN and infinities as empty cells (`outputs.finite`)."""
    write_bytes_atomic(path, finite_frame(df).write_csv().encode())


def part_path(out, hardware, pair_label, chunk):
    return pathlib.Path(out) / f"hardware={hardware}" / f"pair={pair_label}" / f"part-{chunk:06d}.parquet"


def _alive(pid):
    """True if process `pid` runs here; a pid no process can have (0, negative, past 2^31) is dead."""
    if not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def locked(out, name=LOCK, created=False):
    """Hold an exclusive lock file in `out` for the duration; a stale lock (dead pid) is taken over.
    `created`: the caller made `out` for this run, so a lock that cannot be written removes it again
    (when empty): a full disk leaves nothing behind."""
    out = pathlib.Path(out)
    path = out / name
    me = f"{socket.gethostname()} {os.getpid()}"
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            try:
                host, pid = path.read_text().split()
                stale = host == socket.gethostname() and not _alive(int(pid))
            except (OSError, ValueError):
                stale = False
            if not stale:
                raise SpecError(f"another sweep is writing to {str(out)!r} (lock {name} held by "
                                f"{path.read_text().strip() or 'unknown'}); wait for it or pick another --out"
                                ) from None
            path.unlink(missing_ok=True)
        except OSError as e:
            raise SpecError(f"cannot write to output directory {str(out)!r}: {e.strerror}") from None
    else:
        raise SpecError(f"cannot take the lock {str(path)!r}")
    try:
        try:
            os.write(fd, me.encode())
        finally:
            os.close(fd)
    except OSError as e:  # a full disk before the sweep starts: the empty lock is removed, nothing was written
        path.unlink(missing_ok=True)
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()
        raise SpecError(f"cannot write to output directory {str(out)!r}: {e.strerror or e}") from None
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def check_out(out, what, field="out", file=False):
    """`out` itself, or a one-line `SpecError` where it names nothing: an empty or blank path (`--out ""`
    wrote into the working directory, or dropped the output a command was asked for), or, where `file`, a
    name that is a directory (".", "..", a trailing slash)."""
    if out is None:
        return None
    text = str(out)
    name_less = file and (pathlib.Path(text).name in ("", ".", "..") or text.endswith(("/", os.sep)))
    if not text.strip() or name_less:
        raise SpecError(f"{field}={text!r}; expected {what}")
    return out


def refuse_input(out, inputs, field="out"):
    """A `SpecError` when `out` is one of a command's input files (`validate rows.csv --out rows.csv`
    replaced the measurements with the predictions): checked before any work, by file identity (a
    different spelling of the same file, a link, is the same file)."""
    if not out or not path_exists(out):
        return
    for src in inputs:
        try:
            same = src is not None and os.path.samefile(out, src)
        except (OSError, ValueError):
            same = False
        if same:
            raise SpecError(f"{field}={str(out)!r} is an input of this command ({str(src)!r}); writing it would "
                            "replace that input: pick another file")


def refuse_repeated(paths, what="input file"):
    """A `SpecError` when one file is given twice (by identity: `a.csv ./a.csv` too): its rows would count
    twice in every metric."""
    seen = []
    for p in paths:
        for q in seen:
            try:
                same = path_exists(p) and path_exists(q) and os.path.samefile(p, q)
            except (OSError, ValueError):
                same = False
            if same:
                raise SpecError(f"{what} {str(p)!r} given twice (also as {str(q)!r}); its rows would count twice: "
                                "give each file once")
        seen.append(p)


def make_parent(path, field="out"):
    """Create the directory `path` goes in, or a `SpecError` naming what is in the way (a file where a
    directory should be, no permission)."""
    parent = pathlib.Path(path).parent
    for p in (parent, *parent.parents):
        if p.exists():
            if not p.is_dir():
                raise SpecError(f"{field}={str(path)!r}: {str(p)!r} is a file, not a directory")
            break
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecError(f"{field}={str(path)!r}: cannot create {str(parent)!r} ({e.strerror})") from None


def read_results(out):
    """Lazy frame over every result part of a sweep directory (label columns restored); a `SpecError`
    for a directory that holds none."""
    out = pathlib.Path(out)
    if not out.is_dir() or next(out.glob("**/*.parquet"), None) is None:
        raise SpecError(f"no sweep results in {str(out)!r}; expected the --out directory of a specjax sweep")
    return pl.scan_parquet(out / "**" / "*.parquet", hive_partitioning=True)


def write_json_atomic(path, obj):
    """Write `obj` as JSON, atomically; NaN and infinities as null (`outputs.finite`)."""
    write_bytes_atomic(path, (json_text(obj, indent=1, sort_keys=True) + "\n").encode())
