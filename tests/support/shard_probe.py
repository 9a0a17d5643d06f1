"""Run as a script under a launcher: write this process's shard of ``range(N)`` and its placement to
``OUT/<rank>.json``, so a test can check that the ranks of any launcher split a dataflow between them.

    python shard_probe.py OUT N
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from towerpack.dataflow import DataFromList, ShardData, placement


def main(out: str, count: str) -> int:
    where = placement()
    ds = ShardData(DataFromList(list(range(int(count))), shuffle=False))
    ds.reset_state()
    record = {
        "ids": [int(i) for i in ds],
        "rank": where.rank,
        "world_size": where.world_size,
        "local_rank": where.local_rank,
        "local_size": where.local_size,
        "node_rank": where.node_rank,
        "launcher": where.launcher.value,
        "role": where.role.value,
        "pid": os.getpid(),
    }
    path = Path(out) / f"{where.rank}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
