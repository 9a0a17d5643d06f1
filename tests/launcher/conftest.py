"""Fixtures for the launcher tests."""

from __future__ import annotations

import os

import pytest

FAKE_SMI = """#!/bin/sh
# Stands in for nvidia-smi on machines without a GPU: lists two GPUs in nvidia-smi -L's format.
echo "GPU 0: NVIDIA Test GPU (UUID: GPU-00000000-0000-0000-0000-000000000000)"
echo "GPU 1: NVIDIA Test GPU (UUID: GPU-11111111-1111-1111-1111-111111111111)"
"""


@pytest.fixture
def fake_gpus(tmp_path):
    """Environment whose PATH starts with an ``nvidia-smi`` that lists GPUs 0 and 1."""
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}
