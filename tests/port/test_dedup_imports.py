"""A ported file never holds an import twice that the port made twice; comments stay, and what the
file itself held twice, or under another block, is left as it was."""

from __future__ import annotations

import ast
import textwrap

import pytest

from towerpack.port.codemod import port_text


def ported(source: str) -> str:
    text = port_text(textwrap.dedent(source))
    ast.parse(text)  # always valid Python
    assert port_text(text) == text  # and a second port changes nothing
    return text


def test_two_star_imports_that_map_to_one_home_become_one_keeping_their_comments():
    source = """\
        from tensorpack import *
        # and the tfutils
        from tensorpack.tfutils import *  # everything
        from tensorpack.utils import *
        x = 1
    """
    assert ported(source) == textwrap.dedent(
        """\
        from towerpack.trainer import *
        from towerpack.dataflow import *
        from towerpack.utils import *
        from towerpack.trainer.compat import tfv1
        # and the tfutils
        # everything
        x = 1
        """
    )


def test_a_name_imported_twice_leaves_the_later_list():
    source = """\
        from tensorpack import SimpleTrainer
        from tensorpack.train import SimpleTrainer, TrainConfig
        from tensorpack.train import TrainConfig as TC, SimpleTrainer
        from tensorpack import (
            BatchData,  # batches
            TrainConfig,
        )
        from tensorpack.dataflow import BatchData  # again
    """
    assert ported(source) == textwrap.dedent(
        """\
        from towerpack.trainer import SimpleTrainer
        from towerpack.trainer import TrainConfig
        from towerpack.trainer import TrainConfig as TC
        from towerpack.dataflow import (
            BatchData,  # batches
        )
        # again
        """
    )


def test_module_imports_and_semicolons():
    source = """\
        import tensorpack.dataflow as df; import tensorpack.dataflow as df
        import tensorpack.tfutils.summary as summary, tensorpack.dataflow as df
        y = df.BatchData, summary.add_moving_summary
    """
    assert ported(source) == textwrap.dedent(
        """\
        import towerpack.dataflow as df
        import towerpack.trainer.summary as summary
        y = df.BatchData, summary.add_moving_summary
        """
    )


@pytest.mark.parametrize(
    "source",
    [
        # The file's own duplicates, which the port did not make.
        "import os\nimport os\nfrom tensorpack import *\n",
        # Imports in other blocks: conditional, or local to a function.
        "from tensorpack import BatchData\ntry:\n    from tensorpack import BatchData\nexcept ImportError:\n"
        "    pass\n\n\ndef f():\n    from tensorpack import BatchData\n    return BatchData\n",
    ],
    ids=["own duplicates", "other blocks"],
)
def test_what_the_port_did_not_duplicate_stays(source):
    text = ported(source)
    lines = [line.strip() for line in text.splitlines() if "import" in line]
    assert len(lines) == len([line for line in source.splitlines() if "import" in line]) + (
        3 if "*" in source else 0  # the star import becomes four lines
    )
