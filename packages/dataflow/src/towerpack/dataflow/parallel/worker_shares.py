"""The check a runner makes when its workers have started: that some worker has datapoints to send.

Readers and :class:`ShardData` split an epoch among a runner's workers, so a pipeline inside the
runner sees only its worker's share. A ``BatchData(remainder=False)`` there makes no batch in a
worker whose share is smaller than the batch size; when that holds for every worker, the runner
would wait forever. The runners (process and thread ones alike) call :func:`check_worker_shares`
with the lengths their workers report at start, and it raises instead, naming the sizes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..pipeline.base import DataFlow, dataflow_len
from ..pipeline.batch import BatchData
from ..pipeline.sharding import Remainder, Shard, current_rank, dataflow_tree
from ..pipeline.stream import mixes_passes

__all__ = ["check_worker_shares"]


def check_worker_shares(runner: str, ds: DataFlow, worker_lengths: Sequence[int | None]) -> None:
    """Raise ``ValueError`` when every worker reports an empty pass of ``ds`` but ``ds`` is not empty here.

    ``ds`` is the runner's dataflow as this (the consuming) process sees it, where it holds the
    whole of this rank's share; ``worker_lengths`` are ``len(ds)`` taken inside each worker.
    """
    if not worker_lengths or any(n is None or n > 0 for n in worker_lengths):
        return
    length = dataflow_len(ds)
    if not length or mixes_passes(ds):  # an endless stage fills batches from several passes
        return
    workers = len(worker_lengths)
    ranks = current_rank()
    where = f"rank {ranks.rank} of {ranks.world_size}"
    batch = next(
        (d for d in dataflow_tree(ds) if isinstance(d, BatchData) and not d.remainder),
        None,
    )
    items = dataflow_len(batch.ds) if batch is not None else None
    if batch is None or items is None:
        raise ValueError(
            f"{runner}: each of its {workers} workers reports an empty epoch (len {length} here, 0 "
            f"inside every worker, {where}): the input is split among the workers and every share "
            f"yields nothing, so the runner would wait forever. Use fewer workers."
        )
    shares = sorted({Shard(0, 1, i, workers).length(items, Remainder.UNEVEN) for i in range(workers)})
    per_worker = " or ".join(str(n) for n in shares)
    most = items // batch.batch_size
    fixes = [f"fewer workers (at most {most})"] if most else []
    if shares[0]:
        fixes.append(f"a batch size of at most {shares[0]}")
    fixes += ["BatchData(..., remainder=True)", "the BatchData outside (after) the runner"]
    raise ValueError(
        f"{runner}: no worker can make a batch. This process ({where}) has {items} datapoints per "
        f"epoch for BatchData(batch_size={batch.batch_size}, remainder=False) inside the runner; split "
        f"among {workers} workers that is {per_worker} datapoints per worker, fewer than the batch size, "
        f"so every worker makes 0 batches and the runner would wait forever. Use "
        f"{', '.join(fixes[:-1])} or {fixes[-1]}."
    )
