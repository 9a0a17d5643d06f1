"""Writes this task's launcher variables to OUT/env.<RANK or psN>.json and prints one line on each
stream."""

import json
import os
import sys

KEYS = [
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
    "RESTART_COUNT", "CUDA_VISIBLE_DEVICES", "PYTHONUNBUFFERED", "TF_CONFIG",
    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS", "TOWERPACK_LAUNCH_SECRET",
]  # fmt: skip
out = sys.argv[1]
task = json.loads(os.environ.get("TF_CONFIG") or '{"task": {}}')["task"]
name = os.environ["RANK"] if task.get("type", "worker") == "worker" else f"ps{task['index']}"
env = {k: os.environ.get(k) for k in KEYS}
env.update({k: v for k, v in os.environ.items() if k.startswith("HOROVOD_")})
env["argv"] = sys.argv[2:]
# Written whole or not at all: a parameter server may be stopped while it writes.
path = os.path.join(out, f"env.{name}.json")
with open(path + ".tmp", "w") as f:
    json.dump(env, f)
os.replace(path + ".tmp", path)
print(f"hello from rank {name}")
print(f"note from rank {name}", file=sys.stderr)
