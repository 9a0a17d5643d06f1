"""A rank that announces itself (OUT/ready.<RANK> holds its pid), then acts as told for its rank.

Usage: behave.py OUT ACTION[@RANK] ...  (RANK may be psN). An action without @RANK applies to every rank;
the first match wins. ACTION:
  exit<N>      wait until every task of the job is ready, write OUT/failed.<RANK> (the time), exit N
  holdexit<N>  the same, but leave a grandchild that holds this rank's output pipes open for a while
  follow<N>    wait until a rank that wrote OUT/failed.* has ended, then exit N (a consequential failure)
  await<N>     wait until the test writes OUT/go, then write OUT/failed.<RANK> and exit N
  hang         ignore SIGTERM (before announcing itself) and never end
  deaf         ignore SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 (before announcing itself), never end
  trap         on any of those five signals, write its name to OUT/signal.<RANK> and exit 0
  sleep        sleep 600 s;  child: leave a setsid grandchild that sleeps, then sleep;  ok: end at once
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

out, actions = Path(sys.argv[1]), sys.argv[2:]
config = json.loads(os.environ.get("TF_CONFIG") or '{"task": {}}')
task = config["task"]
rank = os.environ["RANK"] if task.get("type", "worker") == "worker" else f"ps{task['index']}"
mine = [a.split("@")[0] for a in actions if a.endswith(f"@{rank}")] + [a for a in actions if "@" not in a]
action = mine[0] if mine else "ok"


def wait_for(predicate, what):
    deadline = time.monotonic() + 30
    while not predicate():
        if time.monotonic() > deadline:
            print(f"rank {rank} gave up waiting for {what}", file=sys.stderr)
            sys.exit(99)  # a code no test expects
        time.sleep(0.02)


def gone(pid):
    try:
        os.kill(pid, 0)  # succeeds until the launcher has reaped it
    except ProcessLookupError:
        return True
    return False


if action == "child":
    # A grandchild in its own session: only the launcher's job tag can find it.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
if action == "hang":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if action == "deaf":
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
if action == "trap":

    def note(signum, _frame):
        (out / f"signal.{rank}").write_text(signal.Signals(signum).name)
        sys.exit(0)

    for sig in STOP_SIGNALS:
        signal.signal(sig, note)
(out / f"ready.{rank}.tmp").write_text(str(os.getpid()))
os.replace(out / f"ready.{rank}.tmp", out / f"ready.{rank}")

if action.startswith(("exit", "holdexit")):
    tasks = [str(r) for r in range(int(os.environ["WORLD_SIZE"]))]
    tasks += [f"ps{i}" for i in range(len(config.get("cluster", {}).get("ps", [])))]
    wait_for(lambda: all((out / f"ready.{t}").exists() for t in tasks), "every task to be ready")
    if action.startswith("hold"):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])  # inherits stdout/stderr
    print(f"rank {rank} is failing on purpose", file=sys.stderr)
    (out / f"failed.{rank}").write_text(repr(time.time()))
    sys.exit(int(action.removeprefix("hold")[4:]))
if action.startswith("follow"):
    wait_for(lambda: list(out.glob("failed.*")), "a rank to fail")
    failed = next(out.glob("failed.*")).name.split(".", 1)[1]
    wait_for(lambda: gone(int((out / f"ready.{failed}").read_text())), f"rank {failed} to end")
    print(f"rank {rank} fails because rank {failed} did", file=sys.stderr)
    sys.exit(int(action[6:]))
if action.startswith("await"):
    while not (out / "go").exists():
        time.sleep(0.02)
    print(f"rank {rank} fails after being told to", file=sys.stderr)
    (out / f"failed.{rank}").write_text(repr(time.time()))
    sys.exit(int(action[5:]))
if action in ("hang", "deaf"):
    while True:
        time.sleep(1)
if action in ("sleep", "child", "trap"):
    time.sleep(600)
print(f"rank {rank} done")
