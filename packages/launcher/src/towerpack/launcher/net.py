"""Addresses, ports and network interfaces."""

from __future__ import annotations

import errno
import ipaddress
import socket

import psutil

from towerpack.launcher.errors import UsageError


def free_port(addr: str = "127.0.0.1") -> int:
    """A port that is free on ``addr`` right now."""
    with socket.socket(_family(addr)) as sock:
        sock.bind((addr, 0))
        return sock.getsockname()[1]


def check_port(addr: str, port: int, what: str) -> None:
    """Raise a UsageError naming ``what`` if ``port`` cannot be bound on ``addr``."""
    with socket.socket(_family(addr)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((addr, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(
                    f"{what} {addr}:{port} is already in use; pick another or leave it out"
                ) from None
            raise UsageError(f"cannot use {what} {addr}:{port}: {exc.strerror}") from None


def _family(addr: str) -> int:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


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
        return "127.0.0.1"
    with socket.socket(_family(ip), socket.SOCK_DGRAM) as sock:
        sock.connect((ip, 9))
        return sock.getsockname()[0]


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
