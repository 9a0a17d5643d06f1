"""Without Horovod (``make setup HOROVOD=0``) the trainers still make a complete multi-process system.

"Horovod not installed" is simulated: a directory put first on PYTHONPATH holds a ``horovod``
package whose ``__init__`` raises ImportError, so every ``import horovod...`` fails as it does
where Horovod is missing (or built against another TensorFlow).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from support.dist_models import train_reference
from support.launcher_run import launch

pytestmark = [pytest.mark.multiprocess]

TESTS = str(Path(__file__).resolve().parents[1])
SIMULATED = "simulated for this test: Horovod is not installed"
BATCH = 8

# Trains Regression64 with the trainer the job's backend gives, after checking Horovod is unusable.
RANK_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import numpy as np
    tests, out, kind = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    sys.path.insert(0, tests)
    try:
        import horovod.tensorflow  # noqa: F401
        raise SystemExit("horovod imported although the test hides it")
    except ImportError as e:
        assert "{simulated}" in str(e), e
    from support.dist_models import FetchVariables, RankSlices, Regression64, regression_data
    from towerpack.trainer import (DistributedTrainerReplicated, TrainConfig, default_trainer,
                                   launch_train_with_config)

    if kind == "default":
        trainer = default_trainer()
        rank, size = trainer.rank, trainer.size
    else:  # a parameter server serves in the constructor, then exits
        trainer = DistributedTrainerReplicated(1)
        rank, size = trainer.task.index, trainer.task.num_workers
    print("TRAINER", rank, type(trainer).__name__, file=sys.stderr)
    values = {{}}
    x, y = regression_data()
    config = TrainConfig(model=Regression64(seed=1 + rank), dataflow=RankSlices(x, y, {batch}, rank, size),
                         callbacks=[FetchVariables(values)], monitors=[], max_epoch=2)
    launch_train_with_config(config, trainer)
    np.savez(out / f"vars.{{rank}}.npz", **{{k.replace("/", "__"): v for k, v in values.items()}})
    """
).format(simulated=SIMULATED, batch=BATCH)


@pytest.fixture
def no_horovod(tmp_path) -> dict[str, str]:
    """The environment of processes for which ``import horovod`` fails (see the module docstring)."""
    package = tmp_path / "hide_horovod" / "horovod"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"raise ImportError({SIMULATED!r})\n")
    path = os.pathsep.join(p for p in [str(package.parent), os.environ.get("PYTHONPATH", "")] if p)
    return {"PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "2"}


def test_every_trainer_imports_and_horovod_trainer_says_what_is_missing(no_horovod):
    code = textwrap.dedent(
        """
        from towerpack.trainer import (CollectiveAllReduceTrainer, DistributedTrainerReplicated,
                                       HorovodTrainer, SimpleTrainer, default_trainer)
        assert type(default_trainer()).__name__ == "SimpleTrainer"  # a process alone
        try:
            HorovodTrainer()
        except ImportError as e:
            print(e)
        """
    )
    env = dict(os.environ, **no_horovod)
    for var in ("TF_CONFIG", "TOWERPACK_BACKEND"):
        env.pop(var, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "HorovodTrainer needs Horovod built with TensorFlow support" in out.stdout
    assert SIMULATED in out.stdout


def _check_weights(out: Path, ranks: int) -> None:
    expected = train_reference(batch=ranks * BATCH, epochs=2)
    for r in range(ranks):
        with np.load(out / f"vars.{r}.npz") as got:
            for name in ("w", "b"):
                np.testing.assert_allclose(
                    got[name], expected[name], rtol=0, atol=1e-9, err_msg=f"{r} {name}"
                )


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("backend", "kind", "trainer"),
    [
        (["--backend", "tf-collective"], "default", "CollectiveAllReduceTrainer"),
        (["--backend", "tf-server", "--ps", "1"], "tf-server", "DistributedTrainerReplicated"),
    ],
    ids=["tf-collective", "tf-server"],
)
def test_two_processes_train_like_one_at_the_total_batch(tmp_path, no_horovod, backend, kind, trainer):
    script = tmp_path / "train_without_horovod.py"
    script.write_text(RANK_SCRIPT)
    out = tmp_path / "out"
    out.mkdir()
    proc = launch("--np", "2", *backend, str(script), TESTS, str(out), kind, env=no_horovod, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in range(2):
        assert f"TRAINER {r} {trainer}" in proc.stderr
    _check_weights(out, 2)
