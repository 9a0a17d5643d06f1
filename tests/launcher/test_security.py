"""Who may talk to a job: the control server and the Gloo store require the job's secret (the store a
token made from it); frames are authenticated one by one; ports handed to ranks are held for them."""

from __future__ import annotations

import json
import os
import queue
import socket
import stat

import pytest

from support.launcher_run import assert_job_gone, finish, launch, rank_script, start_launch
from support.procs import free_port, wait_for
from towerpack.launcher import protocol
from towerpack.launcher.admission import ControlServer
from towerpack.launcher.errors import AuthenticationError, Refusal, Refused
from towerpack.launcher.gloo_store import GlooStore
from towerpack.launcher.plan import NodeInfo
from towerpack.launcher.protocol import Connection, Hurry, Join, Reject, Side, Welcome

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(60)]
PROBE, REPORT, BEHAVE = rank_script("probe_env.py"), rank_script("report.py"), rank_script("behave.py")


def test_the_gloo_store_answers_only_requests_with_the_jobs_token(tmp_path):
    proc = launch("--np", "2", "--backend", "horovod", PROBE, str(tmp_path), "store")
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"probe.{rank}.json").read_text())
        assert seen == {"put": 200, "get": 200, "get_missing": 404, "no_token": 403, "wrong_token": 403}


def test_the_gloo_store_refuses_oversized_values_before_reading_them():
    store = GlooStore("127.0.0.1", "t" * 32)
    try:
        with socket.create_connection(("127.0.0.1", store.port), timeout=10) as sock:
            head = f"PUT /{store.prefix}/s/k HTTP/1.1\r\nHost: x\r\nContent-Length: {64 << 20}\r\n\r\n"
            sock.sendall(head.encode())
            assert sock.recv(100).startswith(b"HTTP/1.0 413")
    finally:
        store.close()


def test_ranks_never_see_the_secret(tmp_path):
    proc = launch(
        "--np", "1", "--backend", "none", REPORT, str(tmp_path), env={"TOWERPACK_LAUNCH_SECRET": "z" * 20}
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "env.0.json").read_text())["TOWERPACK_LAUNCH_SECRET"] is None


def _node(rank, port, *args, env):
    addr = ["--node-addr", "127.0.0.2"] if rank else []
    return start_launch(
        "--nnodes", "2", "--node-rank", str(rank), "--master", f"127.0.0.1:{port}", *addr, *args, env=env
    )


def test_the_control_server_refuses_strangers_and_wrong_secrets_then_takes_the_right_node(tmp_path):
    port, good = free_port(), {"TOWERPACK_LAUNCH_SECRET": "the-right-secret-123"}
    node0 = _node(0, port, "--np", "1", "--backend", "none", BEHAVE, str(tmp_path), "ok", env=good)
    node1 = None
    try:
        # Someone who is not a launcher: a frame that is not JSON, then one far too large.
        for junk in (b"\x00\x00\x00\x05" + bytes(32) + b"hello", b"\xff\xff\xff\xff" + bytes(32)):
            sock = _connect(port)
            sock.sendall(junk)
            answer = b"".join(iter(lambda s=sock: s.recv(1 << 16), b""))  # until node 0 hangs up
            assert b'"kind":"reject"' in answer
            sock.close()
        # A node launcher with another secret is refused: one line, exit code 2.
        wrong = _node(
            1, port, "--np", "1", BEHAVE, str(tmp_path), "ok", env={"TOWERPACK_LAUNCH_SECRET": "x" * 20}
        )
        ((code, _, err),) = finish(wrong, timeout=30)
        assert code == 2 and "node 0 refused this node: wrong job secret" in err, err
        node1 = _node(1, port, "--np", "1", BEHAVE, str(tmp_path), "ok", env=good)
        (rc0, _, err0), (rc1, _, err1) = finish(node0, node1)
        assert (rc0, rc1) == (0, 0), err0 + err1
        assert "refused a connection from 127.0.0.1: a frame is not JSON" in err0
        assert "refused a connection from 127.0.0.1: a frame of 4294967295 bytes" in err0
        assert "refused a connection from 127.0.0.1: a frame failed authentication" in err0
        assert_job_gone(timeout=2.0)
    finally:
        for proc in (node0, node1):
            if proc is not None:
                proc.kill()
                proc.wait()


def _connect(port: int) -> socket.socket:
    return wait_for(lambda: _try_connect(port), 30, what="node 0 to listen")


def _try_connect(port: int) -> socket.socket | None:
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        return None


def test_without_a_given_secret_nodes_share_a_private_file_in_the_home_directory(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    port, env = free_port(), {"HOME": str(home), "TOWERPACK_LAUNCH_SECRET": ""}
    node0 = _node(0, port, "--np", "1", "--backend", "none", BEHAVE, str(tmp_path), "ok", env=env)
    node1 = _node(1, port, "--np", "1", BEHAVE, str(tmp_path), "ok", env=env)
    (rc0, _, err0), (rc1, _, err1) = finish(node0, node1)
    assert (rc0, rc1) == (0, 0), err0 + err1
    secret = home / ".towerpack" / "launch-secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and len(secret.read_text().strip()) >= 32
    # A secret file others can read is refused.
    secret.chmod(0o644)
    proc = launch(
        "--nnodes", "2", "--node-rank", "1", "--master", f"127.0.0.1:{port}", "--np", "1", REPORT, env=env
    )
    assert proc.returncode == 2 and "can be read by other users" in proc.stderr


def test_an_agent_learns_why_it_was_refused_as_a_kind_not_from_words():
    secret = b"the-right-secret-123"
    server = ControlServer("127.0.0.1", 0, secret, 2, {1}, 0, Welcome(1.0, 10.0, 1.0), queue.SimpleQueue())
    info = NodeInfo(1, "127.0.0.1", "h1", 1, None, (free_port(), free_port()), None)
    try:
        for given, join, refusal, reason in (
            (b"x" * 20, Join(info, 2, 0), Refusal.WRONG_SECRET, "wrong job secret"),
            (secret, Join(info, 3, 0), Refusal.MISMATCH, "node 0 runs --nnodes 2 --ps 0"),
        ):
            conn = Connection(socket.create_connection(("127.0.0.1", server.port), timeout=10), Side.AGENT)
            with pytest.raises(Refused) as refused:
                protocol.agent_handshake(conn, given, join)
            conn.close()
            assert refused.value.refusal is refusal and str(refused.value).startswith(reason)
        # A stranger's junk is answered, unauthenticated, with the kind that says so.
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"\x00\x00\x00\x05" + bytes(32) + b"hello")
            answer = b"".join(iter(lambda: sock.recv(1 << 16), b""))
        assert protocol.decode(answer[36:]) == Reject(Refusal.BROKEN, "a frame is not JSON")
    finally:
        server.close()


def test_frames_are_authenticated_one_by_one():
    key = os.urandom(32)
    sender_sock, capture = socket.socketpair()
    inject, receiver_sock = socket.socketpair()
    sender, receiver = Connection(sender_sock, Side.AGENT), Connection(receiver_sock, Side.COORDINATOR)
    sender.authenticate(key)
    receiver.authenticate(key)
    sender.send(Hurry())
    frame = capture.recv(1 << 16)
    inject.sendall(frame)
    assert receiver.recv(5) == Hurry()
    for bad in (
        frame,  # replayed: its sequence number has passed
        frame[:-2] + b"x}",  # tampered
        frame[:4] + bytes(32) + frame[36:],  # unauthenticated
    ):
        inject.sendall(bad)
        with pytest.raises(AuthenticationError):
            receiver.recv(5)
    for s in (sender, receiver, capture, inject):
        s.close()


def test_ports_given_to_the_ranks_are_held_for_them(tmp_path):
    proc = launch("--np", "2", "--backend", "tf-server", "--ps", "1", PROBE, str(tmp_path), "ports")
    assert proc.returncode == 0, proc.stderr
    for name in ("0", "1", "ps0"):
        if name == "ps0" and not (tmp_path / "probe.ps0.json").exists():
            continue  # the ps may be stopped before it gets that far
        seen = json.loads((tmp_path / f"probe.{name}.json").read_text())
        # Nobody else can take the port; the rank's gRPC server (SO_REUSEPORT) can.
        assert (seen["plain"], seen["reuseport"]) == ("Address already in use", "bound"), (name, seen)
    assert json.loads((tmp_path / "probe.0.json").read_text())["master_port"] == "bound"  # released
