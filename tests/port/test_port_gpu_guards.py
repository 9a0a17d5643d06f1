"""`towerpack port` on what stops a tensorpack project on a machine without GPUs: each guard is reported
with an edit, and that edit (applied by --fix-gpu-guards) lets the code run on this machine, which has
no GPU: the originals and the fixed versions are executed against the real TensorFlow and
towerpack.utils.gpu.get_num_gpu."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tensorflow as tf

from towerpack.port.codemod import port_source
from towerpack.port.gpu_guards import Stop, find

TOWERPACK = Path(sys.executable).with_name("towerpack")
WHY = "towerpack's layers run channels_first on CPU and its multi-device trainers on logical CPU devices"

pytestmark = pytest.mark.skipif(
    bool(tf.config.list_physical_devices("GPU")), reason="these guards pass where there is a GPU"
)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def reported(code: str) -> dict[int, str]:
    return {g.line: g.message for g in find(code)}


def fixed(code: str) -> str:
    ported = port_source(code, "m.py", fix_gpu_guards=True)
    return ported.text(ported.source)


def load(code: str) -> dict:
    """Run ``code`` as a module; its namespace."""
    namespace = {"__name__": "ported_module"}
    exec(compile(code, "m.py", "exec"), namespace)
    return namespace


def test_an_assertion_on_a_gpu_query_is_dropped():
    code = src(
        """
        import tensorflow as tf


        def devices():
            assert tf.test.is_gpu_available(), "train on a GPU"
            assert len(tf.config.list_physical_devices("GPU")) >= 1  # one at least
            return "ready"
        """
    )
    assert reported(code) == {
        5: f'`assert tf.test.is_gpu_available(), "train on a GPU"` fails on a machine without GPUs: drop it '
        f"({WHY})",
        6: '`assert len(tf.config.list_physical_devices("GPU")) >= 1` fails on a machine without GPUs: '
        f"drop it ({WHY})",
    }
    with pytest.raises(AssertionError, match="train on a GPU"):
        load(code)["devices"]()
    result = fixed(code)
    assert result == src(
        """
        import tensorflow.compat.v1 as tf


        def devices():
            return "ready"
        """
    )
    assert load(result)["devices"]() == "ready"


def test_an_assertion_under_a_branch_taken_without_gpus_goes_with_the_branch():
    code = src(
        """
        import tensorflow as tf


        def check_inference():
            if not tf.test.is_gpu_available():
                import platform
                assert platform.machine() == "s390x", "CPU inference needs a mainframe"
            return "ready"
        """
    )
    assert reported(code) == {
        7: '`assert platform.machine() == "s390x", "CPU inference needs a mainframe"` can stop a run on a '
        "machine without GPUs, which takes `if not tf.test.is_gpu_available():` (line 5): drop the "
        f"`if not tf.test.is_gpu_available():` block (lines 5-7) ({WHY})"
    }
    with pytest.raises(AssertionError, match="mainframe"):
        load(code)["check_inference"]()
    result = fixed(code)
    assert result == src(
        """
        import tensorflow.compat.v1 as tf


        def check_inference():
            return "ready"
        """
    )
    assert load(result)["check_inference"]() == "ready"


def test_raise_and_exit_in_branches_taken_without_gpus():
    code = src(
        """
        import sys

        from towerpack.utils.gpu import get_num_gpu


        def layout():
            if get_num_gpu() == 0:
                raise RuntimeError("no GPU")
            return "NCHW"


        def layout_set_on_gpus():
            if get_num_gpu() > 0:
                fmt = "NCHW"  # the fast one
            else:
                sys.exit("no GPU")
            return fmt
        """
    )
    messages = reported(code)
    assert messages == {
        8: '`raise RuntimeError("no GPU")` stops a run on a machine without GPUs, which takes '
        f"`if get_num_gpu() == 0:` (line 7): drop the `if get_num_gpu() == 0:` block (lines 7-8) ({WHY})",
        16: messages[16],
    }
    # The GPU path sets what comes after it: a CPU run takes it too.
    assert messages[16].startswith(
        '`sys.exit("no GPU")` stops a run on a machine without GPUs, which takes the `else:` of '
        "`if get_num_gpu() > 0:` (line 13): replace the `if get_num_gpu() > 0:` statement (lines 13-16) by "
        "its body"
    )
    original = load(code)
    with pytest.raises(RuntimeError, match="no GPU"):
        original["layout"]()
    with pytest.raises(SystemExit):
        original["layout_set_on_gpus"]()
    result = fixed(code)
    assert result.endswith(
        src(
            """
            def layout():
                return "NCHW"


            def layout_set_on_gpus():
                fmt = "NCHW"  # the fast one
                return fmt
            """
        )
    )
    ported = load(result)
    assert (ported["layout"](), ported["layout_set_on_gpus"]()) == ("NCHW", "NCHW")


CONFIG = src(
    """
    from towerpack.trainer.devices import resolve_devices
    from towerpack.utils.gpu import get_num_gpu


    class Config:
        NUM_GPUS = None


    def finalize(cfg, horovod_size=None):
        if horovod_size:
            ngpu = horovod_size
        else:
            ngpu = get_num_gpu()
        assert ngpu > 0, "training needs GPUs"
        if cfg.NUM_GPUS is None:
            cfg.NUM_GPUS = ngpu
        else:
            assert cfg.NUM_GPUS <= ngpu
        per_tower = 64 // ngpu
        lr_factor = 8.0 / cfg.NUM_GPUS
        return resolve_devices(cfg.NUM_GPUS), per_tower, lr_factor
    """
)


def test_a_gpu_count_followed_through_names_and_config_attributes_is_fixed_where_it_is_assigned():
    messages = reported(CONFIG)
    assert sorted(messages) == [14, 18, 19, 20]
    one = "change line 13 to `ngpu = get_num_gpu() or 1`"
    assert messages[14] == (
        '`assert ngpu > 0, "training needs GPUs"` fails on a machine without GPUs, where `ngpu = '
        f"get_num_gpu()` (line 13) is 0: {one} (one tower on a CPU; towerpack runs more on logical CPU "
        "devices)"
    )
    assert messages[18].startswith(
        "`assert cfg.NUM_GPUS <= ngpu` fails on a machine without GPUs when more towers are asked for than "
        "`ngpu = get_num_gpu()` (line 13) counts: drop the `else:` block of `if cfg.NUM_GPUS is None:` "
        "(lines 17-18)"
    )
    where = "where `ngpu = get_num_gpu()` (line 13) is 0"
    assert messages[19] == f"`64 // ngpu` divides by zero on a machine without GPUs, {where}: {one}"
    assert messages[20] == f"`8.0 / cfg.NUM_GPUS` divides by zero on a machine without GPUs, {where}: {one}"

    original = load(CONFIG)
    with pytest.raises(AssertionError, match="training needs GPUs"):
        original["finalize"](original["Config"]())
    result = fixed(CONFIG)
    assert result == CONFIG.replace("ngpu = get_num_gpu()", "ngpu = get_num_gpu() or 1").replace(
        "    else:\n        assert cfg.NUM_GPUS <= ngpu\n", ""
    )
    ported = load(result)
    assert ported["finalize"](ported["Config"]()) == (["/cpu:0"], 64, 8.0)
    two_towers = ported["Config"]()
    two_towers.NUM_GPUS = 2
    assert ported["finalize"](two_towers) == (["/cpu:0", "/cpu:1"], 64, 4.0)
    assert ported["finalize"](ported["Config"](), horovod_size=2) == (["/cpu:0", "/cpu:1"], 32, 4.0)


def test_what_holds_without_gpus_or_runs_only_with_them_is_not_reported():
    code = src(
        """
        import tensorflow as tf
        from towerpack.utils.gpu import get_num_gpu


        def build(cfg, args):
            n = get_num_gpu()
            assert n == cfg.NUM_GPUS
            assert n >= 0
            if tf.test.is_gpu_available():
                assert cfg.DATA_FORMAT == "NCHW"
                raise SystemExit("the GPU path")
            if n > 0:
                batch = 64 // n
            else:
                assert n == 0
            towers = max(get_num_gpu(), 1)
            assert towers >= 1 and 8 % towers == 0
            assert not tf.test.is_gpu_available() or n > 0
            ok = n == 0 or 64 % n == 0
            assert args.load, "give --load"
            return batch, ok


        def with_a_cpu_path():
            n = get_num_gpu()
            if n == 0:
                return "the CPU path"
            assert n > 0
            return 64 // n


        def checks_in_a_loop(paths):
            if not tf.test.is_gpu_available():
                for path in paths:
                    if not path:
                        raise ValueError("an empty path")
            return "checked"
        """
    )
    assert find(code) == []
    ported = load(code)
    assert ported["with_a_cpu_path"]() == "the CPU path"
    assert ported["checks_in_a_loop"](["a"]) == "checked"


def test_fixes_keep_the_rest_of_the_file_and_a_second_run_finds_nothing():
    result = fixed(CONFIG)
    assert find(result) == []
    again = port_source(result, "m.py", fix_gpu_guards=True)
    assert not again.changed and again.fixed == ()
    assert port_source(CONFIG, "m.py").source == CONFIG.encode(), "without the option nothing is fixed"
    kinds = {g.stop for g in find(CONFIG)}
    assert kinds == {Stop.ASSERTION, Stop.TOWER_CAP, Stop.DIVISION}


def test_the_command_fixes_guards_on_request_and_says_what_it_did(tmp_path):
    (tmp_path / "config.py").write_text(CONFIG)

    def run(*args: str) -> subprocess.CompletedProcess:
        command = [str(TOWERPACK), "port", *args, "."]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    reported_only = run()
    assert reported_only.returncode == 0, reported_only.stderr
    assert "config.py:14: `assert ngpu > 0" in reported_only.stdout
    assert (tmp_path / "config.py").read_text() == CONFIG

    done = run("--fix-gpu-guards")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:4] == [
        "ported config.py",
        "config.py: fixed a GPU-only guard: change `ngpu = get_num_gpu()` to `ngpu = get_num_gpu() or 1`",
        "config.py: fixed a GPU-only guard: drop the `else:` block of `if cfg.NUM_GPUS is None:`",
        "towerpack port: 1 file(s) ported, 0 unchanged",
    ]
    assert "need a person" not in done.stdout
    assert (tmp_path / "config.py").read_text() == fixed(CONFIG)

    again = run("--fix-gpu-guards", "--check")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout == "towerpack port: 0 file(s) would be ported, 1 unchanged\n"
