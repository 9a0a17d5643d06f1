"""Host lists: ``--hosts a:4,b:4`` and ``--hostfile`` (``host slots=N`` lines)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from towerpack.launcher.errors import UsageError

_HOST = re.compile(r"^[A-Za-z0-9_.\-]+$|^[0-9A-Fa-f:]+$")


@dataclass(frozen=True)
class HostSlots:
    host: str
    slots: int


def _host_entry(host: str, slots: str, where: str) -> HostSlots:
    if not _HOST.match(host):
        raise UsageError(f"malformed host {host!r} in {where}")
    if not slots.isdigit() or int(slots) < 1:
        raise UsageError(
            f"malformed slot count {slots!r} for host {host!r} in {where} (want a positive integer)"
        )
    return HostSlots(host, int(slots))


def _check_unique(hosts: list[HostSlots], where: str) -> list[HostSlots]:
    if not hosts:
        raise UsageError(f"no hosts in {where}")
    seen = set()
    for h in hosts:
        if h.host in seen:
            raise UsageError(
                f"host {h.host!r} appears twice in {where}; give it one entry with all its slots"
            )
        seen.add(h.host)
    return hosts


def parse_hosts(spec: str) -> list[HostSlots]:
    """``a:4,b:4`` (a host without ``:N`` has one slot)."""
    hosts = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            raise UsageError(f"malformed host list {spec!r} (empty entry)")
        if item.startswith("["):  # [v6::addr] or [v6::addr]:N
            host, _, rest = item[1:].partition("]")
            slots = rest[1:] if rest.startswith(":") else (rest or "1")
        else:
            host, sep, slots = item.partition(":")
            slots = slots if sep else "1"
        hosts.append(_host_entry(host, slots, f"--hosts {spec!r}"))
    return _check_unique(hosts, f"--hosts {spec!r}")


def parse_hostfile(path: str) -> list[HostSlots]:
    """Lines of ``host slots=N`` (``#`` comments and blank lines ignored; no ``slots`` means one)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read hostfile {path!r}: {exc.strerror}") from None
    hosts = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        slots = "1"
        for extra in parts[1:]:
            key, _, value = extra.partition("=")
            if key not in ("slots", "max_slots") or not value:
                raise UsageError(f"malformed line {number} in hostfile {path!r}: {raw.strip()!r}")
            if key == "slots":
                slots = value
        hosts.append(_host_entry(parts[0].strip("[]"), slots, f"hostfile {path!r} line {number}"))
    return _check_unique(hosts, f"hostfile {path!r}")
