"""HorovodTrainer's fusion threshold, cycle time and fp16 compression reach Horovod (2 real ranks).

What Horovod did is read from its timeline (rank 0 records it): fused tensors are copied into the
fusion buffer (MEMCPY_IN_FUSION_BUFFER), and with HOROVOD_TIMELINE_MARK_CYCLES every cycle of its
background thread is marked (CYCLE_START), never sooner than the cycle time after the previous one.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from support.launcher_run import launch
from towerpack.trainer.horovod_trainer import HorovodTuning

pytestmark = [pytest.mark.multiprocess, pytest.mark.horovod]

TENSORS, RUNS = 8, 5

# Variables, not constants: TensorFlow would fold an all-reduce of constants into one at graph
# optimization (Horovod's op is not marked stateful), and run it only once.
RANK_SCRIPT = f"""
import json, os, sys
import numpy as np
from horovod.tensorflow import Compression
from towerpack.trainer import HorovodTrainer
from towerpack.trainer.compat import tf, tfv1

out, fusion_mb, cycle_ms = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
plain = HorovodTrainer(average=False, fusion_threshold_mb=fusion_mb, cycle_time_ms=cycle_ms)
# A second trainer asking for the values in effect is fine; other values are an error.
fp16 = HorovodTrainer(average=False, compression=Compression.fp16, fusion_threshold_mb=fusion_mb,
                      cycle_time_ms=cycle_ms)
try:
    HorovodTrainer(fusion_threshold_mb=fusion_mb + 1)
    error = None
except RuntimeError as e:
    error = str(e)
rank = plain.rank
with tf.Graph().as_default():
    values = tfv1.Variable(np.linspace(0.0, 1.0, 1001) * (rank + 1) / 3.0, dtype=tf.float32)
    grads = [(tfv1.Variable(tf.fill([1000], float(k + rank))).value(), None) for k in range({TENSORS})]
    summed = [g for g, _ in plain.allreduce(grads)]
    exact, rounded = (t.allreduce([(values.value(), None)])[0][0] for t in (plain, fp16))
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        for _ in range({RUNS}):
            got = sess.run(summed)
        got_exact, got_rounded = sess.run([exact, rounded])
result = {{"summed": [g[:3].tolist() for g in got], "exact": got_exact.tolist(), "fp16": got_rounded.tolist(),
          "error": error}}
with open(f"{{out}}.{{rank}}.json", "w") as f:
    json.dump(result, f)
plain.hvd.shutdown()  # writes the rest of the timeline
"""


def _run(tmp_path: Path, fusion_mb: float, cycle_ms: float) -> tuple[list[dict], list[dict]]:
    script = tmp_path / "tuning.py"
    script.write_text(RANK_SCRIPT)
    timeline = tmp_path / "timeline.json"
    env = {
        "HOROVOD_TIMELINE": str(timeline),
        "HOROVOD_TIMELINE_MARK_CYCLES": "1",
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    proc = launch(
        "--np", "2", "--backend", "horovod", "--bars", "none", str(script), str(tmp_path / "out"),
        str(fusion_mb), str(cycle_ms), env=env, timeout=150,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads((tmp_path / f"out.{r}.json").read_text()) for r in range(2)]
    # The writer leaves the JSON array open.
    text = timeline.read_text().rstrip().rstrip(",")
    events = json.loads(text if text.endswith("]") else text + "]")
    return results, events


def _cycle_gaps_ms(events: list[dict]) -> list[float]:
    starts = [e["ts"] for e in events if e.get("name") == "CYCLE_START"]
    return [(b - a) / 1e3 for a, b in itertools.pairwise(starts)]


def _count(events: list[dict], name: str) -> int:
    return sum(e.get("name") == name for e in events)


def _check_sums_and_fp16(results: list[dict]) -> None:
    for r, got in enumerate(results):
        # Tensor k holds k + rank on each rank: the sum over ranks 0 and 1 is 2k + 1.
        assert got["summed"] == [[2.0 * k + 1] * 3 for k in range(TENSORS)], f"rank {r}"
        expected = np.linspace(0.0, 1.0, 1001, dtype=np.float32) * np.float32(1 / 3 + 2 / 3)
        exact, rounded = np.array(got["exact"]), np.array(got["fp16"])
        np.testing.assert_allclose(exact, expected, rtol=1e-6, atol=1e-7)
        # fp16 has an 11-bit significand: each rank's value and the sum rounded to it, a relative
        # error of at most 3 x 2^-11; and compression did round (the results are not the fp32 ones).
        np.testing.assert_allclose(rounded, exact, rtol=3 * 2.0**-11, atol=1e-7)
        assert np.max(np.abs(rounded - exact)) > 1e-6


@pytest.mark.timeout(200)
@pytest.mark.usefixtures("horovod_required")
def test_fusion_threshold_cycle_time_and_fp16_reach_horovod(tmp_path):
    """Both away from Horovod's defaults (128 MB, 1 ms), under which these gradients, ready
    together, would be fused, and cycles would follow each other within a few ms."""
    results, events = _run(tmp_path, fusion_mb=0, cycle_ms=50)
    _check_sums_and_fp16(results)
    # One all-reduce per tensor, none through the fusion buffer.
    assert _count(events, "ALLREDUCE") >= TENSORS * RUNS
    assert _count(events, "MEMCPY_IN_FUSION_BUFFER") == 0
    gaps = _cycle_gaps_ms(events)
    assert len(gaps) >= 5 and min(gaps) >= 45.0, gaps
    for got in results:
        assert got["error"] == (
            "HorovodTrainer(fusion_threshold_mb=1.0): Horovod is already initialized with "
            "HOROVOD_FUSION_THRESHOLD=0, and reads it only once, at hvd.init(). Pass the value to the first "
            "HorovodTrainer of the process, or set HOROVOD_FUSION_THRESHOLD=1048576 before hvd.init()."
        )


def test_tuning_values_and_bad_input():
    assert HorovodTuning(64, 2.5).env() == {
        "HOROVOD_FUSION_THRESHOLD": "67108864",
        "HOROVOD_CYCLE_TIME": "2.5",
    }
    assert HorovodTuning(0).env() == {"HOROVOD_FUSION_THRESHOLD": "0"}
    assert HorovodTuning().env() == {}
    with pytest.raises(ValueError, match=r"fusion_threshold_mb must be >= 0 \(0: no fusion\), got -1"):
        HorovodTuning(fusion_threshold_mb=-1)
    with pytest.raises(ValueError, match="cycle_time_ms must be > 0, got 0"):
        HorovodTuning(cycle_time_ms=0)
