"""Horovod's Gloo rendezvous for ranks that srun, mpirun or torchrun started (no horovodrun, no ``launch``).

Horovod (built with Gloo only) finds its peers through an HTTP key-value store. ``launch`` and
``horovodrun --gloo`` host that store and give every rank its address and place in ``HOROVOD_*``
variables; other launchers set only their own. So, just before ``hvd.init()``,
:func:`gloo_rendezvous` reads the rank's :func:`~towerpack.utils.placement`. Rank 0 starts Horovod's
own store (the one ``horovodrun --gloo`` uses), and every rank sets what ``horovodrun --gloo`` sets.

Every rank works out where the store is from its own environment, with no exchange:

* ``MASTER_ADDR``/``MASTER_PORT`` when both are set (torchrun, Kubernetes). Under torchrun, whose agent
  keeps ``MASTER_PORT`` for its own store (``TORCHELASTIC_USE_AGENT_STORE=True``), the next port up;
* in an srun step, the first host of ``SLURM_STEP_NODELIST``, on a port derived from ``SLURM_JOB_ID``
  and ``SLURM_STEP_ID``;
* Open MPI's mpirun on one host: 127.0.0.1, on a port derived from the job id (Open MPI 4 sets
  ``OMPI_MCA_ess_base_jobid``, Open MPI 5 ``PMIX_NAMESPACE``);
* anything else is an error asking for ``MASTER_ADDR`` and ``MASTER_PORT`` (MPICH's and Intel MPI's
  hydra set no job id; the host of rank 0 of an mpirun across hosts is unknown).

The store has no token (like horovodrun's), so it binds only the address given and is up only during
``hvd.init()``. The other ranks wait for it, because Horovod's client gives up after 1.5 s. Rank 0 closes
it once every rank has reported that its init is done.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass

import psutil

from towerpack.utils.hostlist import HostListError, expand_nodelist
from towerpack.utils.placement import Launcher, Placement, parse_slurm_counts, placement

from . import logger

__all__ = ["RendezvousError", "StoreSite", "gloo_rendezvous", "rank_env", "store_site"]

#: The launchers whose ranks get a rendezvous from here; ``launch`` and horovodrun bring their own.
STORE_LAUNCHERS = frozenset(
    {Launcher.SLURM, Launcher.OPEN_MPI, Launcher.PMI, Launcher.TORCHRUN, Launcher.ENV}
)
# Derived ports stay below Linux's ephemeral range and apart from launch's master ports (29400-30399).
_SLURM_PORTS = range(20000, 25000)
_MPI_PORTS = range(25000, 29000)
_STEPS_PER_JOB = 8  # consecutive jobs' first steps get distinct ports
#: The store scope of our own keys, next to Gloo's: "ready" (rank 0 serves), "done-<rank>" (init done).
_SCOPE = "towerpack"
_DEFAULT_START_TIMEOUT_S = 60.0
_POLL_S = 0.1
# Horovod's client talks to the store directly; an http_proxy variable must not divert our requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class RendezvousError(RuntimeError):
    """The rendezvous cannot be set up: the message names the variables, the address and the fix."""


@dataclass(frozen=True)
class StoreSite:
    """Where rank 0's store listens, and the variables that chose it (for messages)."""

    addr: str
    port: int
    origin: str


@dataclass(frozen=True)
class _Layout:
    """The job's hosts with their rank counts (Horovod's ``HostInfo``), and this rank's host."""

    hosts: tuple
    node: int
    hostname: str


def _present(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip() != ""


def _int(env: Mapping[str, str], name: str) -> int:
    raw = env[name].strip()
    if not raw.isdigit():
        raise RendezvousError(f"{name}={env[name]!r} is not a non-negative integer")
    return int(raw)


def _slurm_step_id(env: Mapping[str, str]) -> tuple[str, int] | None:
    """The srun step's id (placement has told a batch script's special step ids apart already)."""
    for name in ("SLURM_STEP_ID", "SLURM_STEPID"):
        if _present(env, name):
            return name, _int(env, name)
    return None


def _slurm_hosts(env: Mapping[str, str]) -> list[str]:
    try:
        return expand_nodelist(env["SLURM_STEP_NODELIST"])
    except HostListError as e:
        raise RendezvousError(f"SLURM_STEP_NODELIST: {e}") from None


def _mpi_job_id(env: Mapping[str, str]) -> tuple[str, int] | None:
    if _present(env, "OMPI_MCA_ess_base_jobid"):
        return "OMPI_MCA_ess_base_jobid", _int(env, "OMPI_MCA_ess_base_jobid")
    if _present(env, "PMIX_NAMESPACE"):
        namespace = env["PMIX_NAMESPACE"].strip()
        return "PMIX_NAMESPACE", int(namespace) if namespace.isdigit() else zlib.crc32(namespace.encode())
    return None


def _ask_for_master(p: Placement, why: str) -> RendezvousError:
    return RendezvousError(
        f"HorovodTrainer under {p.launcher.value} (rank {p.rank} of {p.world_size}): {why}, so the ranks "
        "cannot tell where rank 0's Horovod rendezvous store is. Set MASTER_ADDR (rank 0's host, reachable "
        "from every rank) and MASTER_PORT (a free port there) in every rank's environment."
    )


def store_site(p: Placement, env: Mapping[str, str]) -> StoreSite:
    """Where rank 0 hosts the store, derived alike by every rank (see the module's docstring)."""
    has_addr, has_port = _present(env, "MASTER_ADDR"), _present(env, "MASTER_PORT")
    if has_addr != has_port:
        given, missing = ("MASTER_ADDR", "MASTER_PORT") if has_addr else ("MASTER_PORT", "MASTER_ADDR")
        raise RendezvousError(f"{given}={env[given]} is set but {missing} is not; set both or neither")
    if has_addr:
        addr, port = env["MASTER_ADDR"].strip(), _int(env, "MASTER_PORT")
        if p.launcher is Launcher.TORCHRUN and env.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            site = StoreSite(addr, port + 1, f"MASTER_PORT={port} + 1: torchrun's agent keeps MASTER_PORT")
        else:
            site = StoreSite(addr, port, f"MASTER_ADDR={addr}, MASTER_PORT={port}")
        if not 0 < site.port < 65536:
            raise RendezvousError(f"store port {site.port} ({site.origin}) is outside 1-65535")
        return site
    step = _slurm_step_id(env)
    if p.launcher in (Launcher.SLURM, Launcher.PMI) and step and _present(env, "SLURM_STEP_NODELIST"):
        if not _present(env, "SLURM_JOB_ID"):
            raise _ask_for_master(p, "SLURM_JOB_ID is not set")
        job, (step_name, step_id) = _int(env, "SLURM_JOB_ID"), step
        port = _SLURM_PORTS[(job * _STEPS_PER_JOB + step_id) % len(_SLURM_PORTS)]
        origin = f"first host of SLURM_STEP_NODELIST, port from SLURM_JOB_ID={job} and {step_name}={step_id}"
        if p.rank == 0 and env.get("SLURM_NODEID", "0").strip() != "0":
            raise _ask_for_master(p, f"rank 0 runs on node {env['SLURM_NODEID']}, not the step's first host")
        return StoreSite(_slurm_hosts(env)[0], port, origin)
    if p.launcher in (Launcher.OPEN_MPI, Launcher.PMI):
        if p.local_size != p.world_size:
            raise _ask_for_master(p, f"the job spans hosts ({p.local_size} of its ranks on this one)")
        job_id = _mpi_job_id(env)
        if job_id is None:
            raise _ask_for_master(p, "this MPI sets no job id (OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE)")
        name, value = job_id
        return StoreSite("127.0.0.1", _MPI_PORTS[value % len(_MPI_PORTS)], f"port from {name}={env[name]}")
    raise _ask_for_master(p, "MASTER_ADDR and MASTER_PORT are not set")


def _layout(p: Placement, env: Mapping[str, str]) -> _Layout:
    from horovod.runner.common.util.hosts import HostInfo

    if p.launcher is Launcher.SLURM and _present(env, "SLURM_STEP_NODELIST"):
        name = (
            "SLURM_STEP_TASKS_PER_NODE"
            if _present(env, "SLURM_STEP_TASKS_PER_NODE")
            else "SLURM_TASKS_PER_NODE"
        )
        names, counts = _slurm_hosts(env), parse_slurm_counts(env.get(name, ""), name)
        if len(names) != len(counts) or sum(counts) != p.world_size or p.node_rank >= len(names):
            raise RendezvousError(
                f"SLURM_STEP_NODELIST={env['SLURM_STEP_NODELIST']!r} ({len(names)} hosts), "
                f"{name}={env.get(name)!r} ({sum(counts)} tasks) and SLURM_NODEID={p.node_rank} do not "
                f"describe the {p.world_size} tasks of this step"
            )
        hosts = tuple(HostInfo(host, count) for host, count in zip(names, counts, strict=True))
        return _Layout(hosts, p.node_rank, names[p.node_rank])
    # Other launchers give no host list: every node runs local_size ranks (torchrun's rule).
    nodes, uneven = divmod(p.world_size, p.local_size)
    if uneven or p.node_rank >= nodes:
        raise RendezvousError(
            f"{p.launcher.value} gives {p.world_size} ranks with {p.local_size} on this node (node "
            f"{p.node_rank}): Horovod's rendezvous needs every node to run the same number of ranks"
        )
    hosts = tuple(HostInfo(f"node{i}", p.local_size) for i in range(nodes))
    return _Layout(hosts, p.node_rank, socket.gethostname())


def _plan(p: Placement, layout: _Layout) -> list:
    from horovod.runner.common.util.hosts import get_host_assignments

    return get_host_assignments(list(layout.hosts), p.world_size)


def rank_env(p: Placement, site: StoreSite, env: Mapping[str, str]) -> dict[str, str]:
    """The variables ``horovodrun --gloo`` would give this rank, pointing at ``site``."""
    layout = _layout(p, env)
    host = layout.hosts[layout.node].hostname
    # The cross communicator joins the ranks of equal local rank across hosts; Horovod's own plan says how.
    slot = next(s for s in _plan(p, layout) if s.hostname == host and s.local_rank == p.local_rank)
    return {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": site.addr,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(site.port),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_HOSTNAME": layout.hostname,
        "HOROVOD_RANK": str(p.rank),
        "HOROVOD_SIZE": str(p.world_size),
        "HOROVOD_LOCAL_RANK": str(p.local_rank),
        "HOROVOD_LOCAL_SIZE": str(p.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
    }


def _foreign_job(env: Mapping[str, str]) -> Placement | None:
    """This rank's placement when it needs a rendezvous from here; None when Horovod has one or needs none."""
    if _present(env, "HOROVOD_RANK") or _present(env, "HOROVOD_GLOO_RENDEZVOUS_ADDR"):
        return None
    p = placement(env)
    if not p.distributed:
        return None
    if p.launcher in STORE_LAUNCHERS:
        return p
    fix = (
        "start it with `launch --backend horovod`"
        if p.launcher is Launcher.LAUNCH
        else "start it with `launch --np N` or horovodrun, or use a TF-server trainer for a TF_CONFIG cluster"
    )
    raise RendezvousError(
        f"HorovodTrainer: {p.launcher.value} placed this process as rank {p.rank} of {p.world_size} but set "
        f"no Horovod rendezvous (no HOROVOD_* variables); {fix}"
    )


def _start_timeout(env: Mapping[str, str]) -> float:
    raw = env.get("HOROVOD_START_TIMEOUT", "").strip()
    if not raw:
        return _DEFAULT_START_TIMEOUT_S
    try:
        return float(raw)
    except ValueError:
        raise RendezvousError(f"HOROVOD_START_TIMEOUT={raw!r} is not a number of seconds") from None


def _ipv4(site: StoreSite) -> str:
    try:
        return socket.getaddrinfo(site.addr, site.port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as e:
        raise RendezvousError(
            f"cannot resolve {site.addr!r} ({site.origin}) to an IPv4 address, which Horovod's rendezvous "
            f"client needs: {e.strerror}"
        ) from None


def _iface_towards(ip: str) -> str | None:
    """The network interface holding the address this host uses to reach ``ip``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((ip, 9))  # a UDP "connect" sends nothing: it only picks the route
        local = probe.getsockname()[0]
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == local for a in addresses):
            return name
    return None


class _Store:
    """Rank 0's Horovod rendezvous server, serving from a daemon thread until every rank's init is done."""

    def __init__(self, site: StoreSite, ip: str, plan: list):
        from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

        try:
            self._httpd = RendezvousHTTPServer((ip, site.port), RendezvousHandler, False)
        except OSError as e:
            raise RendezvousError(
                f"rank 0 cannot open Horovod's rendezvous store on {site.addr}:{site.port} ({ip}): "
                f"{e.strerror or e}. The port comes from {site.origin}; if another program holds it, set "
                "MASTER_PORT (with MASTER_ADDR) to a free port on rank 0's host"
            ) from None
        self._httpd.daemon_threads = True
        self._httpd.init(plan)
        self._put("ready")
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": _POLL_S},
            name="horovod-store",
            daemon=True,
        )
        self._thread.start()

    def _put(self, key: str) -> None:
        with self._httpd.cache_lock:
            self._httpd.cache.setdefault(_SCOPE, {})[key] = b"1"

    def _missing(self, ranks: range) -> list[int]:
        with self._httpd.cache_lock:
            done = self._httpd.cache.get(_SCOPE, {})
            return [r for r in ranks if f"done-{r}" not in done]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def close_when_done(self, world_size: int, timeout: float) -> threading.Thread:
        """Close once ranks 1.. have reported their init done (or after ``timeout``), without blocking."""

        def wait_then_close() -> None:
            deadline = time.monotonic() + timeout
            while (missing := self._missing(range(1, world_size))) and time.monotonic() < deadline:
                time.sleep(_POLL_S)
            if missing:
                logger.warning(
                    "Horovod rendezvous: ranks %s did not report their init; closing the store", missing
                )
            self.close()

        closer = threading.Thread(target=wait_then_close, name="horovod-store-closer", daemon=True)
        closer.start()
        return closer


def _request(site: StoreSite, key: str, method: str, timeout: float) -> int:
    data = b"1" if method == "PUT" else None
    request = urllib.request.Request(f"http://{site.addr}:{site.port}/{_SCOPE}/{key}", data, method=method)
    with _OPENER.open(request, timeout=timeout) as response:
        return response.status


def _wait_for_store(site: StoreSite, rank: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if _request(site, "ready", "GET", timeout=2.0) == 200:
                return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet (an HTTPError, a 404, is a store that is not ready yet)
        if time.monotonic() > deadline:
            raise RendezvousError(
                f"rank {rank}: no Horovod rendezvous store answered at {site.addr}:{site.port} "
                f"({site.origin}) within {timeout:g} s. Did rank 0 start (see its log)? Set "
                "HOROVOD_START_TIMEOUT to wait longer."
            )
        time.sleep(_POLL_S)


def _report_done(site: StoreSite, rank: int) -> None:
    try:
        _request(site, f"done-{rank}", "PUT", timeout=5.0)
    except (urllib.error.URLError, OSError) as e:
        logger.warning("Horovod rendezvous: rank %d could not report its init to the store: %s", rank, e)


@contextlib.contextmanager
def gloo_rendezvous(env: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Around ``hvd.init()``: set up Horovod's Gloo rendezvous when the launcher did not (see the module)."""
    env = os.environ if env is None else env
    p = _foreign_job(env)
    if p is None:
        yield
        return
    site = store_site(p, env)
    variables = rank_env(p, site, env)
    timeout = _start_timeout(env)
    ip = _ipv4(site)
    spans_hosts = p.local_size < p.world_size
    if p.rank == 0 and spans_hosts and ipaddress.ip_address(ip).is_loopback:
        raise RendezvousError(
            f"{site.addr} ({site.origin}) is {ip} on rank 0's host, which the other hosts cannot reach: set "
            "MASTER_ADDR to rank 0's network address, and MASTER_PORT"
        )
    if spans_hosts and not _present(env, "HOROVOD_GLOO_IFACE") and (iface := _iface_towards(ip)):
        variables["HOROVOD_GLOO_IFACE"] = iface
    store = _Store(site, ip, _plan(p, _layout(p, env))) if p.rank == 0 else None
    logger.info("Horovod rendezvous for %s at %s:%d", p.launcher.value, site.addr, site.port)
    try:
        if store is None:
            _wait_for_store(site, p.rank, timeout)
        env.update(variables)
        yield
    except BaseException:
        if store is not None:
            store.close()
        raise
    if store is not None:
        store.close_when_done(p.world_size, timeout)
    else:
        _report_done(site, p.rank)
