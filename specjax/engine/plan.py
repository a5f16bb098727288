"""How a sweep is split: fixed-size chunks (a multiple of the device count) per categorical
combination; under `jax.distributed` process i takes every n-th chunk. Lazy: no list of chunks."""

import dataclasses
import math

import jax

from ..errors import SpecError


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
    n_dev = len(jax.local_devices()) if n_devices is None else n_devices  # 0 is refused, not 'all'
    if not 1 <= n_dev <= len(jax.local_devices()):
        raise SpecError(f"devices={n_devices}; expected 1 <= devices <= {len(jax.local_devices())} (local devices)")
    rows = spec.rows_per_combo
    chunk = min(spec.chunk_size, rows)
    chunk = int(math.ceil(chunk / n_dev) * n_dev)
    return Plan(chunk=chunk, n_devices=n_dev, rows_per_combo=rows, n_combos=len(spec.combos), process_id=process_id,
                num_processes=num_processes)
