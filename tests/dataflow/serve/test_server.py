"""The ``dataflow serve`` prefetch server with real consumers: sharing, failures, bad input, CURVE."""

import logging
import signal
import socket
import subprocess
import sys
import textwrap
import time

import msgpack
import numpy as np
import psutil
import pytest
import zmq

from support.dataflow_cases import malformed_cases
from support.dataflow_server import ServerProcess, dataflow_cmd, dataflow_env
from support.procs import free_port, wait_for
from towerpack.dataflow import RemoteDataZMQ
from towerpack.dataflow.serve import remote
from towerpack.dataflow.wire import control
from towerpack.dataflow.wire.codec import decode_message
from towerpack.dataflow.wire.control import Credit, Window

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow, pytest.mark.timeout(90)]

COUNTING = "support.dataflow_factories:counting"


def endpoint():
    return f"tcp://127.0.0.1:{free_port()}"


def consumer(addr, hwm=4, timeout=20, **kw):
    c = RemoteDataZMQ(addr, hwm=hwm, timeout=timeout, **kw)
    c.reset_state()
    return c


def take(c, n):
    it = iter(c)
    out = []
    for _ in range(n):
        dp = next(it)
        assert dp[1] == f"dp-{int(dp[0])}"
        out.append(int(dp[0]))
    return out


def test_three_consumers_share_distinct_datapoints_and_the_server_counts_them():
    addr = endpoint()
    with ServerProcess(COUNTING, "--bind", addr) as server:
        server.wait_for_line("consumers connected: 0")
        cs = [consumer(addr) for _ in range(3)]
        try:
            got = [[], [], []]
            for _ in range(50):
                for i, c in enumerate(cs):
                    got[i] += take(c, 2)
            flat = [v for g in got for v in g]
            assert len(flat) == len(set(flat)) == 300
            # Nothing is skipped: only the consumers' unacknowledged windows lie beyond.
            assert max(flat) < 300 + 3 * 4
            wait_for(lambda: server.consumers() == 3, 10, what="3 consumers")
        finally:
            for c in cs:
                c.close()
        wait_for(lambda: server.consumers() == 0, 10, what="0 consumers after they left")
        assert sum("serving on" in line for line in server.lines) == 1, server.output
        # The server survived them all and serves a newcomer.
        late = consumer(addr)
        try:
            assert len(take(late, 5)) == 5
        finally:
            late.close()


def test_a_stalled_consumer_holds_at_most_its_window_and_does_not_slow_the_others():
    addr = endpoint()
    with ServerProcess(COUNTING, "--bind", addr) as server:
        server.wait_for_line("consumers connected: 0")
        stalled, busy = consumer(addr, hwm=3), consumer(addr, hwm=8)
        try:
            held = take(stalled, 1)
            got = take(busy, 400)
            assert len(set(got)) == 400
            missing = set(range(max(got))) - set(got)
            # Only what was sent to the stalled consumer is missing from the busy one's stream.
            assert len(missing) <= 3 and set(held) <= missing
        finally:
            stalled.close()
            busy.close()


def test_server_hwm_caps_the_window_a_consumer_asks_for():
    addr = endpoint()
    with ServerProcess(COUNTING, "--bind", addr, "--hwm", "3") as server:
        server.wait_for_line("consumers connected: 0")
        stalled, busy = consumer(addr, hwm=50), consumer(addr, hwm=50)
        try:
            held = take(stalled, 1)
            start = time.monotonic()
            got = take(busy, 400)
            elapsed = time.monotonic() - start
            missing = set(range(max(got))) - set(got)
            # The stalled consumer asked for 50 but was sent no more than the server's 3.
            assert len(missing) <= 3 and set(held) <= missing
            # The server says it granted 3, so the consumer acknowledges often enough for 3: it
            # does not wait for its partial-acknowledgement timeout after every 3 datapoints.
            timeout_paced = 400 / 3 * remote.PARTIAL_ACK_AFTER_MS / 1000
            assert elapsed < 0.5 * timeout_paced, (elapsed, timeout_paced)
            assert granted_window(addr, asked=50) == 3
        finally:
            stalled.close()
            busy.close()


def granted_window(addr, asked):
    """The window a server grants a bare client that asks for ``asked``, from its reply."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(addr)
        sock.send_multipart(control.encode(Credit(window=asked)))
        while sock.poll(5000):
            msg = decode_message(sock.recv_multipart())
            if isinstance(msg, Window):
                return msg.size
        return None
    finally:
        sock.close()
        ctx.term()


STRAGGLER = textwrap.dedent(
    """
    import sys, time
    from towerpack.dataflow import RemoteDataZMQ
    c = RemoteDataZMQ(sys.argv[1], hwm=6, timeout=30)
    c.reset_state()
    for dp in c:
        print(int(dp[0]), flush=True)
        time.sleep(0.01)
    """
)


def test_killed_consumer_strands_nothing_and_the_others_keep_receiving():
    addr = endpoint()
    with ServerProcess(COUNTING, "--bind", addr) as server:
        server.wait_for_line("consumers connected: 0")
        a, b = consumer(addr, hwm=4), consumer(addr, hwm=4)
        victim = subprocess.Popen([sys.executable, "-c", STRAGGLER, addr], stdout=subprocess.PIPE, text=True)
        try:
            before = take(a, 30) + take(b, 30)
            seen_by_victim = [int(victim.stdout.readline()) for _ in range(20)]
            victim.kill()
            victim.wait(10)
            seen_by_victim += [int(line) for line in victim.stdout.read().split()]
            wait_for(lambda: server.consumers() == 2, 10, what="the server to notice the dead consumer")
            after = take(a, 150) + take(b, 150)
        finally:
            a.close()
            b.close()
            if victim.poll() is None:
                victim.kill()
                victim.wait(10)
        survivors = before + after
        assert len(set(survivors)) == len(survivors)  # never the same datapoint twice among the living
        # Every datapoint up to the survivors' latest reached someone: what the dead consumer had
        # not acknowledged was handed to the others.
        lost = set(range(max(survivors))) - set(survivors) - set(seen_by_victim)
        assert len(lost) <= 8, sorted(lost)  # only the survivors' own open windows may be pending
        assert all(v > max(seen_by_victim) for v in lost)


def test_a_hung_consumer_is_dropped_by_heartbeat_and_its_data_goes_to_the_others():
    addr = endpoint()
    with ServerProcess(COUNTING, "--bind", addr, "--heartbeat", "1") as server:
        server.wait_for_line("consumers connected: 0")
        a = consumer(addr, hwm=4)
        victim = subprocess.Popen([sys.executable, "-c", STRAGGLER, addr], stdout=subprocess.PIPE, text=True)
        try:
            before = take(a, 10)
            seen_by_victim = [int(victim.stdout.readline()) for _ in range(20)]
            wait_for(lambda: server.consumers() == 2, 10, what="2 consumers")
            victim.send_signal(signal.SIGSTOP)  # hung: its TCP connection stays open
            # Heartbeats do not reach a stopped process: the server drops it within seconds.
            wait_for(lambda: server.consumers() == 1, 10, what="the server to drop the hung consumer")
            after = take(a, 100)
        finally:
            a.close()
            victim.kill()
            victim.wait(10)
        seen_by_victim += [int(line) for line in victim.stdout.read().split()]
        survivors = before + after
        assert len(set(survivors)) == len(survivors)
        lost = set(range(max(survivors))) - set(survivors) - set(seen_by_victim)
        assert len(lost) <= 4, sorted(lost)  # only the survivor's own open window may be pending
        assert all(v > max(seen_by_victim) for v in lost)


def test_malformed_client_messages_are_logged_and_the_server_keeps_serving():
    addr = endpoint()
    with ServerProcess(COUNTING, "--bind", addr) as server:
        server.wait_for_line("consumers connected: 0")
        ctx = zmq.Context()
        rogue = ctx.socket(zmq.DEALER)
        rogue.setsockopt(zmq.LINGER, 0)
        try:
            rogue.connect(addr)
            cases = [frames for _, frames in malformed_cases(seed=99) if frames]
            cases += [[msgpack.packb({"v": 1, "k": "credit", "ack": bad})] for bad in (-1, 2**40, "x", True)]
            cases += [[msgpack.packb({"v": 1, "k": "credit", "set": bad})] for bad in (-5, 10**9, 1.5, [1])]
            for frames in cases:
                rogue.send_multipart(frames)
            rogue.send(b"\0" * (1 << 20))  # over the server's message size limit: the connection is dropped
            good = consumer(addr)
            try:
                assert len(take(good, 20)) == 20
            finally:
                good.close()
        finally:
            rogue.close(linger=0)
            ctx.term()
        assert server.proc.poll() is None
        server.wait_for_line("ignored malformed message")
        # The rogue never became a consumer: its credits were all malformed.
        assert (
            max(int(line.rsplit(":", 1)[1]) for line in server.lines if "consumers connected:" in line) == 1
        )


def test_curve_server_serves_authorized_clients_only(tmp_path):
    keys, authorized, strangers = tmp_path / "keys", tmp_path / "authorized", tmp_path / "strangers"
    for directory, name in ((keys, "server"), (authorized, "trainer"), (strangers, "stranger")):
        out = subprocess.run(
            dataflow_cmd("keygen", str(directory), "--name", name),
            capture_output=True,
            text=True,
            timeout=30,
            env=dataflow_env(),
        )
        assert out.returncode == 0, out.stderr
        assert (directory / f"{name}.key").is_file() and (directory / f"{name}.key_secret").is_file()
    addr = endpoint()
    args = [
        "--bind",
        addr,
        "--curve-secret-key",
        str(keys / "server.key_secret"),
        "--curve-authorized",
        str(authorized),
    ]
    with ServerProcess(COUNTING, *args) as server:
        server.wait_for_line("consumers connected: 0")
        server_key = keys / "server.key"
        ok = consumer(addr, curve_server_key=server_key, curve_secret_key=authorized / "trainer.key_secret")
        try:
            assert len(take(ok, 10)) == 10
        finally:
            ok.close()
        refused = [
            consumer(
                addr,
                timeout=2,
                curve_server_key=server_key,
                curve_secret_key=strangers / "stranger.key_secret",
            ),
            consumer(addr, timeout=2, curve_server_key=server_key),  # throw-away key pair
            consumer(addr, timeout=2),  # no CURVE at all
        ]
        for c in refused:
            try:
                with pytest.raises(TimeoutError):
                    next(iter(c))
            finally:
                c.close()
        assert server.consumers() == 0


def test_server_with_workers_serves_and_its_workers_die_with_it():
    addr = endpoint()
    server = ServerProcess("support.dataflow_factories:small", "--bind", addr, "--workers", "2")
    try:
        server.wait_for_line("consumers connected: 0")
        c = consumer(addr)
        try:
            dp = next(iter(c))
            assert dp[0].shape == (16, 16) and dp[0].dtype == np.uint8 and dp[1].dtype == np.int32
        finally:
            c.close()
        workers = psutil.Process(server.proc.pid).children()
        assert len(workers) == 2
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        _, alive = psutil.wait_procs(workers, timeout=5)
        assert not alive
    finally:
        server.stop()


def test_send_dataflow_zmq_feeds_a_binding_consumer():
    addr = endpoint()
    code = textwrap.dedent(
        """
        import sys
        from support.dataflow_factories import counting
        from towerpack.dataflow import send_dataflow_zmq
        send_dataflow_zmq(counting(), sys.argv[1])
        """
    )
    c = RemoteDataZMQ(addr, hwm=4, bind=True, timeout=20)
    c.reset_state()
    producer = subprocess.Popen([sys.executable, "-c", code, addr], env=dataflow_env())
    try:
        assert take(c, 30) == list(range(30))
    finally:
        c.close()
        producer.kill()
        producer.wait(10)


PRODUCER = textwrap.dedent(
    """
    import sys, time
    from towerpack.dataflow import DataFromGenerator, send_dataflow_zmq
    k, pause = int(sys.argv[2]), float(sys.argv[3])
    def gen():
        for i in range(10**9):
            if pause:
                time.sleep(pause)
            yield [k, i]
    send_dataflow_zmq(DataFromGenerator(gen), sys.argv[1], hwm=8)
    """
)


def test_two_producers_feed_one_binding_consumer_completely_and_without_stalls():
    addr = endpoint()
    c = RemoteDataZMQ(addr, hwm=4, bind=True, timeout=20)
    c.reset_state()
    # A fast and a slow producer: credit must go back to the producer that used it.
    producers = [
        subprocess.Popen([sys.executable, "-c", PRODUCER, addr, str(k), pause], env=dataflow_env())
        for k, pause in ((0, "0"), (1, "0.01"))
    ]
    try:
        got = {0: [], 1: []}
        it = iter(c)
        while not (got[0] and got[1]):
            k, i = next(it)
            got[k].append(i)
        fast_before, start = len(got[0]), time.monotonic()
        while len(got[0]) < fast_before + 3000 or len(got[1]) < 50:
            k, i = next(it)
            got[k].append(i)
            assert time.monotonic() - start < 10, f"stalled: {len(got[0])} and {len(got[1])} datapoints"
        # Each producer's datapoints all arrived, in order.
        assert got[0] == list(range(len(got[0])))
        assert got[1] == list(range(len(got[1])))
    finally:
        c.close()
        for p in producers:
            p.kill()
            p.wait(10)


def test_defaults_on_both_sides_warn_about_bind_and_connect(monkeypatch, caplog):
    monkeypatch.setattr(remote, "SILENCE_WARN_S", 0.5)
    addr = endpoint()
    code = "import sys; from support.dataflow_factories import counting; "
    code += "from towerpack.dataflow import send_dataflow_zmq; send_dataflow_zmq(counting(), sys.argv[1])"
    producer = subprocess.Popen([sys.executable, "-c", code, addr], env=dataflow_env())
    c = consumer(addr, timeout=1.5)  # connects, like the producer: nobody binds
    try:
        with caplog.at_level(logging.WARNING, logger=remote.__name__), pytest.raises(TimeoutError):
            next(iter(c))
    finally:
        c.close()
        producer.kill()
        producer.wait(10)
    warnings = [r.getMessage() for r in caplog.records if "nothing received" in r.getMessage()]
    assert len(warnings) == 1 and "bind=False" in warnings[0] and "must bind" in warnings[0], warnings


def test_a_client_secret_key_without_the_server_key_is_refused():
    with pytest.raises(ValueError, match="curve_secret_key needs curve_server_key"):
        RemoteDataZMQ("tcp://127.0.0.1:1", curve_secret_key="trainer.key_secret")


def test_cli_reports_usage_errors_clearly():
    for spec, message in [
        ("nocolon", "expected MODULE:FACTORY"),
        ("no_such_module_xyz:f", "cannot import"),
        ("support.dataflow_factories:missing", "has no attribute"),
        ("support.dataflow_factories:not_a_dataflow", "not a DataFlow"),
    ]:
        out = subprocess.run(
            dataflow_cmd("serve", spec), capture_output=True, text=True, timeout=30, env=dataflow_env()
        )
        assert out.returncode == 2, (spec, out.stdout, out.stderr)
        assert message in out.stderr and "Traceback" not in out.stderr


def test_bench_prints_throughput():
    out = subprocess.run(
        dataflow_cmd("bench", "support.dataflow_factories:small", "--size", "200"),
        capture_output=True,
        text=True,
        timeout=60,
        env=dataflow_env(),
    )
    assert out.returncode == 0, out.stderr
    assert "200 datapoints" in out.stdout and "datapoints/s" in out.stdout and "MB/s" in out.stdout


def test_serve_reports_an_address_in_use_and_bad_keys_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        addr = f"tcp://127.0.0.1:{taken.getsockname()[1]}"
        for extra, message in [
            ([], "cannot bind"),
            (["--curve-secret-key", str(tmp_path / "missing.key_secret")], "CURVE key file"),
            (["--curve-authorized", str(tmp_path)], "--curve-authorized needs --curve-secret-key"),
            (["--hwm", "0"], "--hwm must be an integer from 1 to 1000"),
            (["--heartbeat", "-1"], "heartbeat must be a positive number"),
        ]:
            out = subprocess.run(
                dataflow_cmd("serve", "support.dataflow_factories:small", "--bind", addr, *extra),
                capture_output=True,
                text=True,
                timeout=30,
                env=dataflow_env(),
            )
            assert out.returncode == 2 and message in out.stderr, out.stderr
            assert "Traceback" not in out.stderr


def test_consumer_recovers_when_the_server_restarts():
    addr = endpoint()
    c = consumer(addr, hwm=4)
    try:
        with ServerProcess(COUNTING, "--bind", addr) as first:
            first.wait_for_line("consumers connected: 0")
            assert take(c, 5) == [0, 1, 2, 3, 4]
        with ServerProcess(COUNTING, "--bind", addr) as second:
            second.wait_for_line("consumers connected: 0")
            # First what the old server had already delivered (at most the window), then the new
            # server's stream from its beginning: the consumer re-announced its window by itself.
            got = take(c, 10)
            start = got.index(0)
            assert start <= 4 and all(v >= 5 for v in got[:start])
            assert got[start:] == list(range(10 - start))
            wait_for(lambda: second.consumers() == 1, 10, what="the consumer to be counted")
    finally:
        c.close()


def test_server_caps_connections_and_admits_a_newcomer_when_one_leaves(caplog):
    addr = endpoint()
    with ServerProcess(COUNTING, "--bind", addr, "--max-consumers", "2") as server:
        server.wait_for_line("consumers connected: 0")
        a, b = consumer(addr), consumer(addr)
        try:
            assert len(take(a, 5)) == len(take(b, 5)) == 5
            extra = consumer(addr, timeout=2)
            try:
                with pytest.raises(TimeoutError):  # refused during the handshake: it gets nothing
                    next(iter(extra))
            finally:
                extra.close()
            assert "refused this client during the handshake" in caplog.text
            server.wait_for_line("refused a connection #1: too many connections")
            a.close()
            wait_for(lambda: server.consumers() == 1, 10, what="the server to see a consumer leave")
            late = consumer(addr, timeout=10)
            try:
                assert len(take(late, 5)) == 5
            finally:
                late.close()
        finally:
            a.close()
            b.close()


def test_status_lines_show_rate_consumers_and_unacknowledged_datapoints():
    addr = endpoint()
    with ServerProcess(COUNTING, "--bind", addr, "--stats", "0.3") as server:
        server.wait_for_line("consumers connected: 0")
        stalled, busy = consumer(addr, hwm=3), consumer(addr, hwm=8)
        try:
            take(stalled, 1)  # then holds its window of 3 without acknowledging
            take(busy, 200)
            start = len(server.lines)
            server.wait_for_line("2 consumers", after=start)
            line = server.lines[server.wait_for_line("(at most 8 by one consumer)", after=start)]
            assert "datapoints/s, 2 consumers," in line and "0 malformed messages ignored" in line
        finally:
            stalled.close()
            busy.close()


EPOCH_STRAGGLER = textwrap.dedent(
    """
    import sys
    from towerpack.dataflow import RemoteDataZMQ
    c = RemoteDataZMQ(sys.argv[1], hwm=6, timeout=30)
    c.reset_state()
    for dp in c:
        print(int(dp[0]), flush=True)
    print("end", flush=True)
    """
)


def test_epoch_marks_come_after_the_datapoints_of_a_consumer_that_died():
    """A consumer killed mid-epoch: its unacknowledged datapoints reach the survivor before the mark."""
    addr = endpoint()
    with ServerProcess(
        "support.dataflow_factories:shuffled_ids", "--bind", addr, "--epochs", "--hwm", "6"
    ) as s:
        s.wait_for_line("consumers connected: 0")
        survivor = consumer(addr, hwm=4, timeout=30)
        victim = subprocess.Popen(
            [sys.executable, "-c", EPOCH_STRAGGLER, addr],
            stdout=subprocess.PIPE,
            text=True,
            env=dataflow_env(),
        )
        try:
            it = iter(survivor)
            got = [int(next(it)[0]) for _ in range(10)]
            wait_for(lambda: s.consumers() == 2, 10, what="2 consumers")
            seen_by_victim = [int(victim.stdout.readline()) for _ in range(5)]
            victim.kill()
            victim.wait(10)
            seen_by_victim += [int(x) for x in victim.stdout.read().split() if x != "end"]
            got += [int(dp[0]) for dp in it]  # up to the end-of-epoch mark
            assert survivor.epoch == 1
        finally:
            survivor.close()
            if victim.poll() is None:
                victim.kill()
                victim.wait(10)
    assert len(got) == len(set(got))
    assert set(got) | set(seen_by_victim) == set(range(90))  # at least once, before the mark
