"""The launcher that owns the job: plans every attempt, watches every task, stops all on the first failure."""

from __future__ import annotations

import contextlib
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace

from towerpack.launcher import net, ssh, watchdog
from towerpack.launcher.errors import USAGE_EXIT, UsageError
from towerpack.launcher.group import Exit
from towerpack.launcher.nodes import ControlServer, LocalNode
from towerpack.launcher.plan import JobConfig, NodeInfo, build_tasks, ports_needed
from towerpack.launcher.rendezvous import RendezvousServer
from towerpack.launcher.signals import Received, as_events
from towerpack.launcher.spec import LaunchSpec
from towerpack.launcher.tagging import terminate


def say(msg: str) -> None:
    print(f"launch: {msg}", file=sys.stderr, flush=True)


def local_info(spec: LaunchSpec, node: int, addr: str, slots: int, cuda: list[str] | None) -> NodeInfo:
    count = ports_needed(node, slots, spec.n_ps, spec.nnodes)
    return NodeInfo(
        node=node,
        addr=addr,
        hostname=socket.gethostname().split(".")[0] if net.is_local(addr) and spec.mode == "single" else addr,
        slots=slots,
        cuda=cuda,
        ports=[net.free_port(addr) for _ in range(count)],
        iface=net.iface_for(addr),
    )


class Coordinator:
    def __init__(self, spec: LaunchSpec):
        self.spec = spec
        self.tag = f"{spec.job_id}-{uuid.uuid4().hex[:8]}"
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.received = Received()
        self.nodes: list = []
        self.ssh_agents: list[ssh.SshAgent] = []
        self.server: ControlServer | None = None
        self.rdzv: RendezvousServer | None = None

    # -- setting up -------------------------------------------------------------------------------------
    def _setup(self) -> None:
        spec = self.spec
        if spec.rank_master_port is not None:
            net.check_port(spec.master_addr, spec.rank_master_port, "--master-port")
        remote: dict[int, object] = {}
        if spec.mode == "single":
            self.nodes.append(self._local(0, spec.master_addr, spec.slots, spec.cuda))
        elif spec.mode == "node":
            self.nodes.append(self._local(0, spec.node_addr or spec.master_addr, spec.slots, spec.cuda))
            remote = {r: None for r in range(1, spec.nnodes)}
        else:
            for node, hs in enumerate(spec.hosts):
                if not net.is_local(hs.host):
                    remote[node] = hs
                    continue
                # "localhost" in a cluster spec would point the other hosts at themselves.
                addr = spec.master_addr if net.is_loopback(hs.host) else hs.host
                self.nodes.append(self._local(node, addr, hs.slots, _first(spec.cuda, hs.slots, hs.host)))
        if spec.backend == "horovod":
            self.rdzv = RendezvousServer(spec.master_addr)
        if remote:
            try:
                self.server = ControlServer(
                    spec.master_addr, spec.master_port or 0, spec.nnodes, set(remote), spec.n_ps, self.events
                )
            except OSError as exc:
                raise UsageError(
                    f"cannot listen on --master {spec.master_addr}:{spec.master_port}: {exc.strerror}"
                ) from None
            port = self.server.sock.getsockname()[1]
            for node, hs in remote.items():
                if hs is not None:
                    self.ssh_agents.append(ssh.SshAgent(spec, node, hs, port, f"{self.tag}.ssh", self.events))
            if spec.mode == "node":
                say(f"node 0 waiting for {spec.nnodes - 1} more node(s) on {spec.master_addr}:{port}")
            missing = self.server.wait_all(spec.start_timeout, self._abort_startup)
            if missing:
                raise StartupError(
                    f"node(s) {', '.join(map(str, missing))} did not join within {spec.start_timeout:g} s"
                )
            for agent in self.ssh_agents:
                agent.show_output()
            self.nodes.extend(self.server.joined.values())
            self.nodes.sort(key=lambda n: n.info.node)

    def _local(self, node: int, addr: str, slots: int, cuda) -> LocalNode:
        return LocalNode(
            local_info(self.spec, node, addr, slots, cuda),
            self.spec.argv,
            self.tag,
            self.spec.output,
            self.events,
        )

    def _abort_startup(self) -> None:
        """Called while waiting for the nodes: give up on a signal or on an ssh agent that died."""
        sig = self.received.last
        if sig:
            raise StartupError(f"received {signal.Signals(sig).name} while starting", 128 + sig)
        joined = {n.info.addr for n in self.server.joined.values()}
        for agent in self.ssh_agents:
            problem = None if agent.host in joined else agent.failure()
            if not problem:
                continue
            if agent.proc.returncode == USAGE_EXIT:  # the agent refused its command line (a GPU id, ...)
                reason = problem.removeprefix("launch: error: ")
                raise StartupError(f"error: on host {agent.host}: {reason}", USAGE_EXIT)
            raise StartupError(f"could not start the agent on {agent.host} over ssh: {problem}")

    # -- running ----------------------------------------------------------------------------------------
    def run(self) -> int:
        dog = watchdog.start(self.tag)
        try:
            with as_events(self.events) as self.received:
                try:
                    self._setup()
                except StartupError as exc:
                    say(str(exc))
                    for node in self.nodes:
                        node.finish(exc.code)
                    return exc.code
                code = self._supervise()
                for node in self.nodes:
                    node.finish(code)
                return code
        finally:
            self._teardown()
            watchdog.stop(dog)

    def _supervise(self) -> int:
        spec = self.spec
        infos = [n.info for n in self.nodes]
        cfg = JobConfig(
            backend=spec.backend,
            n_ps=spec.n_ps,
            rdzv_addr=spec.master_addr,
            rdzv_port=self.rdzv.port if self.rdzv else None,
            master_port=spec.rank_master_port,
            max_restarts=spec.max_restarts,
            job_id=spec.job_id,
        )
        for attempt in range(spec.max_restarts + 1):
            if self.rdzv:
                self.rdzv.clear()
            plan = build_tasks(infos, cfg, attempt)
            n_tasks = sum(len(t) for t in plan.values())
            for node in self.nodes:
                node.start(plan[node.info.node], attempt)
            first, sig = self._watch(sum(i.slots for i in infos), attempt)
            self._stop_all()
            late, late_sig = self._drain(attempt)
            sig = sig or late_sig
            if sig:
                say(f"received {signal.Signals(sig).name}; stopped all {n_tasks} processes")
                return 128 + sig
            if first is None:
                return 0
            # Reports arrive out of order (output still draining, other nodes): the earliest end is the cause.
            node, failure = min([first, *late], key=lambda f: f[1].time)
            lost = self._lost_nodes([first, *late])
            if attempt < spec.max_restarts and not lost:
                say(
                    f"{_who(failure)} failed ({failure.describe()}); restarting the job "
                    f"(restart {attempt + 1} of {spec.max_restarts})"
                )
                continue
            others = n_tasks - (len(plan[node]) if failure.kind == "node" else 1)
            _summary(failure, others)
            if attempt < spec.max_restarts:
                names = ", ".join(f"node {n.node} ({n.hostname})" for n in lost)
                say(f"not restarting: lost {names}, whose processes only its own launcher can start")
            return failure.exit_status or 1
        return 1  # not reached

    def _watch(self, workers: int, attempt: int) -> tuple[tuple[int, Exit] | None, int | None]:
        """Wait until every worker succeeded, a task or node failed, or a signal came."""
        left = workers
        while True:
            kind, node, payload = self.events.get()
            if kind == "signal":
                return None, payload
            failure = self._failure(kind, node, payload, attempt)
            if failure:
                return (node, failure), None
            if kind == "exit" and payload.kind == "worker" and payload.attempt == attempt:
                left -= 1
                if left == 0:
                    return None, None

    def _failure(self, kind: str, node: int, payload, attempt: int) -> Exit | None:
        """The failure an event reports, if it is one: a task of this attempt failed, or a node is gone."""
        if kind == "exit":
            if payload.kind == "node" or (payload.code != 0 and payload.attempt == attempt):
                return payload
            return None  # a success, or news from an attempt already stopped
        if kind in ("lost", "ssh-exit"):
            host = next((n.info.hostname for n in self.nodes if n.info.node == node), f"node {node}")
            return Exit(f"node {node}", "node", host, 1, [], time.time(), attempt)
        return None

    def _drain(self, attempt: int) -> tuple[list[tuple[int, Exit]], int | None]:
        """Collect what the stopped attempt left on the queue: failures reported late, and a signal."""
        failures, sig = [], None
        while True:
            try:
                kind, node, payload = self.events.get_nowait()
            except queue.Empty:
                return failures, sig
            if kind == "signal":
                sig = payload
            elif failure := self._failure(kind, node, payload, attempt):
                failures.append((node, failure))

    def _lost_nodes(self, failures: list[tuple[int, Exit]]) -> list:
        """Infos of the nodes this job can no longer start processes on."""
        gone = {node for node, f in failures if f.kind == "node"}
        return [n.info for n in self.nodes if n.info.node in gone or n.lost]

    def _stop_all(self) -> None:
        threads = [threading.Thread(target=node.stop) for node in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _teardown(self) -> None:
        for agent in self.ssh_agents:
            with contextlib.suppress(subprocess.TimeoutExpired):
                agent.proc.wait(timeout=10)
        if self.ssh_agents:
            terminate(f"{self.tag}.ssh", grace=2.0)
        if self.server:
            self.server.close()
        if self.rdzv:
            self.rdzv.close()


class StartupError(Exception):
    """The job could not start (a node did not join, ssh failed): exit code 1 unless told otherwise."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def _first(cuda: list[str] | None, slots: int, host: str) -> list[str] | None:
    if cuda is not None and len(cuda) < slots:
        raise UsageError(f"host {host} has {slots} slots but --gpus gives only {len(cuda)} GPU(s)")
    return None if cuda is None else cuda[:slots]


def _who(ex: Exit) -> str:
    if ex.kind == "node":
        return f"{ex.task} ({ex.host})"
    label = f"parameter server {ex.task[2:]}" if ex.kind == "ps" else f"rank {ex.task}"
    return f"{label} on host {ex.host}"


def _summary(failure: Exit, others: int) -> None:
    say(f"{_who(failure)} failed first ({failure.describe()}); stopped the other {others} process(es)")
    name = _who(failure).split(" on ")[0]
    if failure.kind == "node":
        for line in failure.tail:
            say(line)
    elif failure.tail:
        lines = "\n".join(f"    {line}" for line in failure.tail)
        say(f"last lines of {name}'s stderr:\n{lines}")
    else:
        say(f"{name} wrote nothing to stderr")


def run(spec: LaunchSpec) -> int:
    return Coordinator(replace(spec)).run()
