"""The control plane at scale: one real node 0 and N-1 simulated node agents on one machine.

Node 0 is a real ``launch --nnodes N --node-rank 0 ... --backend none`` process (its one rank sleeps).
The other nodes are simulated in this process: each joins from a thread of its own with the
launcher's code (:func:`towerpack.launcher.joining.join`, the real handshake, retries included), then
lives on a real :class:`~towerpack.launcher.hub.Channel` (heartbeats both ways; one hub thread serves
them all), answers the start-up
reachability check with the real :func:`~towerpack.launcher.probe.probe`, and answers ``Stop`` with
``Stopped`` as an agent does. Nothing of the protocol is written again here. Measured, for each N:

- start: seconds from the last agent's connect to every agent told to start (all joined, the
  reachability check passed, the attempt planned and sent); goal < 10 s;
- heartbeats: node 0's CPU time in steady state (the job running, heartbeats both ways with every
  node) over a window, as a share of one core; goal < 5 %;
- a loss: seconds from one agent's connection closing to every other agent told to stop (fixed
  size) or, elastic (``--nnodes N-1:N``), told to stop and told to start again at the smaller size;
  goal < 2 s;
- memory: node 0's RSS once all nodes are there, less its RSS while it waited for them.

The Gloo store (:mod:`towerpack.launcher.gloo_store`) under Horovod's rendezvous: R simulated ranks
speak HTTP to a real store in its own process as Horovod 0.28.1's Gloo does (recorded from real
``hvd.init()`` runs): one new connection per request; each rank sets ``rank_<r>`` (its host), reads
those of the ranks before it (a few here), sets ``<r>`` (its pair addresses: 136 bytes for each other
rank), then, for each other rank in order, polls ``GET <j>`` every 10 ms until it exists and gets it
once more, and finally sends ``DELETE <r>``. Horovod does this for each of its contexts (global,
local, cross, and again per process set); one context is simulated. All ranks fetching everything is
2R(R-1) reads of (R-1)*136 bytes: 2.1 M reads and 290 GB at R = 1,024, cubic in R. The full pattern
runs at R = 64 (and 256 without ``--quick``); beyond, every rank sets its value and fetches
``--sample`` others (all ranks at once), and the store's CPU time per request gives the CPU time the
whole rendezvous needs of it (the simulated clients, not the store, limit the wall time here).

Usage: ``python benchmarks/control_plane.py [--quick] [--nodes 64 256 1024] [--window S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from towerpack.launcher.hub import Channel
from towerpack.launcher.joining import join
from towerpack.launcher.plan import NodeInfo
from towerpack.launcher.probe import ProbeListener, probe
from towerpack.launcher.protocol import Agreed, Finish, Join, Members, Probe, Probed, Start, Stop, Stopped

START_GOAL_S = 10.0
CPU_GOAL_PERCENT = 5.0
LOSS_GOAL_S = 2.0
JOIN_TIMEOUT_S = 120.0  # an agent's --start-timeout
SECRET = secrets.token_hex(16)
RANK_SCRIPT = "import time\ntime.sleep(3600)\n"
#: Bytes Horovod 0.28.1's Gloo stores per rank and per other rank (a sockaddr_storage and a sequence).
GLOO_ADDR_BYTES = 136
GLOO_POLL_S = 0.010


# -- simulated node agents ---------------------------------------------------------------------------
@dataclass
class SimAgent:
    """One simulated node: joins like a launcher, then answers as one (its tasks never end)."""

    index: int
    probe_port: int
    arrived: float = 0.0  # when it first tried to connect
    channel: Channel | None = None
    started: dict[int, float] = field(default_factory=dict)  # attempt -> when told
    stopped: list[float] = field(default_factory=list)
    finished: float = 0.0
    lost: float = 0.0
    error: str = ""

    def join(self, port: int, nnodes: int, elastic: bool) -> None:
        info = NodeInfo(self.index, "127.0.0.1", f"sim{self.index}", 1, None, (1, 2), None, self.probe_port)
        msg = Join(info, 0, 0, nnodes - 1, nnodes, "none") if elastic else Join(info, nnodes, 0)
        self.arrived = time.time()
        try:
            conn, welcome = join("127.0.0.1", port, SECRET.encode(), msg, timeout=JOIN_TIMEOUT_S)
        except Exception as exc:  # reported with the results, not raised from a thread
            self.error = f"{type(exc).__name__}: {exc}"
            return
        self.channel = Channel(
            conn, welcome.heartbeat_interval, welcome.heartbeat_timeout, self._on_message, self._on_lost
        )
        self.channel.start()

    def _on_message(self, msg) -> None:
        now = time.time()
        if isinstance(msg, Start):
            self.started[msg.attempt] = now
        elif isinstance(msg, Stop):
            self.stopped.append(now)
            self.channel.send(Stopped(0))
        elif isinstance(msg, Probe):
            threading.Thread(target=self._probe, args=(msg.targets,), daemon=True).start()
        elif isinstance(msg, Members):
            self.channel.send(Agreed(msg.epoch))
        elif isinstance(msg, Finish):
            self.finished = now
            self.channel.close()

    def _probe(self, targets) -> None:
        self.channel.send(Probed(tuple(probe(targets))))

    def _on_lost(self, loss) -> None:
        self.lost = time.time()

    def drop(self) -> None:
        """Lose this node the way a killed launcher is lost: its connection closes."""
        self.channel.conn.shutdown()


def _wait(predicate, timeout: float, what: str, node0: Node0 | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if node0 is not None and node0.proc.poll() is not None:
            raise RuntimeError(f"node 0 exited ({node0.proc.returncode}) waiting for {what}:\n{node0.tail()}")
        time.sleep(0.01)
    raise TimeoutError(f"timed out waiting for {what}" + (f":\n{node0.tail()}" if node0 else ""))


class Node0:
    """The real node 0: a `launch` process whose stderr goes to a file."""

    def __init__(self, nnodes: int, elastic: bool, work: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        script = work / "rank.py"
        script.write_text(RANK_SCRIPT)
        self.err = work / f"node0-{nnodes}-{int(elastic)}.err"
        size = f"{nnodes - 1}:{nnodes}" if elastic else str(nnodes)
        argv = [
            sys.executable, "-m", "towerpack.launcher", "--nnodes", size, "--node-rank", "0",
            "--master", f"127.0.0.1:{self.port}", "--np", "1", "--backend", "none",
            "--start-timeout", "600", "--grace-period", "5", str(script),
        ]  # fmt: skip
        env = dict(os.environ, TOWERPACK_LAUNCH_SECRET=SECRET)
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        self.ps = psutil.Process(self.proc.pid)

    def text(self) -> str:
        return self.err.read_text(errors="replace")

    def tail(self) -> str:
        return "\n".join(self.text().splitlines()[-15:])

    def cpu(self) -> float:
        t = self.ps.cpu_times()
        return t.user + t.system

    def rss_mb(self) -> float:
        return self.ps.memory_info().rss / 2**20

    def stop(self) -> None:
        """Kill it (its watchdog then ends its rank)."""
        self.proc.kill()
        self.proc.wait()


def run_nodes(nnodes: int, elastic: bool, window: float, work: Path, listener: ProbeListener) -> dict:
    node0 = Node0(nnodes, elastic, work)
    try:
        _wait(lambda: "waiting for" in node0.text(), 60, "node 0 to listen", node0)
        rss_waiting = node0.rss_mb()
        agents = [SimAgent(i, listener.port) for i in range(1, nnodes)]
        threads = [
            threading.Thread(target=a.join, args=(node0.port, nnodes, elastic), daemon=True) for a in agents
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        failed = [a for a in agents if a.error]
        if failed:
            raise RuntimeError(
                f"{len(failed)} agent(s) could not join, e.g.: {failed[0].error}\nnode 0:\n{node0.tail()}"
            )
        last_connect = max(a.arrived for a in agents)
        _wait(lambda: all(0 in a.started for a in agents), 300, "every agent to start", node0)
        start_s = max(a.started[0] for a in agents) - last_connect
        # Steady state: heartbeats both ways with every node, nothing else happening.
        time.sleep(2.0)
        cpu0, t0 = node0.cpu(), time.monotonic()
        time.sleep(window)
        cpu_share = (node0.cpu() - cpu0) / (time.monotonic() - t0) * 100
        rss = node0.rss_mb() - rss_waiting
        victim, others = agents[-1], agents[:-1]
        lost_at = time.time()
        victim.drop()
        _wait(lambda: all(a.stopped for a in others), 120, "every agent to be told to stop", node0)
        result = {
            "start": start_s,
            "cpu": cpu_share,
            "rss": rss,
            "rss_waiting": rss_waiting,
            "stop": max(a.stopped[0] for a in others) - lost_at,
        }
        if elastic:
            _wait(lambda: all(1 in a.started for a in others), 120, "every agent to restart", node0)
            result["restart"] = max(a.started[1] for a in others) - lost_at
        else:
            _wait(lambda: all(a.finished for a in others), 120, "every agent to be told the end", node0)
            code = node0.proc.wait(60)
            if code != 1 or f"(sim{victim.index})" not in node0.text():
                raise RuntimeError(f"node 0 ended with {code}, not 1 (a lost node):\n{node0.tail()}")
        for a in agents:
            if a.channel is not None:
                a.channel.close()
        return result
    finally:
        node0.stop()


# -- the Gloo store -----------------------------------------------------------------------------------
STORE_SERVER = """
import sys, time
from towerpack.launcher.gloo_store import GlooStore
store = GlooStore("127.0.0.1", sys.argv[1], world=int(sys.argv[2]))
print(store.port, flush=True)
sys.stdin.read()
"""


async def _request(port: int, prefix: str, method: str, key: str, body: bytes = b"") -> tuple[int, int]:
    """One HTTP request on a new connection, as Horovod's client makes them: (status, body bytes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"{method} /{prefix}/global/{key} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    data = await reader.read()
    writer.close()
    status = int(data[9:12])
    return status, len(data) - data.index(b"\r\n\r\n") - 4


async def _rank(r: int, ranks: int, peers: list[int], port: int, prefix: str, stats: dict) -> None:
    async def call(method, key, body=b""):
        for _ in range(100):  # Horovod retries a failed request
            try:
                status, size = await _request(port, prefix, method, key, body)
            except OSError:
                await asyncio.sleep(0.5)
                continue
            stats["requests"] += 1
            stats["bytes"] += size
            return status
        raise RuntimeError(f"rank {r}: {method} {key} kept failing")

    await call("PUT", f"rank_{r}", b"h0")
    for j in range(min(r, 8)):  # Horovod reads every lower rank's; a few stand for them (small values)
        while await call("GET", f"rank_{j}") != 200:
            await asyncio.sleep(GLOO_POLL_S)
    await call("PUT", str(r), os.urandom(GLOO_ADDR_BYTES) * (ranks - 1))
    for j in peers:
        while await call("GET", str(j)) != 200:
            await asyncio.sleep(GLOO_POLL_S)
        await call("GET", str(j))
    await call("DELETE", str(r))


def _load(ranks: range, world: int, sample: int | None, port: int, prefix: str, out) -> None:
    """A process driving ``ranks`` of the rendezvous; sends (requests, bytes, seconds) to ``out``."""
    stats = {"requests": 0, "bytes": 0}

    async def main():
        rng = random.Random(0)
        jobs = []
        for r in ranks:
            others = [j for j in range(world) if j != r]
            peers = sorted(rng.sample(others, sample)) if sample else others
            jobs.append(_rank(r, world, peers, port, prefix, stats))
        await asyncio.gather(*jobs)

    began = time.monotonic()
    asyncio.run(main())
    out.send((stats["requests"], stats["bytes"], time.monotonic() - began))


def run_store(world: int, sample: int | None, procs: int = 2) -> dict:
    token = secrets.token_hex(16)
    server = subprocess.Popen(
        [sys.executable, "-c", STORE_SERVER, token, str(world)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(server.stdout.readline())
        ps = psutil.Process(server.pid)
        rss0, cpu0 = ps.memory_info().rss, sum(ps.cpu_times()[:2])
        ctx = multiprocessing.get_context("spawn")
        pipes, workers = [], []
        began = time.monotonic()
        for k in range(procs):
            mine, theirs = ctx.Pipe()
            w = ctx.Process(
                target=_load, args=(range(k, world, procs), world, sample, port, f"{token}:{port}", theirs)
            )
            w.start()
            pipes.append(mine)
            workers.append(w)
        results = [p.recv() for p in pipes]
        elapsed = time.monotonic() - began
        for w in workers:
            w.join()
        requests = sum(r[0] for r in results)
        cpu = sum(ps.cpu_times()[:2]) - cpu0
        return {
            "seconds": elapsed,
            "requests": requests,
            "mbytes": sum(r[1] for r in results) / 1e6,
            "cpu": cpu / elapsed * 100,
            "cpu_per_request": cpu / requests,
            "rss": (ps.memory_info().rss - rss0) / 2**20,
            # The whole rendezvous: every rank reads every other rank's value twice (wait, then get).
            "projected": 2 * world * (world - 1) * cpu / requests,
        }
    finally:
        server.stdin.close()
        server.wait(30)


# -- reporting ----------------------------------------------------------------------------------------
def _result(case: str, ours: float, baseline: float, unit: str, goal: float | None) -> None:
    line = {"benchmark": "control_plane", "case": case, "ours": round(ours, 4), "baseline": baseline,
            "unit": unit, "ratio": round(ours / baseline, 4), "goal": goal}  # fmt: skip
    print("RESULT " + json.dumps(line), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="shorter CPU window; the store's full pattern at 64 only"
    )
    p.add_argument("--nodes", type=int, nargs="+", default=[64, 256, 1024], help="node counts (64 256 1024)")
    p.add_argument(
        "--window", type=float, help="seconds of steady state to measure node 0's CPU (10; quick 5)"
    )
    p.add_argument("--sample", type=int, default=16, help="peers each rank fetches at 1,024 ranks (16)")
    p.add_argument("--no-elastic", action="store_true", help="fixed-size jobs only")
    p.add_argument("--no-store", action="store_true", help="skip the Gloo store")
    args = p.parse_args()
    window = args.window or (5.0 if args.quick else 10.0)
    rows = []
    with tempfile.TemporaryDirectory(prefix="control-plane-") as tmp:
        listener = ProbeListener("127.0.0.1")
        try:
            for n in args.nodes:
                for elastic in (False,) if args.no_elastic else (False, True):
                    kind = "elastic" if elastic else "fixed"
                    r = run_nodes(n, elastic, window, Path(tmp), listener)
                    rows.append((kind, n, r))
                    restarted = f"  ->restarted {r['restart']:5.2f} s" if elastic else ""
                    print(
                        f"{kind:8} N={n:5}: start {r['start']:6.2f} s  node 0 CPU {r['cpu']:5.2f} % of a "
                        f"core  loss->all stopped {r['stop']:5.2f} s{restarted}  "
                        f"RSS +{r['rss']:.1f} MB (from {r['rss_waiting']:.1f})",
                        flush=True,
                    )
        finally:
            listener.close()
    stores = []
    if not args.no_store:
        for world in args.nodes:
            sample = None if world <= (64 if args.quick else 256) else args.sample
            s = run_store(world, sample)
            stores.append((world, sample, s))
            what = "full pattern" if sample is None else f"{sample} peers per rank"
            print(
                f"gloo store R={world:5} ({what}): {s['seconds']:6.2f} s, {s['requests']} requests, "
                f"{s['mbytes']:.0f} MB, store CPU {s['cpu']:.0f} % of a core "
                f"({s['cpu_per_request'] * 1e6:.0f} us per request; the whole rendezvous needs "
                f"{s['projected']:.1f} s of it), RSS +{s['rss']:.1f} MB",
                flush=True,
            )
    for kind, n, r in rows:
        _result(f"{kind}_{n}_start_after_last_connect", r["start"], START_GOAL_S, "s", 1.0)
        _result(f"{kind}_{n}_heartbeat_cpu", r["cpu"], CPU_GOAL_PERCENT, "% of a core", 1.0)
        _result(f"{kind}_{n}_loss_to_all_stopped", r["stop"], LOSS_GOAL_S, "s", 1.0)
        if kind == "elastic":
            _result(f"{kind}_{n}_loss_to_all_restarted", r["restart"], LOSS_GOAL_S, "s", None)
        _result(f"{kind}_{n}_rss_growth", r["rss"], round(r["rss_waiting"], 1), "MB", None)
    for world, sample, s in stores:
        if sample is None:
            _result(f"gloo_store_{world}_rendezvous", s["seconds"], START_GOAL_S, "s", None)
        _result(f"gloo_store_{world}_rendezvous_store_cpu", s["projected"], START_GOAL_S, "s", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
