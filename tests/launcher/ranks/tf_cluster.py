"""A TF_CONFIG cluster through the launcher: parameter servers join(); each worker adds RANK+1 to a
variable on ps 0 and waits until every worker's share arrived. Prints 'TOTAL <value>' on each worker."""

import json
import os
import time

import tensorflow as tf

tf.compat.v1.disable_eager_execution()
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
cluster = tf.train.ClusterSpec(config["cluster"])
server = tf.compat.v1.train.Server(cluster, job_name=task["type"], task_index=task["index"])
if task["type"] == "ps":
    server.join()  # blocks forever; the launcher stops it once the workers are done

workers = len(config["cluster"]["worker"])
with tf.device("/job:ps/task:0"):
    total = tf.compat.v1.get_variable("total", initializer=0.0, use_resource=True)
add = total.assign_add(float(task["index"] + 1))
session_config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task['index']}"])
with tf.compat.v1.Session(server.target, config=session_config) as sess:
    if task["index"] == 0:
        sess.run(total.initializer)
    deadline = time.monotonic() + 60
    while sess.run(tf.compat.v1.report_uninitialized_variables()).size:
        assert time.monotonic() < deadline, "variables never initialized"
        time.sleep(0.05)
    sess.run(add)
    want = workers * (workers + 1) / 2
    while (value := sess.run(total)) < want:
        assert time.monotonic() < deadline, f"total stuck at {value}"
        time.sleep(0.05)
    print("TOTAL", value, flush=True)
