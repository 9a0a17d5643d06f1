"""A rank that announces itself (OUT/ready.<RANK> holds its pid), then acts as told for its rank.

Usage: behave.py OUT ACTION[@RANK] ...  (RANK may be psN). ACTION: exit<N>, hang (ignores SIGTERM),
sleep, child (leaves a setsid grandchild that sleeps), ok. An action without @RANK applies to every rank;
the first match wins.
"""

import json
import os
import signal
import subprocess
import sys
import time

out, actions = sys.argv[1], sys.argv[2:]
task = json.loads(os.environ.get("TF_CONFIG") or '{"task": {}}')["task"]
rank = os.environ["RANK"] if task.get("type", "worker") == "worker" else f"ps{task['index']}"
mine = [a.split("@")[0] for a in actions if a.endswith(f"@{rank}")] + [a for a in actions if "@" not in a]
action = mine[0] if mine else "ok"

if action == "child":
    # A grandchild in its own session: only the launcher's job tag can find it.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
with open(os.path.join(out, f"ready.{rank}.tmp"), "w") as f:
    f.write(str(os.getpid()))
os.replace(os.path.join(out, f"ready.{rank}.tmp"), os.path.join(out, f"ready.{rank}"))

if action.startswith("exit"):
    time.sleep(0.3)
    print(f"rank {rank} is failing on purpose", file=sys.stderr)
    sys.exit(int(action[4:]))
if action == "hang":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)
if action in ("sleep", "child"):
    time.sleep(600)
print(f"rank {rank} done")
