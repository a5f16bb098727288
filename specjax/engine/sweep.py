"""The sweep engine: run a validated `SweepSpec` chunk by chunk and write atomic Parquet parts.

For each categorical combination (hardware x target/drafter pair) the base pytrees are built on the
host and the jitted chunk kernel (`sweep_kernel`) evaluates fixed-size chunks (`plan`); each chunk
becomes a DataFrame (`frames`) and one hive-partitioned part file (`io`). Resumable: finished parts
are skipped. Under `jax.distributed` each process takes every n-th chunk and writes its own parts.
"""

import json
import pathlib
import time

import jax
import jax.numpy as jnp

from ..cost.acceptance import TREE_MAX_DEPTH

from ..outputs import frames, io
from . import plan as _plan
from . import sweep_kernel
from ..errors import SpecError

BASE_RSS = 450e6  # resident size of a process with jax, polars and specjax imported (measured, bench/)


def _index_dtype():
    return jnp.int64 if jax.config.jax_enable_x64 else jnp.int32


def _dtype():
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


def inputs(spec, combo):
    """(axis values, hw, deploy, target, draft, dec) of categorical combination `combo`."""
    hw_name, pair = spec.combos[combo]
    dt = _dtype()
    hw, deploy, tgt, draft, dec = spec.scenario(hw_name, pair).build(dt)
    if dec.is_tree:  # the deepest tree of the grid (a k axis, or k* up to k_max): the levels the estimate unrolls
        deepest = max([*spec.axes.get("k", ()), float(dec.k), float(spec.k_max)])
        dec = dec.replace(tree_max_depth=min(int(deepest), TREE_MAX_DEPTH))
    values = {n: jnp.asarray(v, dt) for n, v in spec.axes.items()}
    return values, hw, deploy, tgt, draft, dec


def memory_estimate(spec, p):
    """XLA's compiled memory figures for one chunk (bytes): arguments, outputs and temporaries."""
    idx = _index_dtype()
    kern = sweep_kernel.chunk_kernel(p.chunk, p.n_devices, sweep_kernel.config(spec))
    compiled = kern.lower(jnp.asarray(0, idx), jnp.asarray(p.rows_per_combo, idx), *inputs(spec, 0)).compile()
    m = compiled.memory_analysis()
    return dict(temp_bytes=int(m.temp_size_in_bytes), output_bytes=int(m.output_size_in_bytes),
                argument_bytes=int(m.argument_size_in_bytes))


def preflight(spec, out, resume=False, overwrite=False, num_processes=1):
    """Refuse to mix results: an earlier sweep in `out` needs --resume (same spec) or --overwrite.

    The processes of a multi-process run share `out` and start at different moments, so there
    an identical `_spec.toml` counts as this run's own (finished chunks are skipped).
    Returns the existing part files."""
    out = pathlib.Path(out)
    if resume and overwrite:  # the run replaced everything: --resume was silently dropped
        raise SpecError("--resume and --overwrite contradict each other (continue the earlier sweep, or replace "
                        "it); give one of them")
    resume = resume or num_processes > 1
    spec_file = out / "_spec.toml"
    foreign = foreign_entries(out)
    if foreign:
        raise SpecError(f"output directory {str(out)!r} holds files specjax did not write (e.g. {foreign[0]!r}); "
                        "expected an empty or new directory, or an earlier sweep's (nothing there is ever removed "
                        "or replaced unless specjax wrote it)")
    existing = list(out.glob("hardware=*/pair=*/part-*.parquet")) if out.is_dir() else []
    if spec_file.exists() and not overwrite:
        if not resume:
            raise SpecError(f"output directory {str(out)!r} holds an earlier sweep; use --resume to continue "
                            "it or --overwrite to replace it")
        if spec_file.read_text() != spec.text:
            raise SpecError(f"--resume: the spec differs from the one in {str(spec_file)!r}; "
                            "use --overwrite or another --out")
        digest = out / INPUTS_FILE
        if digest.exists() and digest.read_text().strip() != spec.inputs_sha256():
            raise SpecError(f"--resume: a hardware, model or engine file the spec names (or the specjax version) "
                            f"changed since {str(out)!r} was written; use --overwrite or another --out")
    elif existing and not overwrite:
        raise SpecError(f"output directory {str(out)!r} holds result files but no _spec.toml; use --overwrite")
    return existing


INPUTS_FILE = "_inputs.sha256"  # `SweepSpec.inputs_sha256` of the run that wrote the directory
OWN_TOP = {"_spec.toml", "_manifest.json", INPUTS_FILE, io.LOCK}  # what specjax writes at the top of a sweep


def _ours(name):
    """True for a top-level entry specjax writes (its temporaries included)."""
    base = name[1:].split(".tmp-")[0] if name.startswith(".") and ".tmp-" in name else name
    return (base in OWN_TOP or base.startswith(("hardware=", "_manifest.", f"{io.LOCK}."))
            or (base.startswith("_spec.toml")))


def foreign_entries(out):
    """Top-level entries of `out` that no sweep of specjax would write (a user's own files)."""
    if not out.is_dir():
        return []
    return sorted(e.name for e in out.iterdir() if not _ours(e.name))


def own_temporaries(out):
    """Hidden temporaries of files specjax writes (parts, spec, manifest, digest) left by a killed run."""
    tops = [f for f in out.glob(".*.tmp-*") if _ours(f.name)]
    return tops + list(out.glob("hardware=*/pair=*/.part-*.parquet.tmp-*"))


def run(spec, out, *, resume=False, overwrite=False, n_devices=None, process_id=0, num_processes=1,
        progress=None):
    """Run a sweep, writing hive-partitioned Parquet parts to `out`. Returns a summary dict.

    Args:
      spec: `SweepSpec`. out: output directory. resume: skip chunks whose part file exists
        (the spec must be identical). overwrite: delete earlier results first.
      n_devices: local devices to shard over (default all). process_id, num_processes: this
        process's share under `jax.distributed` (every n-th chunk).
      progress: callable(done_rows, total_rows) or None.
    """
    out = pathlib.Path(out)
    if not jax.config.jax_enable_x64 and spec.rows_per_combo >= 2**31:
        raise SpecError(f"{spec.rows_per_combo} rows per combination need 64-bit indices; run with --x64")
    p = _plan.plan(spec, n_devices, process_id, num_processes)
    check_memory(spec, p)
    if out.exists() and not out.is_dir():  # mkdir would say only "File exists"
        raise SpecError(f"out={str(out)!r} is a file, not a directory; a sweep writes a directory of results")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecError(f"cannot create output directory {str(out)!r}: {e.strerror}") from None
    lock_name = io.LOCK if num_processes == 1 else f"{io.LOCK}.{process_id}"
    with io.locked(out, lock_name, created=created):
        spec_file = out / "_spec.toml"
        existing = preflight(spec, out, resume, overwrite and process_id == 0, num_processes)
        if num_processes == 1:  # we hold the only lock: our temporaries of a killed writer are garbage
            for f in own_temporaries(out):
                f.unlink(missing_ok=True)
        if overwrite and process_id == 0:
            for f in existing:
                f.unlink()
            (out / "_manifest.json").unlink(missing_ok=True)
        if process_id == 0 or not spec_file.exists():
            io.write_bytes_atomic(spec_file, spec.text.encode())
            io.write_bytes_atomic(out / INPUTS_FILE, spec.inputs_sha256().encode())
        meta_base = {"specjax_spec": spec.text, "specjax_spec_sha256": spec.sha256,
                     "specjax_versions": json.dumps(io.versions()), "specjax_reduce": spec.reduce}
        kern = sweep_kernel.chunk_kernel(p.chunk, p.n_devices, sweep_kernel.config(spec))
        idx = _index_dtype()
        t0 = time.perf_counter()
        done_rows, skipped, written = 0, 0, 0
        total_rows = p.rows if p.n_chunks < 1_000_000 else spec.rows // num_processes
        inputs_cache = {}
        for gid, combo, start in p.chunks:
            hw_name, pair = spec.combos[combo]
            path = io.part_path(out, pathlib.Path(hw_name).stem, pair.label, gid)
            n = min(p.chunk, p.rows_per_combo - start)
            if path.exists():
                skipped += 1
                done_rows += n
                continue
            if combo not in inputs_cache:
                inputs_cache = {combo: inputs(spec, combo)}
            arrays = kern(jnp.asarray(start, idx), jnp.asarray(p.rows_per_combo, idx), *inputs_cache[combo])
            df = frames.sweep_frame(spec, jax.device_get(arrays), n)
            meta = dict(meta_base, specjax_chunk=str(gid), specjax_hardware=hw_name, specjax_pair=pair.label)
            io.write_parquet_atomic(df, path, meta)
            written += 1
            done_rows += n
            if progress:
                progress(done_rows, total_rows)
        wall = time.perf_counter() - t0
        summary = dict(spec=spec.name, spec_sha256=spec.sha256, rows=spec.rows, points=spec.points,
                       reduce=spec.reduce, chunks_total=p.n_chunks, chunks_written=written, chunks_skipped=skipped,
                       chunk_size=p.chunk, devices=p.n_devices, process_id=process_id, num_processes=num_processes,
                       wall_s=wall, versions=io.versions(), x64=bool(jax.config.jax_enable_x64))
        if num_processes == 1:
            io.write_json_atomic(out / "_manifest.json", summary)
        else:
            io.write_json_atomic(out / f"_manifest.{process_id}.json", summary)
        return summary


def available_memory():
    """Bytes this process may use: the host's physical memory (CPU devices) or the smallest device
    memory limit (accelerators), whichever the kernel runs in."""
    import os

    dev = jax.local_devices()[0]
    stats = getattr(dev, "memory_stats", lambda: None)() if dev.platform != "cpu" else None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def check_memory(spec, p, fraction=0.8):
    """Refuse, before anything is written, a plan whose compiled chunk (as `dry_run` estimates it) would
    not fit: an out-of-memory crash halfway is worse than a clear error now."""
    have = available_memory()
    per_row = spec.reduction.per_row(spec)
    if p.chunk * per_row * 4096 < 0.1 * have:  # far from the limit (4 KiB per evaluated point is generous):
        return                                # skip the compile that measures it
    key = (spec.sha256, p.chunk, p.n_devices, bool(jax.config.jax_enable_x64))
    if key in _FITS:  # the CLI checks before its progress bar, `run` again: compile the estimate once
        return
    mem = memory_estimate(spec, p)
    need = BASE_RSS + mem["temp_bytes"] + 3 * mem["output_bytes"] + mem["argument_bytes"]
    if need > fraction * have:
        raise SpecError(f"chunk_size={p.chunk}: one chunk needs about {need / 1e9:,.1f} GB, more than "
                        f"{fraction:.0%} of the {have / 1e9:,.1f} GB available; expected a smaller chunk_size "
                        f"(or fewer batch_points / k_max) in {spec.source}")
    _FITS.add(key)


_FITS = set()  # plans `check_memory` has measured and found to fit


def dry_run(spec, n_devices=None, num_processes=1):
    """What a run would do: points, rows, chunks, output bytes, compiled memory peak."""
    if not jax.config.jax_enable_x64 and spec.rows_per_combo >= 2**31:
        raise SpecError(f"{spec.rows_per_combo} rows per combination need 64-bit indices; run with --x64")
    p = _plan.plan(spec, n_devices, 0, 1)
    idx = _index_dtype()
    sample = frames.sweep_frame(spec, jax.device_get(sweep_kernel.chunk_kernel(
        p.n_devices, p.n_devices, sweep_kernel.config(spec))(
        jnp.asarray(0, idx), jnp.asarray(max(p.rows_per_combo, 1), idx), *inputs(spec, 0))), 1)
    n_cols = len(sample.columns)
    mem = memory_estimate(spec, p)
    return dict(points=spec.points, rows=spec.rows, combos=len(spec.combos), chunks=p.n_chunks, chunk_size=p.chunk,
                devices=p.n_devices, columns=sample.columns, output_bytes_uncompressed=spec.rows * n_cols * 8,
                memory_per_chunk_bytes=mem["temp_bytes"] + mem["output_bytes"] + mem["argument_bytes"],
                memory_detail=mem, processes=num_processes,
                est_peak_rss_bytes=int(BASE_RSS + mem["temp_bytes"] + 3 * mem["output_bytes"]))
