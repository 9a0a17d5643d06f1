"""A cluster in a box: nodes that are network namespaces, joined by a switch, with links that can fail.

Each node is a network namespace with its own loopback and one veth link, ``eth0``, to a bridge in a
switch namespace of its own; node ``i`` has the address ``10.200.0.<i+1>``. The machine's own network
is not touched, so clusters of parallel test runs cannot see each other even with the same addresses.
A node is cut off the way hosts are lost, as a partition: :meth:`NetCluster.cut` takes its switch
port down and its peers hear nothing more. :meth:`NetCluster.set_rate` limits a link with ``tc tbf``
both ways (the kernels here have no ``netem``, so no delay can be added).

Namespaces need root. :func:`require_netns` skips a test without them, except under ``CI=true``,
where every test must run and it fails instead.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
from dataclasses import dataclass

import psutil
import pytest

PREFIX = "tpk"
SUBNET = "10.200.0"
_counter = itertools.count()
_NAME = re.compile(rf"^{PREFIX}(\d+)x\d+")


def netns_available() -> str | None:
    """None if this process can make network namespaces, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    try:
        subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, timeout=10)
        subprocess.run(["tc", "-V"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"ip/tc cannot be run: {exc}"
    return None


def require_netns() -> None:
    """Skip the calling test when namespaces cannot be made; under ``CI=true``, fail instead."""
    why = netns_available()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"this test needs network namespaces in CI: {why}")
    pytest.skip(why)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def _tc(ns: str, *args: str) -> None:
    proc = subprocess.run(
        ["ip", "netns", "exec", ns, "tc", *args], capture_output=True, text=True, timeout=30
    )
    if proc.returncode:
        raise RuntimeError(f"tc {' '.join(args)} in {ns} failed: {proc.stderr.strip()}")


def _kill_inside(ns: str) -> None:
    """SIGKILL every process that lives in namespace ``ns``."""
    pids = _ip("netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    psutil.wait_procs([p for p in map(_process, pids) if p], timeout=5)


def _process(pid: str) -> psutil.Process | None:
    try:
        return psutil.Process(int(pid))
    except (psutil.Error, ValueError):
        return None


def remove_stale() -> None:
    """Delete the namespaces of clusters whose test process is gone (a run that was killed)."""
    for line in _ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = _NAME.match(name)
        if m and not psutil.pid_exists(int(m.group(1))):
            _kill_inside(name)
            _ip("netns", "del", name, check=False)


def _burst(rate: str) -> str:
    """A token-bucket size for ``rate``: at least 4 timer ticks of traffic and a full TSO segment."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate.lower())
    if not m:
        raise ValueError(f"rate must look like 100mbit or 1gbit, got {rate!r}")
    bits = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    return f"{max(int(bits / 8 / 250), 256 * 1024)}b"


@dataclass(frozen=True)
class NetNode:
    index: int
    ns: str
    addr: str


class NetCluster:
    """``n`` nodes in namespaces on one switch; a context manager that removes everything it made."""

    def __init__(self, n: int, rate: str | None = None):
        if n < 1:
            raise ValueError(f"a cluster needs at least one node, got {n}")
        remove_stale()
        self.name = f"{PREFIX}{os.getpid()}x{next(_counter)}"
        self.switch = f"{self.name}sw"
        self.nodes: list[NetNode] = []
        self._procs: list[subprocess.Popen] = []
        self._rates: dict[int, str] = {}
        try:
            _ip("netns", "add", self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for _ in range(n):
                self.add_node()
            if rate:
                self.set_rate(None, rate)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> NetCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- topology ------------------------------------------------------------------------------------
    def add_node(self) -> NetNode:
        """One more node on the switch (a host that becomes free later), with the cluster's rate."""
        i = len(self.nodes)
        if i >= 250:
            raise ValueError("at most 250 nodes")
        node = NetNode(i, f"{self.name}n{i}", f"{SUBNET}.{i + 1}")
        _ip("netns", "add", node.ns)
        self.nodes.append(node)
        _ip("link", "add", "name", "eth0", "netns", node.ns, "type", "veth", "peer", "name", f"p{i}",
            "netns", self.switch)  # fmt: skip
        _ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0")
        _ip("-n", self.switch, "link", "set", f"p{i}", "up")
        _ip("-n", node.ns, "addr", "add", f"{node.addr}/24", "dev", "eth0")
        _ip("-n", node.ns, "link", "set", "eth0", "up")
        _ip("-n", node.ns, "link", "set", "lo", "up")
        rate = self._rates.get(-1)
        if rate:
            self.set_rate(i, rate)
        return node

    def cut(self, i: int) -> None:
        """Cut node ``i`` off: its switch port goes down, and nothing reaches it or leaves it."""
        _ip("-n", self.switch, "link", "set", f"p{i}", "down")

    def heal(self, i: int) -> None:
        """Reconnect node ``i``."""
        _ip("-n", self.switch, "link", "set", f"p{i}", "up")

    def set_rate(self, i: int | None, rate: str | None) -> None:
        """Limit node ``i``'s link (every node's: ``None``) to ``rate`` each way; ``rate=None`` lifts it."""
        targets = range(len(self.nodes)) if i is None else [i]
        if i is None:
            self._rates[-1] = rate  # nodes added later get it too
        for k in targets:
            for ns, dev in ((self.nodes[k].ns, "eth0"), (self.switch, f"p{k}")):
                if rate is None:
                    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root"],
                                   capture_output=True, timeout=30)  # fmt: skip
                else:
                    _tc(ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                        "burst", _burst(rate), "latency", "50ms")  # fmt: skip

    # -- processes -----------------------------------------------------------------------------------
    def popen(self, i: int, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside node ``i``, in a session of its own; killed at :meth:`close`."""
        kwargs.setdefault("start_new_session", True)
        proc = subprocess.Popen(["ip", "netns", "exec", self.nodes[i].ns, *argv], **kwargs)
        self._procs.append(proc)
        return proc

    def run(self, i: int, argv: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` inside node ``i`` to its end (``subprocess.run`` arguments)."""
        return subprocess.run(["ip", "netns", "exec", self.nodes[i].ns, *argv], timeout=timeout, **kwargs)

    def close(self) -> None:
        """Kill every process started here or living in the namespaces; remove the namespaces."""
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        for ns in [n.ns for n in self.nodes] + [self.switch]:
            _kill_inside(ns)
            _ip("netns", "del", ns, check=False)  # the veth pairs go with them
        self.nodes = []
