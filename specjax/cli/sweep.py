"""Commands that run sweeps: `specjax sweep` and `specjax report` (registered on `cli.app`)."""

import time
from typing import Annotated, Optional

import typer

from ..errors import SpecError
from .app import Json, app, print_json, table


def check_coordinator(address):
    """host:port with a port in [1, 65535], refused at once (jax.distributed would retry for minutes)."""
    host, _, port = str(address).rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise SpecError(f"coordinator={address!r}; expected host:port with a port in [1, 65535]")


@app.command()
def sweep(spec_file: Annotated[str, typer.Argument(metavar="SPEC", help="Sweep spec (TOML), e.g. sweeps/seed.toml.")],
          out: Annotated[str, typer.Option(help="Output directory (hive-partitioned Parquet).")] = "out/sweep",
          dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (points, chunks, bytes, memory) "
                                                "and exit.")] = False,
          resume: Annotated[bool, typer.Option(help="Continue an interrupted sweep, skipping finished chunks.")
                            ] = False,
          overwrite: Annotated[bool, typer.Option(help="Replace earlier results in --out.")] = False,
          devices: Annotated[Optional[int], typer.Option(help="Local devices to shard over (default: all).")] = None,
          x64: Annotated[bool, typer.Option("--x64", help="Evaluate in float64 (default float32).")] = False,
          coordinator: Annotated[Optional[str], typer.Option(help="host:port of process 0 for multi-process runs "
                                                             "(jax.distributed).")] = None,
          num_processes: Annotated[int, typer.Option(help="Processes in a multi-process run.", min=1)] = 1,
          process_id: Annotated[int, typer.Option(help="This process's index in a multi-process run.", min=0)] = 0,
          quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
          as_json: Json = False):
    """Evaluate a sweep spec on the device(s) and write result grids (Parquet)."""
    import jax

    from ..outputs import io

    io.check_out(out, "a directory path (the sweep's results)")
    if x64:
        jax.config.update("jax_enable_x64", True)
    if process_id >= num_processes:
        raise SpecError(f"process_id={process_id}; expected 0 <= process_id < num_processes={num_processes}")
    if coordinator is not None and num_processes == 1:  # it was ignored: a one-process run coordinates nothing
        check_coordinator(coordinator)
        raise SpecError(f"coordinator={coordinator!r} is for a multi-process run; give --num-processes N (> 1) "
                        "and --process-id, or drop --coordinator")
    if num_processes > 1:
        if not coordinator:
            raise SpecError("num_processes > 1 needs --coordinator host:port")
        check_coordinator(coordinator)
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id)
    from ..inputs import spec as _spec
    from ..outputs import summary as _summary
    from ..engine import sweep as _sweep

    sp = _spec.load(spec_file)
    if dry_run:
        d = _sweep.dry_run(sp, devices, num_processes)
        if as_json:
            print_json(d)
        else:
            table([(k_, v) for k_, v in d.items() if k_ not in ("columns", "memory_detail")])
        return
    _sweep.preflight(sp, out, resume, overwrite, num_processes)
    from ..engine import plan as _plan

    _sweep.check_memory(sp, _plan.plan(sp, devices, process_id, num_processes))  # before the progress bar
    if quiet or as_json:
        res = _sweep.run(sp, out, resume=resume, overwrite=overwrite, n_devices=devices, process_id=process_id,
                         num_processes=num_processes)
    else:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        cols = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} rows"),
                TextColumn("{task.fields[rate]}"), TimeRemainingColumn())
        with Progress(*cols, transient=False) as bar:
            from rich.markup import escape

            task = bar.add_task(escape(sp.name), total=sp.rows, rate="")  # a name like "[/]" is text, not markup
            t0 = time.perf_counter()

            def tick(done, total):
                dt = max(time.perf_counter() - t0, 1e-9)
                bar.update(task, completed=done, total=total, rate=f"{done * sp.points / max(sp.rows, 1) / dt:,.0f} "
                                                                    "points/s")

            res = _sweep.run(sp, out, resume=resume, overwrite=overwrite, n_devices=devices, process_id=process_id,
                             num_processes=num_processes, progress=tick)
    if as_json:
        print_json(res)
        return
    print(f"{sp.name}: {res['rows']:,} rows ({res['points']:,} points) in {res['wall_s']:.2f} s; "
          f"{res['chunks_written']} chunks written, {res['chunks_skipped']} resumed; results in {out}")
    if num_processes == 1:
        print_summary(_summary.summarize(out))


def print_summary(df, width=100):
    """One block per (hardware, pair): a title line, then `name value` cells packed into `width` columns."""
    for row in df.iter_rows(named=True):
        print(f"\n{row.pop('hardware', '')} / {row.pop('pair', '')}")
        cells = [f"{k} {'-' if v is None else (f'{v:.4g}' if isinstance(v, float) else v)}" for k, v in row.items()]
        cell = max(len(c) for c in cells) + 3
        per_line = max(1, (width - 2) // cell)
        for i in range(0, len(cells), per_line):
            print("  " + "".join(c.ljust(cell) for c in cells[i:i + per_line]).rstrip())
    from ..outputs import summary as _summary

    if _summary.GRID_BELOW_1 in df.columns:  # say why it differs from the crossover's bisected batch
        print(f"\n{_summary.GRID_NOTE}")


@app.command()
def report(spec_file: Annotated[str, typer.Argument(metavar="SPEC", help="Sweep spec (TOML).")],
           out: Annotated[str, typer.Option(help="Report directory (index.html, figures/, data/).")] = "out/report",
           resume: Annotated[bool, typer.Option(help="Reuse finished chunks of an earlier run.")] = False,
           overwrite: Annotated[bool, typer.Option(help="Replace an earlier sweep in OUT/data.")] = False):
    """Run a sweep and write a self-contained HTML report with figures, key numbers and assumptions."""
    import pathlib

    from ..outputs import report as _report
    from ..inputs import spec as _spec
    from ..engine import sweep as _sweep

    from ..outputs import io

    io.check_out(out, "a directory path (the report's index.html, figures/ and data/)")
    sp = _spec.load(spec_file)
    data_dir = pathlib.Path(out) / "data"
    _sweep.preflight(sp, data_dir, resume, overwrite)  # an earlier sweep there is never replaced silently
    _sweep.run(sp, data_dir, overwrite=overwrite, resume=resume)
    path = _report.write(sp, data_dir, out)
    print(f"wrote {path}")
