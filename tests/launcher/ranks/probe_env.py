"""Probes a rank makes of what the launcher set up for it; writes OUT/probe.<RANK or psN>.json.

Usage: probe_env.py OUT store|ports
  store  PUT and GET on the Gloo store with the address Horovod is given, and with the token removed
  ports  bind this task's TF_CONFIG port as a plain program would and as gRPC does (SO_REUSEPORT),
         and bind MASTER_PORT plainly
"""

import json
import os
import socket
import sys
import urllib.error
import urllib.request

out, what = sys.argv[1], sys.argv[2]
config = json.loads(os.environ.get("TF_CONFIG") or '{"task": {}}')
task = config["task"]
name = os.environ["RANK"] if task.get("type", "worker") == "worker" else f"ps{task['index']}"


def status(method, url, body=None):
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def bind(port, reuseport):
    with socket.socket() as s:
        if reuseport:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            s.bind(("0.0.0.0", port))
            return "bound"
        except OSError as e:
            return e.strerror


result = {}
if what == "store":
    # What Horovod does with the two variables: http://<ADDR>:<PORT>/<scope>/<key>
    addr, port = os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"], os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"]
    base = f"http://{addr}:{port}/probe/rank{name}"
    host = addr.split("/")[0]
    result = {
        "put": status("PUT", base, b"value"),
        "get": status("GET", base),
        "get_missing": status("GET", base + "-missing"),
        "no_token": status("GET", f"http://{host}/probe/rank{name}"),
        "wrong_token": status("GET", f"http://{host}/{'0' * 32}:{port}/probe/rank{name}"),
    }
else:
    host, port = config["cluster"][task["type"]][task["index"]].rsplit(":", 1)
    result = {
        "plain": bind(int(port), False),
        "reuseport": bind(int(port), True),
        "master_port": bind(int(os.environ["MASTER_PORT"]), False) if name == "0" else None,
    }
with open(os.path.join(out, f"probe.{name}.json"), "w") as f:
    json.dump(result, f)
