"""Horovod across hosts as they often are: the host name resolves to a loopback address.

Debian's default /etc/hosts maps the host name to 127.0.1.1, and the namespaces of the test cluster
share this machine's host name, which resolves to 127.0.0.1. Horovod 0.28 as released then makes
the Gloo context of its process sets on that address instead of the interface it was given, and
`hvd.init()` fails on several hosts with "connect [127.0.0.1]:PORT: Connection refused"; our build
patches that (scripts/build_horovod.sh).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys

import pytest

from support.launcher_run import LAUNCH, rank_script
from support.netcluster import NetCluster, require_netns

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(120)]
ENV = {"TOWERPACK_LAUNCH_SECRET": "secret-of-the-horovod-hosts-test"}


def test_allreduce_across_hosts_whose_name_is_loopback(tmp_path, horovod_required):
    require_netns()
    name = socket.gethostname()
    with NetCluster(2) as net:
        resolved = net.run(
            1, [sys.executable, "-c", f"import socket; print(socket.gethostbyname({name!r}))"],
            timeout=30, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert ipaddress.ip_address(resolved).is_loopback  # what the test is about
        procs = []
        for i in range(2):
            argv = [*LAUNCH, "--nnodes", "2", "--node-rank", str(i), "--master", f"{net.nodes[0].addr}:29400",
                    "--np", "1", rank_script("hvd_allreduce.py")]  # fmt: skip
            out = tmp_path / f"node{i}.txt"
            with out.open("w") as f:
                procs.append(
                    net.popen(i, argv, env=dict(os.environ, **ENV), stdout=f, stderr=subprocess.STDOUT)
                )
        codes = [p.wait(timeout=90) for p in procs]
        outputs = [(tmp_path / f"node{i}.txt").read_text() for i in range(2)]
    assert codes == [0, 0], "\n".join(o[-2000:] for o in outputs)
    # rank, size, cross size (one rank per host), and the sum of rank + 1 over both ranks
    assert "RESULT 0 2 2 3.0" in outputs[0] and "RESULT 1 2 2 3.0" in outputs[1]
