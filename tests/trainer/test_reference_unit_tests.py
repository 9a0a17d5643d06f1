# ruff: noqa: E402, I001  (the reference test below keeps its own import order)
"""The reference's ``tensorpack/tfutils/unit_tests.py``, unchanged but for its imports.

Only ``pytestmark`` is ours: the reference ran its tests in TF1's process-wide default graph;
here each test gets a fresh one, so the name-conflict test does not depend on test order.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("graph")


# ---- the reference file, from here on (imports changed only) -------------------------------
# fmt: off
# -*- coding: utf-8 -*-

import unittest
import tensorflow.compat.v1 as tf

from towerpack.trainer import logger
from towerpack.trainer.scope_utils import under_name_scope


class ScopeUtilsTest(unittest.TestCase):

    @under_name_scope(name_scope='s')
    def _f(self, check=True):
        if check:
            assert tf.get_default_graph().get_name_scope().endswith('s')
        return True

    def test_under_name_scope(self):
        self.assertTrue(self._f())
        with self.assertRaises(AssertionError):
            self._f()  # name conflict

    def test_under_name_scope_warning(self):
        x = tf.placeholder(tf.float32, [3])
        tf.nn.relu(x, name='s')
        with self.assertLogs(logger=logger._logger, level='WARNING'):
            self._f(check=False, name_scope='s')


if __name__ == '__main__':
    unittest.main()
# fmt: on
