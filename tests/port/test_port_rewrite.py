"""`towerpack port`'s rewrites on small sources: exact expected output, formatting and comments kept,
and a second port changing nothing (for every source here and for random mixes of them)."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from towerpack.port.codemod import port_source, port_text


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# (tensorpack source, the ported source)
CASES = {
    "names of one module that live apart get one line each, comments kept": (
        """
        # the imports
        from tensorpack import BatchData, SimpleTrainer as ST, logger  # noqa: F401
        x = 1  # not an import
        """,
        """
        # the imports
        from towerpack.dataflow import BatchData  # noqa: F401
        from towerpack.trainer import SimpleTrainer as ST  # noqa: F401
        from towerpack.utils import logger  # noqa: F401
        x = 1  # not an import
        """,
    ),
    "a parenthesized import split keeps one name a line and its comment; no home stays": (
        """
        from tensorpack import (
            BatchData,  # batches
            SimpleTrainer,
            CaffeLMDB,
        )
        """,
        """
        from towerpack.dataflow import (
            BatchData,  # batches
        )
        from towerpack.trainer import (
            SimpleTrainer,
        )
        from tensorpack import (
            CaffeLMDB,
        )
        """,
    ),
    "names that stay together keep the statement as written": (
        """
        from tensorpack.dataflow import (  # readers
            BatchData,
            MapData,  # mapping
        )
        """,
        """
        from towerpack.dataflow import (  # readers
            BatchData,
            MapData,  # mapping
        )
        """,
    ),
    "star imports": (
        """
        from tensorpack import *
        from tensorpack.tfutils.summary import *
        from tensorpack.dataflow.imgaug import *
        """,
        """
        from towerpack.trainer import *
        from towerpack.dataflow import *
        from towerpack.utils import *
        from towerpack.trainer.compat import tfv1
        from towerpack.trainer.summary import *
        from towerpack.dataflow.imgaug import *
        """,
    ),
    "import a module as a name": (
        """
        import tensorpack.tfutils.symbolic_functions as symbf
        import tensorpack.utils.viz as tpviz

        x = symbf.rms(tpviz.stack_patches)
        """,
        """
        import towerpack.trainer.symbolic_functions as symbf
        import towerpack.utils.viz as tpviz

        x = symbf.rms(tpviz.stack_patches)
        """,
    ),
    "import tensorpack.x, then dotted uses": (
        """
        import tensorpack.tfutils


        def cost(x):
            tensorpack.tfutils.summary.add_moving_summary(x)
            return tensorpack.tfutils.get_global_step_var()
        """,
        """
        import towerpack.trainer
        import towerpack.trainer.summary


        def cost(x):
            towerpack.trainer.summary.add_moving_summary(x)
            return towerpack.trainer.get_global_step_var()
        """,
    ),
    "import tensorpack as tp: uses of names that moved are written out; a parameter tp is not": (
        """
        import tensorpack as tp

        df = tp.BatchData(tp.dataset.Mnist("train"), 32)
        trainer = tp.SimpleTrainer()
        tp.logger.info("start")


        def f(tp):
            return tp.BatchData
        """,
        """
        import towerpack.trainer as tp
        import towerpack.dataflow
        import towerpack.dataflow.dataset
        import towerpack.utils.logger

        df = towerpack.dataflow.BatchData(towerpack.dataflow.dataset.Mnist("train"), 32)
        trainer = tp.SimpleTrainer()
        towerpack.utils.logger.info("start")


        def f(tp):
            return tp.BatchData
        """,
    ),
    "modules imported by name": (
        """
        from tensorpack.utils import logger, viz, fs
        from tensorpack.tfutils import summary, optimizer, gradproc
        from tensorpack.tfutils import argscope, SmartInit, model_utils
        from tensorpack.models import regularize
        from tensorpack import tfv1 as tf

        logger.info(regularize.Dropout)
        """,
        """
        from towerpack.utils import logger, viz, fs
        from towerpack.trainer import summary, optimizer, gradproc
        from towerpack.trainer import argscope, SmartInit, model_utils
        from towerpack.trainer import models as regularize
        from towerpack.trainer.compat import tfv1 as tf

        logger.info(regularize.Dropout)
        """,
    ),
    "imports inside a function and a one-line suite": (
        """
        def main():
            import tensorpack.utils.viz as viz
            from tensorpack import QueueInput, TFDatasetInput, logger
            return viz, QueueInput


        if True: from tensorpack import BatchData, logger
        """,
        """
        def main():
            import towerpack.utils.viz as viz
            from towerpack.trainer import QueueInput, TFDatasetInput
            from towerpack.utils import logger
            return viz, QueueInput


        if True: from towerpack.dataflow import BatchData; from towerpack.utils import logger
        """,
    ),
    "TensorFlow 1 imports": (
        """
        import tensorflow as tf
        from tensorflow import keras
        from tensorflow.keras.layers import Dense
        from tensorflow import contrib, placeholder
        from tensorflow.python.training import moving_averages
        import tensorflow.compat.v1 as tfv1
        import tensorflow
        """,
        """
        import tensorflow.compat.v1 as tf
        import tf_keras as keras
        from tf_keras.layers import Dense
        from tensorflow import contrib
        from tensorflow.compat.v1 import placeholder
        from tensorflow.python.training import moving_averages
        import tensorflow.compat.v1 as tfv1
        import tensorflow
        """,
    ),
    "code without tensorpack or TensorFlow is left byte for byte": (
        """
        import os  # the os
        from . import tensorpack_helpers
        from .tensorpack import thing

        x = os.path.join("tensorpack", thing)
        """,
        """
        import os  # the os
        from . import tensorpack_helpers
        from .tensorpack import thing

        x = os.path.join("tensorpack", thing)
        """,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rewrite(case):
    before, after = (src(s) for s in CASES[case])
    assert port_text(before) == after
    assert port_text(after) == after, "a second port changes nothing"


def test_windows_line_endings_and_a_latin_1_file_are_kept():
    code = "# -*- coding: latin-1 -*-\r\n# caf\xe9\r\nfrom tensorpack import BatchData, logger\r\n".encode(
        "latin-1"
    )
    ported = port_source(code)
    assert ported.source == (
        "# -*- coding: latin-1 -*-\r\n# caf\xe9\r\n"
        "from towerpack.dataflow import BatchData\r\nfrom towerpack.utils import logger\r\n"
    ).encode("latin-1")


# Statements to mix: every source above and its port, line by line where a line stands alone.
FRAGMENTS = sorted(
    {src(s) for pair in CASES.values() for s in pair}
    | {
        "import tensorpack\ntensorpack.dataflow.BatchData(tensorpack.SmartInit)\n",
        "from tensorpack.dataflow import BatchData, CaffeLMDB, dataset\n",
        "import tensorpack as tp\nx = tp.CaffeLMDB\n",
        "from tensorpack.graph_builder.model_desc import ModelDesc\n",
        "from tensorpack.tfutils import tower\nc = tower.TowerContext\n",
        "from tensorpack import imgaug as aug\naug.Flip(horiz=True)\n",
        "assert tf.test.is_gpu_available()\n",
        "import tensorflow as tf\ntf.layers.conv2d(x, 3, 3)\n",
    }
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6))
def test_porting_twice_is_porting_once(fragments):
    once = port_text("".join(fragments))
    assert port_text(once) == once


def test_relative_imports_of_the_references_own_files_name_its_modules():
    # The unit tests its wheel bundles sit in its package tree and import their neighbours.
    code = src(
        """
        from .conv2d import Conv2DTranspose
        from ..utils import logger
        from .. import dataflow
        from ...elsewhere import thing
        """
    )
    ported = port_source(code, "src/tensorpack/models/models_test.py").source.decode()
    assert ported == src(
        """
        from towerpack.trainer.models import Conv2DTranspose
        from towerpack.utils import logger
        from towerpack import dataflow
        from ...elsewhere import thing
        """
    )
    # A project's own relative imports are its own business.
    assert port_source(code, "myproject/models/test.py").source.decode() == code


@pytest.mark.parametrize(
    ("written", "ported"),
    [
        ('mock.patch("tensorpack.utils.logger.warning")', 'mock.patch("towerpack.utils.logger.warning")'),
        ("importlib.import_module('tensorpack.dataflow')", "importlib.import_module('towerpack.dataflow')"),
        ('x = "tensorpack is great"', 'x = "tensorpack is great"'),
        ('x = "tensorpack.dataflow.CaffeLMDB"', 'x = "tensorpack.dataflow.CaffeLMDB"'),
        ('x = r"tensorpack.dataflow"', 'x = r"tensorpack.dataflow"'),
    ],
)
def test_strings_that_are_a_reference_path_move_with_it(written, ported):
    code = f"import tensorpack.dataflow\n{written}\n"
    assert port_text(code) == f"import towerpack.dataflow\n{ported}\n"
