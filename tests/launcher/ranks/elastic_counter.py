"""Elastic jobs without TensorFlow: rank 0 counts steps up to STEPS (one per 50 ms) and resumes from OUT/ckpt.

Usage: elastic_counter.py OUT STEPS
Each rank appends 'attempt A rank R world W node N start S reason X prev P master M' to OUT/log when it
starts (S: the checkpointed count it resumes from; M: MASTER_ADDR, the attempt's coordinator's address).
Rank 0 appends each step to OUT/steps.<attempt>; on SIGUSR1 it saves its count to OUT/ckpt and exits 0
(the pre-emption protocol), and at STEPS it saves it and writes OUT/done. The other ranks exit 0 on
SIGUSR1 or once OUT/done exists.
"""

import os
import signal
import sys
import time
from pathlib import Path

out, steps = Path(sys.argv[1]), int(sys.argv[2])
env = os.environ
rank, attempt = int(env["RANK"]), int(env["RESTART_COUNT"])
ckpt = out / "ckpt"
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))


def save(step: int) -> None:
    tmp = out / f"ckpt.{os.getpid()}.tmp"
    tmp.write_text(str(step))
    tmp.replace(ckpt)


step = int(ckpt.read_text()) if ckpt.exists() else 0
with open(out / "log", "a") as f:
    f.write(
        f"attempt {attempt} rank {rank} world {env['WORLD_SIZE']} node {env['NODE_RANK']} start {step} "
        f"reason {env.get('TOWERPACK_RESTART_REASON')} prev {env.get('TOWERPACK_PREVIOUS_WORLD_SIZE')} "
        f"master {env['MASTER_ADDR']}\n"
    )
while not stop:
    if rank != 0:
        if (out / "done").exists():
            break
        time.sleep(0.05)
        continue
    if step >= steps:
        save(step)
        (out / "done").write_text("")
        break
    time.sleep(0.05)
    step += 1
    with open(out / f"steps.{attempt}", "a") as f:
        f.write(f"{step}\n")
if stop and rank == 0:
    save(step)
