"""What a rank's pipeline looks like to position tracking: its source, stages, runner and batches.

:func:`analyze` walks the pipeline from the top down to its source and refuses, by name and with
what to use instead, every stage that tracking cannot follow. It also notes what each mode of
:class:`~towerpack.dataflow.resume.tracker.PositionTracker` needs: replaying needs stages that
keep an order, and the lengths (datapoints per epoch, left of an epoch) need stages whose counts
follow the source's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..parallel.maps import MultiProcessMapAndBatchDataZMQ, MultiProcessMapDataZMQ, MultiThreadMapData
from ..parallel.runners import MultiProcessRunnerZMQ, MultiThreadRunner
from ..pipeline.batch import BatchData, BatchDataByShape
from ..pipeline.mapping import MapData
from ..pipeline.sharding import dataflow_tree
from ..pipeline.stream import LocallyShuffleData
from ..serve.remote import RemoteDataZMQ
from .position import PositionSource, PositionUnsupportedError, _Batch

__all__ = ["Plan", "analyze"]

_RESUMABLE = "IndexedList(lst, shuffle=...) (towerpack.dataflow), an ArrayDataset or a dataset reader"

#: What to use instead of stages that cannot be tracked, by class name.
_INSTEAD = {
    "DataFromList": (
        "its items have no position in an epoch order. Use IndexedList(lst, shuffle=...) "
        "(towerpack.dataflow): the same items, each epoch's order drawn from (seed, epoch), sharded "
        "among ranks and workers"
    ),
    "FakeData": (
        "it draws new values for every datapoint, so there are no items to resume. Wrap fixed arrays in "
        f"{_RESUMABLE}, or train without exact_resume"
    ),
    "DataFromGenerator": f"a generator's items have no position in an epoch order. Read from {_RESUMABLE}",
    "DataFromIterable": f"an iterable's items have no position in an epoch order. Read from {_RESUMABLE}",
    "DataFromQueue": f"a queue's items have no position in an epoch order. Read from {_RESUMABLE}",
    "ShardData": (
        f"it splits a stream that every process reads whole. Use a source that shards itself: {_RESUMABLE}"
    ),
}


@dataclass
class Plan:
    """One rank's pipeline as tracking sees it."""

    source: Any  # the representative source (its order, size, shard); None when data comes from servers
    sources: list[Any]  # every copy of the source (one per thread under MultiThreadRunner)
    remote: Any = None  # the RemoteDataZMQ the data comes from, if it does
    runners: list[Any] = field(default_factory=list)
    stages: list[Any] = field(default_factory=list)  # switched to tag mode (all but the sources)
    repeating: list[Any] = field(default_factory=list)  # stages that iterate their input forever
    workers: int = 1
    inner: list[_Batch] = field(default_factory=list)  # batches inside the workers, innermost first
    outer: list[_Batch] = field(default_factory=list)  # batches after the runner, innermost first
    #: The first stage whose order replaying cannot follow (None: replaying works).
    unordered: str | None = None
    #: The first stage whose datapoints per epoch do not follow from the source's (None: they do).
    uncounted: str | None = None


def _refuse(node: Any) -> PositionUnsupportedError:
    name = type(node).__name__
    why = _INSTEAD.get(name)
    if why is not None:
        return PositionUnsupportedError(f"exact data position: the stage {name} is not supported: {why}")
    return PositionUnsupportedError(
        f"exact data position: the stage {name} is not supported (it may drop, repeat or reorder "
        "datapoints, or read a source whose order is not a function of the seed and epoch); see the table "
        "in docs/dataflow.md, 'Exact resume', for the stages that are"
    )


def analyze(df: Any) -> Plan:
    """Walk ``df`` down to its source; refuse what cannot be tracked (see the module docstring)."""
    plan = Plan(source=None, sources=[])
    copies: list[Any] = [df]
    node = df

    def note(name: str, unordered: bool = True, uncounted: bool = True) -> None:
        if unordered and plan.unordered is None:
            plan.unordered = name
        if uncounted and plan.uncounted is None:
            plan.uncounted = name

    def batch(size: int, remainder: bool) -> None:
        (plan.inner if plan.runners else plan.outer).insert(0, _Batch(size, remainder))

    while True:
        name = type(node).__name__
        if isinstance(node, PositionSource):
            break
        if isinstance(node, RemoteDataZMQ):
            plan.remote = node
            note(f"{name} (data from `dataflow serve` servers, in the order consumers pull)")
            break
        if isinstance(node, BatchDataByShape):
            note(name)  # groups fill up across passes
        elif isinstance(node, BatchData):
            batch(node.batch_size, bool(node.remainder))
        elif isinstance(node, (MapData, MultiThreadMapData)):
            pass  # one datapoint per input (a None result is caught when replaying, carried with tags)
        elif isinstance(node, MultiProcessMapDataZMQ):
            note(f"{name} (results in completion order)", uncounted=not node.strict)
            if not node.strict:
                plan.repeating.append(node)
        elif isinstance(node, MultiProcessMapAndBatchDataZMQ):
            note(f"{name} (endless, batches in completion order)")
            plan.repeating.append(node)
            batch(node.batch_size, False)
        elif isinstance(node, LocallyShuffleData):
            note(name, uncounted=node.endless or node.num_reuse != 1)
            if node.endless:
                plan.repeating.append(node)
        elif isinstance(node, (MultiProcessRunnerZMQ, MultiThreadRunner)):
            if plan.runners:
                raise PositionUnsupportedError(
                    f"exact data position: a runner ({name}) inside another runner is not supported"
                )
            plan.runners.append(node)
            if isinstance(node, MultiThreadRunner):
                plan.workers = node.num_thread
                copies = list(node.dfs)  # one pipeline per thread: each copy's source continues the position
                node = node.dfs[0]
                continue
            plan.workers = node.num_proc
        else:
            raise _refuse(node)
        node = node.ds
    if plan.remote is None:
        source = plan.source = node
        if not source.shards_itself and plan.workers > 1:
            raise PositionUnsupportedError(
                f"exact data position: {type(source).__name__} does not shard itself (shard=False), so each "
                f"of the {plan.workers} workers would read all of it"
            )
    trees = [d for c in copies for d in dataflow_tree(c)]
    if copies[0] is not df:
        trees += list(dataflow_tree(df))
    plan.sources = [d for d in trees if isinstance(d, PositionSource)]
    plan.stages = list({id(d): d for d in trees if not isinstance(d, PositionSource)}.values())
    return plan
