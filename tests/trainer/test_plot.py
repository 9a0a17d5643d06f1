"""The plot command: stats.json -> PNG with one panel per scalar; clear errors otherwise."""

import json
import subprocess
import sys

import pytest

from towerpack.trainer.plot import PlotError, plot_stats

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _write_stats(logdir, records):
    logdir.mkdir(exist_ok=True)
    (logdir / "stats.json").write_text(json.dumps(records))


def test_plot_writes_png_with_one_panel_per_scalar(tmp_path):
    records = [
        {"cost": 1.0 / (e + 1), "accuracy": 0.5 + 0.1 * e, "epoch_num": e + 1, "global_step": 10 * (e + 1)}
        for e in range(4)
    ]
    records.append({"validation_error": 0.2, "epoch_num": 5, "global_step": 50})
    _write_stats(tmp_path, records)
    out = plot_stats(str(tmp_path))
    assert out == str(tmp_path / "training_curves.png")
    data = (tmp_path / "training_curves.png").read_bytes()
    assert data.startswith(PNG_MAGIC)
    # 3 scalars -> 3 panels side by side (width 3 * 4.5in at 100 dpi).
    width = int.from_bytes(data[16:20], "big")
    assert width == 1350


def test_cli_out_option_and_errors(tmp_path):
    empty = tmp_path / "empty"
    _write_stats(empty, [])
    missing = tmp_path / "nothing_here"
    good = tmp_path / "good"
    _write_stats(good, [{"cost": 1.0, "epoch_num": 1, "global_step": 5}])
    out = tmp_path / "curves" / "c.png"
    code = (
        "import sys; from towerpack.trainer.plot import main; "
        "sys.exit(sum(main(a) for a in [sys.argv[1:3], [sys.argv[3]], [sys.argv[4]]]))"
    )
    # Run the three calls in one interpreter (matplotlib start-up once).
    proc = subprocess.run(
        [sys.executable, "-c", code, str(good), f"--out={out}", str(empty), str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.read_bytes().startswith(PNG_MAGIC)
    assert proc.returncode == 4, proc.stderr  # 0 + 2 + 2
    assert "has no records yet" in proc.stderr
    assert "stats.json does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_plot_rejects_non_stats_file(tmp_path):
    (tmp_path / "stats.json").write_text('{"not": "a list"}')
    with pytest.raises(PlotError, match="not a list of records"):
        plot_stats(str(tmp_path))
    (tmp_path / "stats.json").write_text("{broken")
    with pytest.raises(PlotError, match="cannot read"):
        plot_stats(str(tmp_path))


def test_module_entry_point(tmp_path):
    _write_stats(tmp_path, [{"cost": 2.0, "epoch_num": 1, "global_step": 1}])
    proc = subprocess.run(
        [sys.executable, "-m", "towerpack.trainer.plot", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("training_curves.png")
    assert (tmp_path / "training_curves.png").exists()
