"""Addresses and network interfaces: parsing ``ADDR:PORT`` (IPv6 included), resolving, choosing."""

from __future__ import annotations

import ipaddress
import socket

import psutil

from towerpack.launcher.errors import UsageError

#: The coordinator's port when ``--master`` gives none (under Slurm, the base of one per job).
DEFAULT_MASTER_PORT = 29400


def family(addr: str) -> int:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def host_port(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[::1]:29400``) as URLs and gRPC want it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_host_port(value: str, default_port: int | None, what: str) -> tuple[str, int | None]:
    """Parse ``host``, ``host:port``, ``[v6]``, ``[v6]:port`` or a bare IPv6 address (no port)."""
    port: str | None
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise UsageError(f"{what} expects ADDR:PORT or [IPv6]:PORT, got {value!r}")
        port = rest[1:] if rest else None
    elif value.count(":") > 1:  # a bare IPv6 address; its port must be given in brackets
        host, port = value, None
    else:
        host, sep, port = value.partition(":")
        port = port if sep else None
    if not host or (port is not None and not (port.isdigit() and 0 < int(port) < 65536)):
        raise UsageError(f"{what} expects ADDR:PORT or [IPv6]:PORT, got {value!r}")
    return host, int(port) if port is not None else default_port


def resolve(host: str) -> str:
    """The IP address of ``host`` (raises UsageError if it does not resolve)."""
    try:
        return socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)[0][4][0]
    except socket.gaierror:
        raise UsageError(f"unknown host {host!r}") from None


def local_names() -> set[str]:
    """Names and exact addresses that mean this machine."""
    names = {"localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn()}
    for addrs in psutil.net_if_addrs().values():
        names.update(a.address for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6))
    return names


def is_local(host: str) -> bool:
    """True when ``host`` names this machine (an alias like 127.0.0.2 counts as another host)."""
    return host in local_names()


def is_loopback(host: str) -> bool:
    return ipaddress.ip_address(resolve(host)).is_loopback


def source_address(toward: str) -> str:
    """The local address this machine uses to reach ``toward`` (no packet is sent)."""
    ip = resolve(toward)
    if ipaddress.ip_address(ip).is_loopback:
        return "::1" if ":" in ip else "127.0.0.1"
    with socket.socket(family(ip), socket.SOCK_DGRAM) as sock:
        sock.connect((ip, 9))
        return sock.getsockname()[0]


def iface_address(name: str) -> str:
    """The address of network interface ``name`` (IPv4 preferred); UsageError naming the choices."""
    interfaces = psutil.net_if_addrs()
    if name not in interfaces:
        raise UsageError(
            f"--network-interface: no interface {name!r} here (there are {', '.join(interfaces)})"
        )
    for fam in (socket.AF_INET, socket.AF_INET6):
        for a in interfaces[name]:
            if a.family == fam and not a.address.startswith("fe80"):
                return a.address.split("%")[0]
    raise UsageError(f"--network-interface: interface {name!r} has no IP address")


def iface_for(addr: str) -> str | None:
    """The network interface whose subnet holds ``addr`` (exact address first), or None."""
    try:
        ip = ipaddress.ip_address(resolve(addr))
    except UsageError:
        return None
    best = None
    for name, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family not in (socket.AF_INET, socket.AF_INET6) or not a.netmask:
                continue
            try:
                net = ipaddress.ip_network(f"{a.address.split('%')[0]}/{a.netmask}", strict=False)
            except ValueError:
                continue
            if a.address == str(ip):
                return name
            if ip in net and best is None:
                best = name
    return best
