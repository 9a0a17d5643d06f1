"""A rank that resizes in place without TensorFlow: it speaks its launcher's resize files as a trainer does.

Usage: resize_speaker.py OUT STEPS [MODE]
Each start appends 'start PID rank R world W gen G join J' to OUT/log. Every 50 ms the rank counts a step
(rank 0 appends it to OUT/steps); when its launcher's plan has a later generation it takes the plan's
RANK and WORLD_SIZE and appends 'regroup PID rank R world W gen G'. A joining rank says it waits, then
takes the plan. Rank 0 writes OUT/done after STEPS steps; the others end when it exists. MODE ``cannot``:
the rank says it cannot resize in place; ``die``: it exits 3 when a plan comes; on SIGUSR1 every rank exits 0.
"""

import os
import signal
import sys
import time
from pathlib import Path

from towerpack.utils import resize_files as rf

out, steps = Path(sys.argv[1]), int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else ""
env = os.environ
directory, slot = env[rf.DIR_VAR], int(env[rf.SLOT_VAR])
generation = int(env.get(rf.GENERATION_VAR, "0"))
joining = env.get(rf.JOIN_VAR) == "1"
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))


def log(line: str) -> None:
    with open(out / "log", "a") as f:
        f.write(line + "\n")


def say(state: rf.RankState, reason: str = "") -> None:
    rf.write_slot(directory, rf.SlotState(slot, os.getpid(), generation, state, reason))


def take(plan: rf.Plan) -> None:
    global generation
    os.environ.update(plan.slots[slot])
    generation = plan.generation
    log(f"regroup {os.getpid()} rank {env['RANK']} world {env['WORLD_SIZE']} gen {generation}")
    say(rf.RankState.READY)


log(f"start {os.getpid()} rank {env['RANK']} world {env['WORLD_SIZE']} gen {generation} join {int(joining)}")
if mode == "cannot":
    say(rf.RankState.CANNOT, "it was told not to")
elif joining:
    time.sleep(0.5)  # as if building its graph
    say(rf.RankState.JOINING)
else:
    say(rf.RankState.READY)
step = 0
while not stop:
    plan = rf.read_plan(directory)
    if plan is not None and plan.generation > generation:
        if mode == "die":
            sys.exit(3)
        take(plan)
    if env["RANK"] == "0":
        if step >= steps:
            (out / "done").write_text("")
            break
        step += 1
        with open(out / "steps", "a") as f:
            f.write(f"{step}\n")
    elif (out / "done").exists():
        break
    time.sleep(0.05)
