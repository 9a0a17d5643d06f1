"""The namespace cluster the multi-host tests run on: addresses, rate limits, partitions, clean-up."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from support.netcluster import NetCluster, require_netns

pytestmark = pytest.mark.timeout(120)

# A TCP sink on node 1: prints the bytes it got and the seconds from first to last byte.
SINK = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5001)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); got = 0; first = None
while True:
    b = c.recv(1 << 20)
    if not b: break
    first = first or time.perf_counter(); got += len(b)
print(got, time.perf_counter() - first, flush=True)
"""

SEND = """
import socket, sys
c = socket.create_connection((sys.argv[1], 5001), timeout=float(sys.argv[3]))
c.sendall(b"x" * int(sys.argv[2])); c.close()
"""


def _transfer(net: NetCluster, size: int) -> float:
    """Bytes per second from node 0 to node 1."""
    sink = net.popen(1, [sys.executable, "-c", SINK, net.nodes[1].addr], stdout=subprocess.PIPE, text=True)
    assert sink.stdout.readline().strip() == "ready"
    net.run(0, [sys.executable, "-c", SEND, net.nodes[1].addr, str(size), "30"], timeout=60, check=True)
    got, seconds = sink.stdout.readline().split()
    sink.wait(timeout=10)
    assert int(got) == size
    return size / float(seconds)


def _connects(net: NetCluster, src: int, dst: int) -> bool:
    """Whether node ``src`` reaches a listener on node ``dst`` within 2 s."""
    sink = net.popen(
        dst, [sys.executable, "-c", SINK, net.nodes[dst].addr], stdout=subprocess.PIPE, text=True
    )
    try:
        assert sink.stdout.readline().strip() == "ready"
        sent = net.run(
            src,
            [sys.executable, "-c", SEND, net.nodes[dst].addr, "1000", "2"],
            timeout=30,
            capture_output=True,
        )
        return sent.returncode == 0
    finally:
        sink.kill()
        sink.wait(timeout=10)


def _our_namespaces(net_name: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(net_name)]


def test_rate_limit_partition_and_cleanup():
    require_netns()
    with NetCluster(3) as net:
        assert [n.addr for n in net.nodes] == ["10.200.0.1", "10.200.0.2", "10.200.0.3"]
        assert _connects(net, 0, 2)

        net.set_rate(None, "100mbit")
        rate = _transfer(net, 12_500_000) * 8 / 100e6  # one second at the limit
        assert 0.8 < rate < 1.1, f"measured {rate:.2f} of the 100 Mbit/s limit"
        net.set_rate(None, None)
        assert _transfer(net, 50_000_000) * 8 > 300e6  # the limit is lifted

        net.cut(2)
        t0 = time.monotonic()
        assert not _connects(net, 0, 2)  # silence, not a refusal: the sender times out
        assert time.monotonic() - t0 >= 1.5
        assert _connects(net, 0, 1)  # the others still reach each other
        net.heal(2)
        assert _connects(net, 0, 2)

        joined = net.add_node()
        assert joined.addr == "10.200.0.4" and _connects(net, joined.index, 0)

        stray = net.popen(1, [sys.executable, "-c", "import time; time.sleep(600)"])
        name = net.name
    assert stray.poll() is not None  # killed at close
    assert _our_namespaces(name) == []
