"""Restarts: rank 0 checkpoints a step counter to OUT/ckpt; rank 1 fails once (first attempt, after step 3).
A restarted attempt resumes from the checkpoint. Each rank appends 'attempt <RESTART_COUNT> start <step>'
to OUT/log.<RANK>. Run with 'always-fail' to fail on every attempt."""

import os
import sys
import time
from pathlib import Path

out = Path(sys.argv[1])
always_fail = sys.argv[2:] == ["always-fail"]
rank, attempt = os.environ["RANK"], int(os.environ["RESTART_COUNT"])
ckpt = out / "ckpt"
step = int(ckpt.read_text()) if ckpt.exists() else 0
with open(out / f"log.{rank}", "a") as f:
    f.write(f"attempt {attempt} start {step}\n")
print(f"rank {rank} attempt {attempt} starts at step {step}")

if rank == "1" and (attempt == 0 or always_fail):
    deadline = time.monotonic() + 30
    while not always_fail and (not ckpt.exists() or int(ckpt.read_text() or 0) < 3):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    print(f"rank 1 fails in attempt {attempt}", file=sys.stderr)
    sys.exit(7)
if rank == "0":
    while step < 6:
        step += 1
        tmp = out / "ckpt.tmp"
        tmp.write_text(str(step))
        tmp.replace(ckpt)
        time.sleep(0.05 if attempt else 0.02)
        if attempt == 0 and step == 3:
            time.sleep(30)  # the failing rank 1 ends this attempt here
