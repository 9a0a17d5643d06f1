"""What a rank's pipeline looks like to position tracking: its source, stages, runner and batches.

:func:`analyze` walks the pipeline from the top down to its source, asking every stage its
:meth:`~towerpack.dataflow.resume.protocol.Resumable.resume_step`; a stage that cannot be tracked
refuses there, by name and with what to use instead. It also notes what each mode of
:class:`~towerpack.dataflow.resume.tracker.PositionTracker` needs: replaying needs stages that
keep an order, and the lengths (datapoints per epoch, left of an epoch) need stages whose counts
follow the source's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..pipeline.sharding import dataflow_tree
from .protocol import Batch, PositionUnsupportedError, StepKind, step_of

__all__ = ["Plan", "analyze"]


@dataclass
class Plan:
    """One rank's pipeline as tracking sees it."""

    source: Any  # the representative source (its order, size, shard); None when data comes from servers
    sources: list[Any]  # every copy of the source (one per thread under MultiThreadRunner)
    remote: Any = None  # the RemoteDataZMQ the data comes from, if it does
    runners: list[Any] = field(default_factory=list)
    stages: list[Any] = field(default_factory=list)  # switched on by the tracker (all but the sources)
    workers: int = 1
    inner: list[Batch] = field(default_factory=list)  # batches inside the workers, innermost first
    outer: list[Batch] = field(default_factory=list)  # batches after the runner, innermost first
    #: The first stage whose order replaying cannot follow (None: replaying works).
    unordered: str | None = None
    #: The first stage whose datapoints per epoch do not follow from the source's (None: they do).
    uncounted: str | None = None


def _is_source(node: Any) -> bool:
    try:
        return step_of(node).kind is StepKind.SOURCE
    except PositionUnsupportedError:
        return False


def analyze(df: Any) -> Plan:
    """Walk ``df`` down to its source; refuse what cannot be tracked (see the module docstring)."""
    plan = Plan(source=None, sources=[])
    copies: list[Any] = [df]
    node = df
    while True:
        step = step_of(node)
        if step.kind is StepKind.SOURCE:
            break
        plan.unordered = plan.unordered or step.unordered
        plan.uncounted = plan.uncounted or step.uncounted
        if step.kind is StepKind.REMOTE:
            plan.remote = node
            break
        if step.batch is not None:
            (plan.inner if plan.runners else plan.outer).insert(0, step.batch)
        if step.kind is StepKind.RUNNER:
            if plan.runners:
                raise PositionUnsupportedError(
                    f"exact data position: a runner ({type(node).__name__}) inside another runner is not "
                    "supported"
                )
            plan.runners.append(node)
            plan.workers = step.workers
            copies = list(step.inputs)  # each copy's source continues the position
        node = step.inputs[0]
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
    unique = list({id(d): d for d in trees}.values())
    plan.sources = [d for d in unique if _is_source(d)]
    plan.stages = [d for d in unique if not _is_source(d)]
    return plan
