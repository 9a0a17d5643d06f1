"""The resume protocol from a user's side: a stage of their own takes part by implementing it, one that
does not is refused by name, and nothing drives resume by setting another object's private state."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from towerpack.dataflow import (
    BatchData,
    DataPosition,
    IndexedList,
    MultiProcessRunnerZMQ,
    PositionMode,
    PositionTracker,
    PositionUnsupportedError,
    ProxyDataFlow,
)
from towerpack.dataflow.resume.keys import as_keys, join, split_keys
from towerpack.dataflow.resume.protocol import Step

REPO = Path(__file__).resolve().parents[2]
N = 24


class Doubled(ProxyDataFlow):
    """A stage of the user's own: one datapoint per input, odd ones dropped; implements the protocol."""

    dropped = None  # the keys of dropped items, which go with the next datapoint (of this pass or the next)

    def resume_step(self) -> Step:
        return Step(inputs=(self.ds,), uncounted="Doubled (drops odd items)")

    def __iter__(self):
        for dp in self.ds:
            if dp[0] % 2:
                self.dropped = join(self.dropped, self.ds.position_tag)
                continue
            self.position_tag, self.dropped = join(self.dropped, self.ds.position_tag), None
            yield [dp[0] * 10]


class Silent(ProxyDataFlow):
    """A stage that says nothing about positions."""

    def __iter__(self):
        yield from self.ds


class Sampled(ProxyDataFlow):
    """A stage that says why it cannot be resumed."""

    resume_refusal = "it samples its input; use Doubled instead"

    def __iter__(self):
        yield from self.ds


def pipeline(workers: int):
    source = IndexedList([[i] for i in range(N)], shuffle=True, rank=0, world_size=1, remainder="uneven")
    stage = Doubled(source)
    if workers:
        stage = MultiProcessRunnerZMQ(stage, workers, hwm=2)
    return BatchData(stage, 2, remainder=True)


def items_of(batches) -> list[int]:
    return [int(v) // 10 for b in batches for v in np.ravel(b[0])]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "2-worker-processes"])
def test_a_stage_of_the_users_own_resumes_exactly(workers):
    tags, values = [], []

    def train(df, tracker, until):
        df.reset_state()
        try:
            for dp in tracker.iterate():
                tags.append(as_keys(df.position_tag))
                values.extend(items_of([dp]))
                position = tracker.position(tracker.log.appended)
                if until(position):
                    return position
        finally:
            if workers:
                df.ds.close()

    first = pipeline(workers)
    tracker = PositionTracker.of(first)
    tracker.start(None, PositionMode.TAGS)
    stop = train(first, tracker, lambda p: tracker.log.appended == 2)
    assert stop.epoch == 1 and 0 < stop.count < N
    # A new process would start here: a new pipeline continues the position of the checkpoint.
    second = pipeline(workers)
    tracker = PositionTracker.of(second)
    tracker.start(DataPosition.from_dict(stop.to_dict()), PositionMode.TAGS)
    assert tracker.remaining(stop) is None  # Doubled says its counts do not follow its input's
    after = train(second, tracker, lambda p: p.epoch == 2)
    epochs, positions = split_keys(np.concatenate(tags))
    assert sorted(positions[epochs == 1].tolist()) == list(range(N))  # each item of epoch 1 once
    assert set(values) == set(range(0, N, 2))  # what was trained: the kept items (epoch 2's too)
    assert after.epoch == 2 and after.count == int((epochs == 2).sum())


def test_a_stage_without_the_protocol_is_refused_by_name():
    with pytest.raises(PositionUnsupportedError, match=r"the stage Silent is not supported \(it may drop"):
        PositionTracker.of(BatchData(Silent(IndexedList(list(range(4)))), 2))


def test_a_stage_that_cannot_resume_says_why_itself():
    with pytest.raises(PositionUnsupportedError, match="Sampled is not supported: it samples its input; use"):
        PositionTracker.of(Sampled(IndexedList(list(range(4)))))


def _foreign_private_assignments(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for sub in ast.walk(target):
                        private = isinstance(sub, ast.Attribute) and sub.attr.startswith("_")
                        if (
                            private
                            and not sub.attr.startswith("__")
                            and not (isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"))
                        ):
                            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(target)}")
    return found


def test_no_module_sets_another_objects_private_state():
    """Resume is driven through the protocol: no dataflow module, and none of the trainer's that read
    or track data, assigns a private attribute of another object (the one exception marks a function
    as ours)."""
    trainer = REPO / "packages/trainer/src/towerpack/trainer"
    found = _foreign_private_assignments(REPO / "packages/dataflow/src/towerpack/dataflow")
    for part in ("input_source", "resume_state.py", "position_exchange.py"):
        assert (trainer / part).exists(), part
        found += _foreign_private_assignments(trainer / part)
    allowed = ["packages/dataflow/src/towerpack/dataflow/wire/interrupts.py"]
    assert [f for f in found if not any(f.startswith(a) for a in allowed)] == []
