"""The files through which a node's launcher and its ranks talk about a resize, and the regroup's state bytes:
what each side reads back, and what it makes of files and bytes that are not what they should be."""

from __future__ import annotations

import os
import threading
import time

import pytest

from towerpack.trainer.resize.rank_channel import RankChannel
from towerpack.trainer.resize.regroup import decode_state, encode_state
from towerpack.utils import resize_files as rf


def _channel(tmp_path, **env) -> RankChannel:
    base = {rf.DIR_VAR: str(tmp_path), rf.SLOT_VAR: "1", rf.GENERATION_VAR: "2", rf.WAIT_VAR: "5"}
    return RankChannel.from_env({**base, **env})


def test_a_plan_reaches_its_slot_and_the_ranks_answer_reaches_the_launcher(tmp_path):
    channel = _channel(tmp_path)
    assert channel.next_plan() is None
    rf.write_plan(tmp_path, rf.Plan(2, {1: {"RANK": "5"}}))
    assert channel.next_plan() is None  # not later than the rank's own generation
    rf.write_plan(tmp_path, rf.Plan(3, {0: {"RANK": "0"}, 1: {"RANK": "4", "WORLD_SIZE": "6"}}))
    plan = channel.next_plan()
    assert channel.env_of(plan) == {"RANK": "4", "WORLD_SIZE": "6"}
    channel.taken(plan)
    assert channel.generation == 3 and channel.next_plan() is None
    states = rf.read_slots(tmp_path, 3)
    assert list(states) == [1]
    assert (states[1].pid, states[1].generation, states[1].state) == (os.getpid(), 3, rf.RankState.READY)
    rf.write_plan(tmp_path, rf.Plan(4, {0: {}}))
    with pytest.raises(RuntimeError, match="no place for slot 1 of this node"):
        channel.env_of(channel.next_plan())


def test_the_watcher_flags_a_later_plan_and_a_stop_ends_the_wait_at_once(tmp_path):
    channel = _channel(tmp_path)
    channel.watch()
    try:
        rf.write_plan(tmp_path, rf.Plan(3, {1: {}}))
        deadline = time.monotonic() + 5
        while not channel.pending.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert channel.pending.is_set()
    finally:
        channel.close()
    waiting = _channel(tmp_path / "x", **{rf.GENERATION_VAR: "0"})
    (tmp_path / "x").mkdir()
    threading.Timer(0.3, rf.write_stop, args=(tmp_path / "x",)).start()
    began = time.monotonic()
    assert waiting.wait_plan(30) is None
    assert time.monotonic() - began < 3


def test_files_that_are_not_plans_or_states_are_named_or_skipped(tmp_path):
    (tmp_path / "plan.json").write_text('{"generation": "x", "slots": []}')
    with pytest.raises(ValueError, match=r"plan\.json is not a resize plan"):
        rf.read_plan(tmp_path)
    (tmp_path / "plan.json").write_bytes(b" " * (rf.MAX_BYTES + 1))
    with pytest.raises(ValueError, match="larger than"):
        rf.read_plan(tmp_path)
    assert _channel(tmp_path).next_plan() is None  # the rank says so in its log and waits on
    (tmp_path / "slot.0.json").write_text('{"slot": 0, "pid": 1, "generation": 0, "state": "sleepy"}')
    (tmp_path / "slot.1.json").write_text("[1, 2]")
    rf.write_slot(tmp_path, rf.SlotState(2, 7, 1, rf.RankState.CANNOT, "no collectives"))
    assert rf.read_slots(tmp_path, 3) == {2: rf.SlotState(2, 7, 1, rf.RankState.CANNOT, "no collectives")}
    with pytest.raises(ValueError, match="must be numbers"):
        _channel(tmp_path, **{rf.SLOT_VAR: "one"})
    assert RankChannel.from_env({}) is None


def test_the_regroup_state_round_trips_and_rejects_what_another_rank_could_send_wrong():
    parts = {"position": b"\x00\x01abc", "other": b""}
    assert decode_state(encode_state(parts)) == parts
    assert decode_state(encode_state({})) == {}
    good = encode_state(parts)
    for bad in (b"", b"\x00\x00\x00\x05{}", good + b"x", good[:-1], b"\x00\x00\x00\x02[]",
                b"\x00\x00\x00\x0b{\"a\": -1}"):  # fmt: skip
        with pytest.raises(ValueError, match="state from the source rank is not valid"):
            decode_state(bad)
