"""What a rank's TensorFlow really does with the launcher's thread variables, and where it may run.

Writes OUT/threads.<RANK>.json: the threads the first session added to the intra-op pool (unnamed
threads; TensorFlow names its inter-op pool's threads 'tf_Compute'), the inter-op threads, the
variables, and the CPU affinity of the main thread and of a new thread.
"""

import collections
import json
import os
import sys
import threading


def threads() -> collections.Counter:
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            continue
    return collections.Counter(names)


import tensorflow as tf  # noqa: E402 - after the helpers, which must not depend on it

tf.compat.v1.disable_eager_execution()
before = threads()
session = tf.compat.v1.Session()
after = threads()
session.run(tf.constant(1.0) + 1.0)
unnamed = sum(n for name, n in after.items() if not name.startswith("tf_"))
unnamed_before = sum(n for name, n in before.items() if not name.startswith("tf_"))
seen = {}
t = threading.Thread(target=lambda: seen.update(affinity=sorted(os.sched_getaffinity(0))))
t.start()
t.join()
report = {
    "intra": unnamed - unnamed_before,
    "inter": after["tf_Compute"],
    "env": {
        k: os.environ.get(k) for k in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS")
    },
    "affinity": sorted(os.sched_getaffinity(0)),
    "thread_affinity": seen["affinity"],
}
with open(os.path.join(sys.argv[1], f"threads.{os.environ['RANK']}.json"), "w") as f:
    json.dump(report, f)
