"""A task's identity: ``TaskId`` text ("3", "ps0") and back, its checks, and where the names reach users
(``--ranks``, log folders, summaries, the error file, the control protocol)."""

from __future__ import annotations

import json
import shlex
import socket

import pytest

from support.launcher_run import launch, rank_script
from towerpack.launcher import protocol
from towerpack.launcher.cli import parse
from towerpack.launcher.errors import ProtocolError, UsageError
from towerpack.launcher.output import OutputOptions, log_paths
from towerpack.launcher.protocol import Start
from towerpack.launcher.results import Failure
from towerpack.launcher.ssh import agent_command
from towerpack.launcher.tasks import Exit, Task, TaskId, TaskKind

BEHAVE = rank_script("behave.py")
HOST = socket.gethostname().split(".")[0]


@pytest.mark.parametrize(
    ("task", "text"),
    [
        (TaskId(TaskKind.WORKER, 0), "0"),
        (TaskId(TaskKind.WORKER, 3), "3"),
        (TaskId(TaskKind.WORKER, 1024), "1024"),
        (TaskId(TaskKind.PS, 0), "ps0"),
        (TaskId(TaskKind.PS, 12), "ps12"),
    ],
)
def test_text_and_parse_round_trip(task, text):
    assert str(task) == text
    assert TaskId.parse(text) == task
    assert TaskId.parse(str(task)) == task


def test_shorthands_and_sentences():
    assert TaskId.worker(2) == TaskId(TaskKind.WORKER, 2) and TaskId.ps(1) == TaskId(TaskKind.PS, 1)
    assert TaskId.worker(2) != TaskId.ps(2)
    assert (TaskId.worker(2).describe(), TaskId.ps(1).describe()) == ("rank 2", "parameter server 1")
    # Leading zeros name the same task.
    assert TaskId.parse("007") == TaskId.worker(7) and TaskId.parse("ps01") == TaskId.ps(1)


@pytest.mark.parametrize(
    "text",
    ["", "zero", "ps", "p0", "PS0", "ps-1", "-1", "+1", "1.0", " 1", "1 ", "ps 0", "0,1", "\u0663", "²"],
)
def test_parse_refuses_anything_but_a_rank_or_psN(text):
    with pytest.raises(ValueError, match="expected a rank like 3 or a parameter server like ps0") as info:
        TaskId.parse(text)
    assert repr(text) in str(info.value)


def test_parse_refuses_what_is_not_text():
    with pytest.raises(ValueError, match="got None"):
        TaskId.parse(None)


def test_construction_checks_kind_and_index():
    with pytest.raises(ValueError, match="index must be an integer >= 0, got -1"):
        TaskId(TaskKind.WORKER, -1)
    with pytest.raises(ValueError, match="got True"):
        TaskId(TaskKind.PS, True)
    with pytest.raises(ValueError, match="got '1'"):
        TaskId(TaskKind.WORKER, "1")
    with pytest.raises(TypeError, match="kind must be a TaskKind, got 'ps'"):
        TaskId("ps", 0)


def test_ranks_flag_is_parsed_once_into_task_ids():
    spec = parse(["--np", "2", "--backend", "tf-server", "--ps", "2", "--ranks", "1, ps0", BEHAVE])
    assert spec.output.ranks == frozenset({TaskId.worker(1), TaskId.ps(0)})
    assert spec.output.shows(TaskId.ps(0)) and spec.output.shows(TaskId.worker(1))
    assert not spec.output.shows(TaskId.worker(0)) and not spec.output.shows(TaskId.ps(1))
    assert OutputOptions().shows(TaskId.ps(5))  # no --ranks: every task
    for bad in ("zero", "1,,2", "ps", "rank1"):
        with pytest.raises(UsageError, match=f"--ranks expects ranks like 0,2 or ps0, got '{bad}'"):
            parse(["--np", "2", "--ranks", bad, BEHAVE])


def test_ssh_agents_get_the_same_ranks_as_text():
    spec = parse(
        [
            "--hosts",
            "127.0.0.1:1,127.0.0.2:1",
            "--backend",
            "tf-server",
            "--ps",
            "1",
            "--ranks",
            "ps0,1",
            BEHAVE,
        ]
    )
    remote = shlex.split(agent_command(spec, 1, spec.hosts[1], 29400)[-1])
    given = remote[remote.index("--ranks") + 1]
    assert given == "1,ps0"
    assert {TaskId.parse(r) for r in given.split(",")} == spec.output.ranks


def test_log_folders_keep_their_names(tmp_path):
    assert log_paths(str(tmp_path), TaskId.worker(3), 0) == (
        tmp_path / "rank.3" / "stdout",
        tmp_path / "rank.3" / "stderr",
    )
    assert log_paths(str(tmp_path), TaskId.ps(0), 2) == (
        tmp_path / "ps.0" / "stdout.2",
        tmp_path / "ps.0" / "stderr.2",
    )


def test_failures_name_the_task_in_words_and_in_the_error_file():
    ps = Failure.of_exit(1, Exit(TaskId.ps(0), "h1", -9, ("boom",), 5.0, 0))
    rank = Failure.of_exit(0, Exit(TaskId.worker(4), "h0", 3, (), 6.0, 0))
    lost = Failure.node_lost(2, "h2", "no heartbeat", 7.0)
    assert (ps.name(), ps.who()) == ("parameter server 0", "parameter server 0 on host h1")
    assert (rank.name(), rank.who()) == ("rank 4", "rank 4 on host h0")
    assert (lost.name(), lost.who()) == ("node 2", "node 2 (h2)")
    as_json = [
        (f["rank"], f["task_kind"], f["exit_code"], f["signal"])
        for f in map(Failure.to_json, (ps, rank, lost))
    ]
    assert as_json == [("ps0", "ps", None, "SIGKILL"), ("4", "worker", 3, None), (None, None, None, None)]


def test_task_ids_cross_the_control_protocol():
    start = Start(1, (Task(TaskId.worker(0), {"RANK": "0"}), Task(TaskId.ps(1), {})))
    body = protocol.encode(start)
    assert json.loads(body)["tasks"][1]["id"] == {"kind": "ps", "index": 1}
    assert protocol.decode(body) == start
    exit_body = protocol.encode(protocol.Exited(Exit(TaskId.ps(2), "h", 1, ("x",), 1.5, 0)))
    assert protocol.decode(exit_body).exit.task == TaskId.ps(2)
    # A peer's task of a kind or index that cannot exist is a protocol error, never a crash.
    for bad in ({"kind": "ps", "index": -1}, {"kind": "chief", "index": 0}, {"kind": "ps", "index": "0"}):
        frame = json.dumps({"kind": "start", "attempt": 0, "tasks": [{"id": bad, "env": {}}]}).encode()
        with pytest.raises(ProtocolError, match=r"start\.tasks\[\]"):
            protocol.decode(frame)


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_a_failing_parameter_server_is_named_everywhere_users_look(tmp_path):
    out, logs, errors = tmp_path / "out", tmp_path / "logs", tmp_path / "errors.json"
    out.mkdir()
    proc = launch(
        "--np", "1", "--backend", "tf-server", "--ps", "1", "--ranks", "ps0", "--log-dir", str(logs),
        "--error-file", str(errors), BEHAVE, str(out), "exit4@ps0", "sleep",
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    assert f"[{HOST}:ps0] rank ps0 is failing on purpose\n" in proc.stderr
    assert f"launch: parameter server 0 on host {HOST} failed first (exit code 4)" in proc.stderr
    assert "last lines of parameter server 0's stderr:\n    rank ps0 is failing on purpose" in proc.stderr
    assert (logs / "ps.0" / "stderr").read_text() == "rank ps0 is failing on purpose\n"
    assert (logs / "rank.0" / "stderr").read_text() == ""
    cause = json.loads(errors.read_text())["root_cause"]
    assert (cause["rank"], cause["task_kind"], cause["host"], cause["exit_code"]) == ("ps0", "ps", HOST, 4)
