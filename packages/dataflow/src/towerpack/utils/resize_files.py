"""How a node's launcher and its ranks talk about a resize in place (elastic jobs): two kinds of small JSON
files in a directory of the node's, named to each rank by ``TOWERPACK_RESIZE_DIR``.

- ``plan.json``, written by the launcher: the resize's ``generation`` and, for each of the node's
  slots (``TOWERPACK_RESIZE_SLOT``), the environment its rank takes on (``RANK``, ``WORLD_SIZE``,
  ``HOROVOD_*``, ...). A rank regroups when it sees a generation above its own.
- ``slot.<slot>.json``, written by each rank: its pid, the generation it is at and its state
  (:class:`RankState`), or why it cannot resize in place.
- ``stop.json``, written by the launcher when it stops the ranks: a rank waiting for a plan gives up at
  once instead of at the end of its wait.

Files rather than a socket: both sides are on one host, a rank reads the plan only when it looks for one
(between steps, or after a failed collective), and a file outlives a writer that dies. Every write goes to a
temporary file first and is renamed into place, so a reader never sees half of one. The launcher and the
ranks import this module alone of each other's code.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DIR_VAR", "GENERATION_VAR", "SLOT_VAR", "Plan", "RankState", "SlotState", "read_plan",
           "read_slots", "stopping", "write_plan", "write_slot", "write_stop"]  # fmt: skip

#: The directory of the node's resize files, the rank's slot on its node, and the generation the rank
#: starts at (0 when its attempt starts; a joining rank starts at the generation it joins).
DIR_VAR = "TOWERPACK_RESIZE_DIR"
SLOT_VAR = "TOWERPACK_RESIZE_SLOT"
GENERATION_VAR = "TOWERPACK_RESIZE_GENERATION"
#: Set (to 1) for a rank that joins a running job: it builds its graph, then waits for the plan.
JOIN_VAR = "TOWERPACK_RESIZE_JOIN"
#: Seconds a rank whose collective failed waits for a plan before it gives up (the launcher sets it).
WAIT_VAR = "TOWERPACK_RESIZE_WAIT_S"
#: The largest file either side reads (a plan carries a few dozen variables per slot).
MAX_BYTES = 1 << 20


class RankState(enum.Enum):
    """Where a rank stands with respect to resizing in place."""

    READY = "ready"  # training, and able to regroup at its generation
    JOINING = "joining"  # a joining rank whose graph and session are ready: it waits for the plan
    CANNOT = "cannot"  # it cannot resize in place (``reason`` says why): the job restarts instead


@dataclass(frozen=True)
class Plan:
    """A resize: its generation and each slot's new environment."""

    generation: int
    slots: dict[int, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class SlotState:
    """What one rank last said of itself."""

    slot: int
    pid: int
    generation: int
    state: RankState
    reason: str = ""


def _write(path: Path, obj) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _read(path: Path):
    """The file's JSON; None when it does not exist (yet)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path} is larger than {MAX_BYTES} bytes")
    return json.loads(data)


def write_plan(directory: str | os.PathLike, plan: Plan) -> None:
    slots = {str(s): {str(k): str(v) for k, v in env.items()} for s, env in plan.slots.items()}
    _write(Path(directory) / "plan.json", {"generation": int(plan.generation), "slots": slots})


def read_plan(directory: str | os.PathLike) -> Plan | None:
    """The node's last plan, or None; a clear error when the file is not one."""
    path = Path(directory) / "plan.json"
    obj = _read(path)
    if obj is None:
        return None
    try:
        slots = {int(s): {str(k): str(v) for k, v in env.items()} for s, env in obj["slots"].items()}
        return Plan(int(obj["generation"]), slots)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"{path} is not a resize plan: {e!r}") from None


def write_stop(directory: str | os.PathLike) -> None:
    """Tell the node's ranks that their launcher stops them: a rank waiting for a plan stops waiting."""
    _write(Path(directory) / "stop.json", {"stop": True})


def stopping(directory: str | os.PathLike) -> bool:
    return (Path(directory) / "stop.json").exists()


def write_slot(directory: str | os.PathLike, state: SlotState) -> None:
    obj = {"slot": state.slot, "pid": state.pid, "generation": state.generation, "state": state.state.value,
           "reason": state.reason}  # fmt: skip
    _write(Path(directory) / f"slot.{state.slot}.json", obj)


def read_slots(directory: str | os.PathLike, count: int) -> dict[int, SlotState]:
    """What the ranks of slots ``0..count-1`` last said; a slot whose file is missing or not valid is left
    out (a rank may be writing it for the first time, or be no rank of ours)."""
    states = {}
    for slot in range(count):
        try:
            obj = _read(Path(directory) / f"slot.{slot}.json")
            if obj is None:
                continue
            states[slot] = SlotState(
                int(obj["slot"]), int(obj["pid"]), int(obj["generation"]), RankState(obj["state"]),
                str(obj.get("reason", ""))[:500],
            )  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return states
