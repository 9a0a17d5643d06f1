"""get_distributed_session_creator on a real cluster: a parameter server and two workers, each a
``tf.train.Server`` of this process, each worker with a graph of its own (between-graph
replication). Prints one JSON object with what each step observed.

Usage: session_creator.py PORT_WORKER0 PORT_WORKER1 PORT_PS
"""

import json
import sys
import threading
import time

from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.distributed import get_distributed_session_creator

ports = sys.argv[1:4]
spec = {"worker": [f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"], "ps": [f"127.0.0.1:{ports[2]}"]}
cluster = tf.train.ClusterSpec(spec)
servers = {
    (job, i): tfv1.train.Server(cluster, job_name=job, task_index=i, start=True)
    for job, i in (("ps", 0), ("worker", 0), ("worker", 1))
}


def build(index: int) -> dict:
    """A worker's graph: ``w`` on the parameter server, ``own`` on the worker, a local variable."""
    device = f"/job:worker/task:{index}"
    with tfv1.device(tfv1.train.replica_device_setter(ps_tasks=1, worker_device=device)):
        w = tfv1.get_variable("w", initializer=3.0)
    with tfv1.device(device):
        own = tfv1.get_variable("own", initializer=10.0 + index)
        local = tfv1.get_variable("local", initializer=1.0, collections=[tfv1.GraphKeys.LOCAL_VARIABLES])
    return {"w": w, "own": own, "local": local}


result = {}
try:
    get_distributed_session_creator(servers["ps", 0])
except ValueError as e:
    result["ps_error"] = str(e)

# Worker 1 before the chief: nobody initialized w.
g1 = tf.Graph()
with g1.as_default():
    v1 = build(1)
    start = time.monotonic()
    try:
        get_distributed_session_creator(servers["worker", 1], timeout=1.0).create_session()
    except RuntimeError as e:
        result["timeout_error"] = str(e)
        result["timeout_took"] = time.monotonic() - start

    creator1 = get_distributed_session_creator(servers["worker", 1], timeout=60)
waiting = {}


def worker1() -> None:
    with g1.as_default():
        waiting["sess"] = creator1.create_session()
        waiting["returned"] = time.monotonic()


thread = threading.Thread(target=worker1, daemon=True)
thread.start()
time.sleep(1.5)
result["worker_waited"] = thread.is_alive()

# The chief, through a MonitoredSession as a user's loop would use it.
g0 = tf.Graph()
with g0.as_default():
    v0 = build(0)
    chief_started = time.monotonic()
    with tfv1.train.MonitoredSession(
        session_creator=get_distributed_session_creator(servers["worker", 0])
    ) as sess:
        result["chief"] = {k: float(x) for k, x in sess.run(v0).items()}
        thread.join(30)
        result["worker_returned_after_chief"] = waiting.get("returned", 0) > chief_started
        sess.run(v0["w"].assign(42.0))
        with g1.as_default():
            result["worker"] = {k: float(x) for k, x in waiting["sess"].run(v1).items()}
print(json.dumps(result), flush=True)
