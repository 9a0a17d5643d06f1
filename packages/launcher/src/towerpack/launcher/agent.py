"""The launcher of a node other than node 0: joins node 0, runs what it is told, reports every exit."""

from __future__ import annotations

import os
import queue
import signal
import socket
import threading
import time
import uuid

from towerpack.launcher import net, watchdog
from towerpack.launcher.coordinator import local_info, say
from towerpack.launcher.group import LocalGroup, Task
from towerpack.launcher.nodes import Channel
from towerpack.launcher.signals import Received, as_events
from towerpack.launcher.spec import LaunchSpec


def _connect(addr: str, port: int, timeout: float, received: Received) -> socket.socket | None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection((addr, port), timeout=5.0)
        except OSError:
            if time.monotonic() > deadline or received.last:
                return None
            time.sleep(0.3)


def run(spec: LaunchSpec) -> int:
    tag = f"{spec.job_id}-{uuid.uuid4().hex[:8]}"
    events: queue.SimpleQueue = queue.SimpleQueue()
    dog = watchdog.start(tag)
    group = None
    try:
        with as_events(events) as received:
            sock = _connect(spec.master_addr, spec.master_port, spec.start_timeout, received)
            if sock is None:
                where = f"{spec.master_addr}:{spec.master_port}"
                say(f"could not reach node 0 at {where} within {spec.start_timeout:g} s")
                return 1
            sock.settimeout(None)
            channel = Channel(sock)
            addr = spec.node_addr or net.source_address(spec.master_addr)
            info = local_info(spec, spec.node_rank, addr, spec.slots, spec.cuda)
            channel.send({"t": "hello", "nnodes": spec.nnodes, "n_ps": spec.n_ps, "info": info.to_dict()})
            group = LocalGroup(
                info.hostname,
                spec.argv,
                tag,
                spec.output,
                lambda e: channel.send({"t": "exit", **e.to_dict()}),
            )
            threading.Thread(target=_pump, args=(channel, events), daemon=True).start()
            if spec.watch_stdin:
                threading.Thread(target=_watch_stdin, args=(events,), daemon=True).start()
            return _serve(spec, channel, group, info.hostname, events)
    finally:
        if group is not None:
            group.stop()
        watchdog.stop(dog)


def _pump(channel: Channel, events: queue.SimpleQueue) -> None:
    while True:
        msg = channel.recv()
        events.put(("msg", None, msg))
        if msg is None:
            return


def _watch_stdin(events: queue.SimpleQueue) -> None:
    # Started over ssh: the channel's end of stdin means the launcher that started us is gone.
    # os.read, not sys.stdin: a daemon thread blocked in a buffered read breaks interpreter shutdown.
    while os.read(0, 65536):
        pass
    events.put(("msg", None, None))


def _serve(
    spec: LaunchSpec, channel: Channel, group: LocalGroup, host: str, events: queue.SimpleQueue
) -> int:
    while True:
        kind, _, payload = events.get()
        if kind == "signal":
            name = signal.Signals(payload).name
            channel.send(
                {
                    "t": "exit",
                    "task": f"node {spec.node_rank}",
                    "kind": "node",
                    "host": host,
                    "code": -payload,
                    "tail": [f"the launcher of node {spec.node_rank} received {name}"],
                    "time": time.time(),
                }
            )
            group.stop()
            return 128 + payload
        msg = payload
        if msg is None:
            where = f"{spec.master_addr}:{spec.master_port}"
            say(f"lost contact with node 0 at {where}; stopping this node's processes")
            group.stop()
            return 1
        if msg["t"] == "reject":
            say(f"node 0 refused this node: {msg['reason']}")
            return 2
        if msg["t"] == "start":
            group.start([Task(**t) for t in msg["tasks"]], msg["attempt"])
        elif msg["t"] == "stop":
            group.stop()
            channel.send({"t": "stopped"})
        elif msg["t"] == "finish":
            return msg["code"]
