"""The sweep engine: one jitted, vmapped kernel over fixed-size chunks of flat point indices.

For each categorical combination (hardware x target/drafter pair) the base pytrees are built
on the host; numeric axes are small value arrays; a chunk of flat indices is generated on
the device, unravelled into axis values (`grid`), evaluated by `point` (a pure function of
one point, vmapped), optionally reduced per point (crossover batch, best k, max speedup over a
batch axis), and returned as a dict of (chunk,) arrays. Shapes never change between chunks or
combinations, so the kernel compiles once. The flat axis is sharded over local devices with
`jax.sharding`; under `jax.distributed` each process takes every n-th chunk and writes its
own part files.
"""

import dataclasses
import functools
import json
import math
import pathlib
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import polars as pl
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import axes as _axes
from . import crossover as _crossover
from . import grid, io
from . import optimize as _optimize
from . import sensitivity as _sensitivity
from .errors import SpecError
from .speculative import STATUS as POINT_STATUS
from .speculative import step

STATUS = {**POINT_STATUS, 4: "invalid_input"}
CROSS_STATUS = {**_crossover.STATUS, 4: "invalid_input"}
BASE_RSS = 450e6  # resident size of a process with jax, polars and specjax imported (measured, bench/)
STEP_OUTPUTS = ("speedup", "tokens_per_step", "t_target_s", "t_draft_s", "t_verify_s", "t_sd_step_s",
                "throughput_base_tok_s", "throughput_sd_tok_s", "max_batch_base", "max_batch_sd",
                "verify_compute_bound")


def _masked(invalid, **fields):
    """Outputs of a point, NaN (null in the file) where its inputs are not physical."""
    return {k: jnp.where(invalid, jnp.nan, v) for k, v in fields.items()}


def _reduce_none(hw, tgt, draft, dec, invalid, values, cfg):
    r = step(hw, tgt, draft, dec, cfg.mode)
    status = jnp.where(invalid, 4.0, r.status)
    return _masked(invalid, **{f: getattr(r, f) for f in STEP_OUTPUTS}), status, (status == 0) & jnp.isfinite(
        r.speedup)


def _reduce_crossover(hw, tgt, draft, dec, invalid, values, cfg):
    if cfg.sensitivity:
        c, _, el = _sensitivity.crossover_sensitivity(hw, tgt, draft, dec, cfg.mode, cfg.batch_max, cfg.batch_points)
    else:
        c, el = _crossover.find(hw, tgt, draft, dec, cfg.mode, cfg.batch_max, cfg.batch_points), {}
    out = _masked(invalid, **{f: getattr(c, f) for f in ("crossover_batch", "crossover_batch_int",
                                                          "speedup_at_batch_1", "max_batch_sd",
                                                          "speedup_at_max_batch", "pays_again_batch")},
                  **{f"elasticity_{n}": el[n] for n in cfg.sensitivity})
    out["beyond_memory"] = (c.beyond_memory > 0) & ~invalid
    return out, jnp.where(invalid, 4.0, c.status), ~invalid & jnp.isfinite(c.speedup_at_batch_1)


def _reduce_best_k(hw, tgt, draft, dec, invalid, values, cfg):
    o = _optimize.best_k(hw, tgt, draft, dec, cfg.mode, cfg.k_max, cfg.k_method)
    status = jnp.where(invalid, 4.0, step(hw, tgt, draft, dec.replace(k=o.k_star), cfg.mode).status)
    out = _masked(invalid, k_star=o.k_star, speedup_k_star=o.speedup, k_relaxed=o.k_relaxed)
    return out, status, (status == 0) & jnp.isfinite(o.speedup)


def _reduce_max_speedup(hw, tgt, draft, dec, invalid, values, cfg):
    batches = values["batch"].astype(dec.alpha.dtype)
    rs = jax.vmap(lambda b: step(hw, tgt, draft, dec.replace(batch=b), cfg.mode))(batches)
    feasible = rs.status == 0
    s_feas = jnp.where(feasible, rs.speedup, -jnp.inf)
    i_all, i_feas = jnp.argmax(rs.speedup), jnp.argmax(s_feas)
    out = _masked(invalid, max_speedup=rs.speedup[i_all], batch_at_max_speedup=batches[i_all])
    out.update(_masked(invalid | ~feasible.any(), max_speedup_feasible=s_feas[i_feas],
                       batch_at_max_speedup_feasible=batches[i_feas]))
    status = jnp.where(invalid, 4.0, jnp.where(feasible.any(), 0.0, rs.status[0]))
    return out, status, ~invalid & feasible.any()


REDUCTIONS = {"none": _reduce_none, "crossover": _reduce_crossover, "best_k": _reduce_best_k,
              "max_speedup": _reduce_max_speedup}


class KernelConfig(NamedTuple):
    """The static part of a sweep kernel (hashable: one compilation per distinct value)."""

    reduce: str
    mode: str
    experts_hold: str
    batch_max: float
    batch_points: int
    k_max: int
    sensitivity: tuple
    k_method: str = "optax"


def point(flat, values, hw, target, draft, dec, cfg):
    """Evaluate one grid point (flat index) and return a dict of scalars. Pure; vmapped by `run`."""
    axis_values = {n: v for n, v in values.items() if not (cfg.reduce == "max_speedup" and n == "batch")}
    gathered = grid.gather(flat, axis_values)
    hw, tgt, dec, invalid = grid.apply(gathered, hw, target, dec, cfg.experts_hold)
    out = {_axes.column(n): v for n, v in gathered.items()}
    if "accepted_length" in gathered:
        out["alpha"] = dec.alpha
    results, status, valid = REDUCTIONS[cfg.reduce](hw, tgt, draft, dec, invalid, values, cfg)
    out.update(results, valid=valid)
    if cfg.k_max and cfg.reduce != "best_k":
        o = _optimize.best_k(hw, tgt, draft, dec, cfg.mode, cfg.k_max, cfg.k_method)
        out.update(_masked(invalid, k_star=o.k_star, speedup_k_star=o.speedup))
    out["status_code"] = status.astype(jnp.int8)
    return out


@functools.lru_cache(maxsize=8)
def _kernel(chunk, n_devices, cfg):
    """Jitted chunk kernel: (start, total, values, hw, target, draft, dec) -> dict of (chunk,) arrays."""
    devices = jax.local_devices()[:n_devices]
    sharding = NamedSharding(Mesh(np.array(devices), ("points",)), PartitionSpec("points"))

    def run_chunk(start, total, values, hw, target, draft, dec):
        flat = start + jnp.arange(chunk, dtype=start.dtype)
        flat = jax.lax.with_sharding_constraint(jnp.minimum(flat, total - 1), sharding)
        return jax.vmap(lambda f: point(f, values, hw, target, draft, dec, cfg))(flat)

    return jax.jit(run_chunk, out_shardings=sharding)


def spec_static(spec):
    return KernelConfig(spec.reduce, spec.roofline, spec.experts_hold, spec.batch_max, spec.batch_points,
                        spec.k_max, tuple(spec.sensitivity), spec.k_method)


@dataclasses.dataclass(frozen=True)
class Plan:
    """How a sweep will run: chunk size (multiple of the device count) and the chunk list."""

    chunk: int
    n_devices: int
    rows_per_combo: int
    n_combos: int
    process_id: int = 0
    num_processes: int = 1

    @property
    def per_combo(self):
        return int(math.ceil(self.rows_per_combo / self.chunk))

    @property
    def chunks(self):
        """This process's chunks, lazily: (global chunk id, combo index, start row)."""
        for gid in range(self.process_id, self.per_combo * self.n_combos, self.num_processes):
            combo, j = divmod(gid, self.per_combo)
            yield gid, combo, j * self.chunk

    @property
    def n_chunks(self):
        total = self.per_combo * self.n_combos
        return len(range(self.process_id, total, self.num_processes))

    @property
    def rows(self):
        """Rows this process evaluates (the last chunk of each combination may be short)."""
        return sum(min(self.chunk, self.rows_per_combo - start) for _, _, start in self.chunks)


def plan(spec, n_devices=None, process_id=0, num_processes=1):
    """Split the sweep into fixed-size chunks; process `process_id` takes every n-th one."""
    n_dev = n_devices or len(jax.local_devices())
    if not 1 <= n_dev <= len(jax.local_devices()):
        raise SpecError(f"devices={n_devices}; expected 1 <= devices <= {len(jax.local_devices())} (local devices)")
    rows = spec.rows_per_combo
    chunk = min(spec.chunk_size, rows)
    chunk = int(math.ceil(chunk / n_dev) * n_dev)
    return Plan(chunk=chunk, n_devices=n_dev, rows_per_combo=rows, n_combos=len(spec.combos), process_id=process_id,
                num_processes=num_processes)


def _index_dtype():
    return jnp.int64 if jax.config.jax_enable_x64 else jnp.int32


def _dtype():
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


def _inputs(spec, combo):
    hw_name, pair = spec.combos[combo]
    dt = _dtype()
    hw, tgt, draft, dec = spec.scenario(hw_name, pair).build(dt)
    values = {n: jnp.asarray(v, dt) for n, v in spec.axes.items()}
    return values, hw, tgt, draft, dec


def memory_estimate(spec, p):
    """XLA's compiled memory figures for one chunk (bytes): arguments, outputs and temporaries."""
    values, hw, tgt, draft, dec = _inputs(spec, 0)
    idx = _index_dtype()
    kern = _kernel(p.chunk, p.n_devices, spec_static(spec))
    compiled = kern.lower(jnp.asarray(0, idx), jnp.asarray(p.rows_per_combo, idx), values, hw, tgt, draft,
                          dec).compile()
    m = compiled.memory_analysis()
    return dict(temp_bytes=int(m.temp_size_in_bytes), output_bytes=int(m.output_size_in_bytes),
                argument_bytes=int(m.argument_size_in_bytes))


def _frame(spec, arrays, n):
    cols = {}
    for name, a in arrays.items():
        a = np.asarray(a)[:n]
        if name == "status_code":
            continue
        cols[name] = a
    codes = np.asarray(arrays["status_code"])[:n]
    table = CROSS_STATUS if spec.reduce == "crossover" else STATUS
    names = list(table.values())
    df = pl.DataFrame(cols)
    # NaN never reaches a file: a missing number is null and its row carries a status
    df = df.with_columns(pl.col(pl.Float32, pl.Float64).fill_nan(None))
    df = df.with_columns(pl.Series("status", [table[int(c)] for c in codes] if n < 64 else
                                   np.asarray(names, dtype=object)[codes.astype(np.int64)],
                                   dtype=pl.Enum(names)))
    for key, v in spec.fixed.items():
        if key in _axes.NUMERIC and _axes.column(key) not in df.columns:
            df = df.with_columns(pl.lit(float(v), df["alpha"].dtype).alias(_axes.column(key)))
    inputs = [_axes.column(n) for n in _axes.NUMERIC if _axes.column(n) in df.columns]
    rest = [c for c in df.columns if c not in inputs and c not in ("valid", "status")]
    return df.select(inputs + rest + ["valid", "status"])


def preflight(spec, out, resume=False, overwrite=False, num_processes=1):
    """Refuse to mix results: an earlier sweep in `out` needs --resume (same spec) or --overwrite.

    The processes of a multi-process run share `out` and start at different moments, so there
    an identical `_spec.toml` counts as this run's own (finished chunks are skipped).
    Returns the existing part files."""
    out = pathlib.Path(out)
    resume = resume or num_processes > 1
    spec_file = out / "_spec.toml"
    existing = list(out.glob("hardware=*/pair=*/part-*.parquet")) if out.is_dir() else []
    if spec_file.exists() and not overwrite:
        if not resume:
            raise SpecError(f"output directory {str(out)!r} holds an earlier sweep; use --resume to continue "
                            "it or --overwrite to replace it")
        if spec_file.read_text() != spec.text:
            raise SpecError(f"--resume: the spec differs from the one in {str(spec_file)!r}; "
                            "use --overwrite or another --out")
    elif existing and not overwrite:
        raise SpecError(f"output directory {str(out)!r} holds result files but no _spec.toml; use --overwrite")
    return existing


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
    p = plan(spec, n_devices, process_id, num_processes)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecError(f"cannot create output directory {str(out)!r}: {e.strerror}") from None
    lock_name = io.LOCK if num_processes == 1 else f"{io.LOCK}.{process_id}"
    with io.locked(out, lock_name):
        spec_file = out / "_spec.toml"
        existing = preflight(spec, out, resume, overwrite and process_id == 0, num_processes)
        if num_processes == 1:  # we hold the only lock: temporaries of a killed writer are garbage
            for f in out.glob("**/.*.tmp-*"):
                f.unlink(missing_ok=True)
        if overwrite and process_id == 0:
            for f in existing:
                f.unlink()
            (out / "_manifest.json").unlink(missing_ok=True)
        if process_id == 0 or not spec_file.exists():
            io.write_bytes_atomic(spec_file, spec.text.encode())
        meta_base = {"specjax_spec": spec.text, "specjax_spec_sha256": spec.sha256,
                     "specjax_versions": json.dumps(io.versions()), "specjax_reduce": spec.reduce}
        kern = _kernel(p.chunk, p.n_devices, spec_static(spec))
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
                inputs_cache = {combo: _inputs(spec, combo)}
            values, hw, tgt, draft, dec = inputs_cache[combo]
            arrays = kern(jnp.asarray(start, idx), jnp.asarray(p.rows_per_combo, idx), values, hw, tgt, draft, dec)
            arrays = jax.device_get(arrays)
            df = _frame(spec, arrays, n)
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


def dry_run(spec, n_devices=None, num_processes=1):
    """What a run would do: points, rows, chunks, output bytes, compiled memory peak."""
    if not jax.config.jax_enable_x64 and spec.rows_per_combo >= 2**31:
        raise SpecError(f"{spec.rows_per_combo} rows per combination need 64-bit indices; run with --x64")
    p = plan(spec, n_devices, 0, 1)
    idx = _index_dtype()
    sample = _frame(spec, jax.device_get(_kernel(1 * p.n_devices, p.n_devices, spec_static(spec))(
        jnp.asarray(0, idx), jnp.asarray(max(p.rows_per_combo, 1), idx), *_inputs(spec, 0))), 1)
    n_cols = len(sample.columns)
    mem = memory_estimate(spec, p)
    return dict(points=spec.points, rows=spec.rows, combos=len(spec.combos), chunks=p.n_chunks, chunk_size=p.chunk,
                devices=p.n_devices, columns=sample.columns, output_bytes_uncompressed=spec.rows * n_cols * 8,
                memory_per_chunk_bytes=mem["temp_bytes"] + mem["output_bytes"] + mem["argument_bytes"],
                memory_detail=mem, processes=num_processes,
                est_peak_rss_bytes=int(BASE_RSS + mem["temp_bytes"] + 3 * mem["output_bytes"]))
