"""Jobs whose items carry their ids and data epoch (tests/integration/ranks/items_train.py) under
`launch`: starting and stopping them, and checking what every data epoch trained on."""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
from pathlib import Path

from support.launcher_run import LAUNCH
from support.procs import wait_for
from towerpack.trainer.resume_state import ResumeRecord

__all__ = ["N_ITEMS", "RANKS", "Items", "assert_each_item_once", "start", "steps_done", "stop_after"]

RANKS = Path(__file__).resolve().parents[1] / "integration" / "ranks"
SCRIPT = str(RANKS / "items_train.py")
sys.path.insert(0, str(RANKS))
from serve_items import N_ITEMS, Items  # noqa: E402


def start(logdir: Path, np_: int, *args: str) -> subprocess.Popen:
    argv = [*LAUNCH, "--np", str(np_), SCRIPT, str(logdir), *args]
    path = logdir.parent / f"launch-{len(list(logdir.parent.glob('launch-*')))}.txt"
    with open(path, "w") as out:
        return subprocess.Popen(argv, cwd=RANKS, stdout=out, stderr=subprocess.STDOUT)


def steps_done(logdir: Path) -> int:
    """The highest global step any rank has logged."""
    return max((int(line.split()[0]) for p in logdir.glob("steps.*") for line in p.read_text().splitlines()),
               default=0)  # fmt: skip


def stop_after(proc: subprocess.Popen, logdir: Path, step: int) -> None:
    """Send the launcher SIGUSR1 once the job has trained ``step`` steps; it checkpoints and stops."""
    wait_for(lambda: steps_done(logdir) >= step or proc.poll() is not None, 240, what=f"step {step}")
    assert proc.poll() is None, "the job ended before it could be stopped"
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=120) == 128 + signal.SIGUSR1


def trained(logdir: Path) -> dict[int, list[int]]:
    """Data epoch -> the ids of every item trained on in it, over all runs and ranks. A stopped run
    trains no step after its checkpoint, so every logged step counts."""
    by_epoch = collections.defaultdict(list)
    for path in logdir.glob("steps.*"):
        for line in path.read_text().splitlines():
            for pair in line.split()[1:]:
                epoch, item = pair.split(":")
                by_epoch[int(epoch)].append(int(item))
    return dict(by_epoch)


def assert_each_item_once(
    logdir: Path, id_of=lambda epoch, positions: positions, in_buffers: int = 0
) -> None:
    """No data epoch trained an item twice; what was trained of each is exactly what the last
    checkpoint's record holds; every epoch before the last two begun trained every item (the last ones
    may have items in queues when training ends). ``id_of(epoch, positions)``: the ids at those
    positions of the epoch's order. ``in_buffers``: a pipeline with an endless shuffle buffer may hold
    that many items of older epochs as well."""
    record = ResumeRecord.read(tf_checkpoint(logdir)).data
    epochs = trained(logdir)
    for epoch, ids in sorted(epochs.items()):
        counts = collections.Counter(ids)
        twice = sorted(i for i, c in counts.items() if c > 1)
        assert not twice, f"data epoch {epoch}: trained twice {twice}"
        done = [p for a, b in record.consumed_in(epoch) for p in range(a, b)]
        expected = set(range(N_ITEMS)) if epoch < record.epoch else set(id_of(epoch, done))
        assert set(counts) == expected, (
            f"data epoch {epoch}: never trained {sorted(expected - set(counts))}, "
            f"trained but not recorded {sorted(set(counts) - expected)}"
        )
    last = max(epochs)
    missing = sum(N_ITEMS - len(set(ids)) for e, ids in epochs.items() if e < last - 1)
    assert missing <= in_buffers, f"{missing} items of finished epochs never trained: {record}"
    assert last >= 4, record


def tf_checkpoint(logdir: Path) -> str:
    """The prefix of the checkpoint the directory's ``checkpoint`` file points at."""
    line = (logdir / "checkpoint").read_text().splitlines()[0]
    return str(logdir / line.split('"')[1])
