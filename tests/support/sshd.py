"""A throwaway sshd on a loopback address, with its own host key, client key and authorized_keys."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


def sshd_path() -> str | None:
    found = shutil.which("sshd")
    return found or next((p for p in SSHD_CANDIDATES if os.path.exists(p)), None)


@dataclass
class Sshd:
    proc: subprocess.Popen
    addr: str
    port: int
    key: str  # client identity file

    def client_args(self) -> list[str]:
        """`launch` options that reach this server."""
        return [
            "--ssh-port", str(self.port), "--ssh-key", self.key,
            "--ssh-option", "StrictHostKeyChecking=no", "--ssh-option", "UserKnownHostsFile=/dev/null",
            "--ssh-option", "LogLevel=ERROR",
        ]  # fmt: skip

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def start_sshd(workdir: Path, addr: str = "127.0.0.2") -> Sshd:
    """Start ``sshd -D`` on ``addr`` and a free port; raises if it does not accept connections in time."""
    exe = sshd_path()
    if exe is None:
        raise FileNotFoundError("sshd is not installed (scripts/system_deps.sh installs it)")
    workdir.mkdir(parents=True, exist_ok=True)
    host_key, client_key = workdir / "host_ed25519", workdir / "client_ed25519"
    for key in (host_key, client_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    authorized = workdir / "authorized_keys"
    authorized.write_text(Path(f"{client_key}.pub").read_text())
    authorized.chmod(0o600)
    port = _free_port(addr)
    config = workdir / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress {addr}\nHostKey {host_key}\nAuthorizedKeysFile {authorized}\n"
        f"PidFile {workdir / 'sshd.pid'}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nUsePAM no\nStrictModes no\nPermitRootLogin yes\nPrintMotd no\n"
    )
    # sshd refuses to start without its privilege-separation directory (normally made by the service).
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    with open(workdir / "sshd.log", "wb") as log:
        proc = subprocess.Popen([exe, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(workdir / 'sshd.log').read_text()[-500:]}")
        try:
            socket.create_connection((addr, port), timeout=0.5).close()
            return Sshd(proc, addr, port, str(client_key))
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError("sshd did not accept connections within 10 s")
