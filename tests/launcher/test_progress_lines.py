"""Ranks' progress bars under `launch`: in a log or a pipe, the latest state of each rank's bar as a
plain line every TOWERPACK_PROGRESS_INTERVAL seconds; on a terminal, the live bar as before."""

from __future__ import annotations

import re
import socket

import pytest

from support.launcher_run import assert_job_gone, launch, rank_script
from support.launcher_terminal import Terminal

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(60)]
BENCH = rank_script("slow_bench.py")
HOST = socket.gethostname().split(".")[0]
SIZE = 200
# tqdm's bar as a rank writes it: " 42%|████▏     | 84/200 [00:00<00:01, 97.12dp/s]"
BAR = re.compile(rf"^\[{re.escape(HOST)}:(\d)\] +(\d+)%\|[^|]*\| (\d+)/{SIZE} \[[^\]]*dp/s\]$")


def test_in_a_pipe_each_ranks_bar_is_a_line_per_interval(tmp_path):
    # 200 datapoints at 10 ms: a 2 s bar per rank, written every 0.4 s.
    proc = launch(
        "--np", "2", "--backend", "none", BENCH, str(SIZE), "0.01", env={"TOWERPACK_PROGRESS_INTERVAL": "0.4"}
    )
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stdout + proc.stderr
    counts: dict[str, list[int]] = {"0": [], "1": []}
    for line in proc.stderr.splitlines():
        if m := BAR.match(line):
            counts[m.group(1)].append(int(m.group(3)))
    for rank, seen in counts.items():
        running = [c for c in seen if c < SIZE]
        assert len(running) >= 3, (rank, proc.stderr)
        assert running == sorted(set(running)), (rank, seen)
        # then the final state (a sample may have caught 200/200 before tqdm's closing redraw)
        assert seen[len(running) :] in ([SIZE], [SIZE, SIZE]), (rank, seen)
    assert len(re.findall(rf"{SIZE} datapoints in [\d.]+ s", proc.stdout)) == 2, proc.stdout


def test_in_a_pipe_the_default_interval_writes_only_final_states(tmp_path):
    proc = launch("--np", "1", "--backend", "none", BENCH, "40", "0.01")
    assert proc.returncode == 0, proc.stderr
    bars = [line for line in proc.stderr.splitlines() if "dp/s]" in line]
    assert len(bars) == 1 and re.search(r"\| 40/40 \[", bars[0]), proc.stderr


def test_on_a_terminal_the_bar_stays_live(tmp_path):
    term = Terminal(
        "--np", "1", "--backend", "none", BENCH, str(SIZE), "0.01", env={"TOWERPACK_PROGRESS_INTERVAL": "0.4"}
    )
    try:
        assert term.finish() == 0
    finally:
        assert_job_gone()
    raw = term.raw.decode(errors="replace")
    # Drawn and redrawn in place (erase, draw), never written as lines above it.
    drawn = {int(c) for c in re.findall(rf"\| (\d+)/{SIZE} \[", raw)}
    assert len(drawn) >= 5, raw
    assert "\x1b[J" in raw
    # stdout and stderr are read apart: the report may land above or below the bar's final state
    bar, report = sorted(term.screen.shown(), key=lambda line: "datapoints in" in line)
    assert BAR.match(bar) and f"{SIZE}/{SIZE}" in bar, bar
    assert re.match(rf"^\[{re.escape(HOST)}:0\] {SIZE} datapoints in", report), report
