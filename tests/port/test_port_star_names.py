"""Names a ported file uses that its tensorpack star imports gave and towerpack's do not: reported with
the reference map's advice where it knows the name, left alone where something else may bind it."""

from __future__ import annotations

import textwrap

from towerpack.port.cli import report
from towerpack.port.codemod import port_source
from towerpack.port.findings import Kind


def findings(source: str, path: str = "train.py") -> list[tuple[int, Kind, str]]:
    ported = port_source(textwrap.dedent(source), path)
    found, _ = report([(path, ported)])
    return [(f.line, f.kind, f.message) for f in found if f.kind in (Kind.NO_HOME, Kind.UNDEFINED)]


OLDER_SCRIPT = """\
from tensorpack import *
from tensorpack.tfutils.symbolic_functions import *


class Model(ModelDesc):
    def _build_graph(self, inputs):
        image, label = inputs
        logits = FullyConnected("fc", image, 10)
        wrong = prediction_incorrect(logits, label)
        lr = get_scalar_var("learning_rate", 0.1, summary=True)
        cost = tf.reduce_mean(wrong, name="cost") + symbolic_functions.rms(logits)
        return cost + np.float32(lr) + tf.constant(1.0)
"""


def test_names_an_older_star_import_gave_are_reported_with_what_to_write_instead():
    # Ported, the file starts with four star imports and `tfv1` in place of two lines: 3 more.
    assert findings(OLDER_SCRIPT) == [
        (
            14,
            Kind.NO_HOME,
            "name `symbolic_functions` is not defined: `from tensorpack import *` gave it in tensorpack "
            "<0.11; use from towerpack.trainer import symbolic_functions",
        ),
        (
            14,
            Kind.NO_HOME,
            "name `tf` is not defined: `from tensorpack.tfutils.symbolic_functions import *` gave it in "
            "tensorpack <0.11; use import tensorflow.compat.v1 as tf (also line 15)",
        ),
        (
            15,
            Kind.NO_HOME,
            "name `np` is not defined: `from tensorpack.tfutils.symbolic_functions import *` gave it in "
            "tensorpack <0.11; use import numpy as np",
        ),
    ]
    # prediction_incorrect, get_scalar_var, ModelDesc and FullyConnected come from the star imports.


def test_an_unknown_name_is_reported_as_undefined_naming_the_star_imports():
    source = """\
        from tensorpack.dataflow import *

        df = BatchData(DataFromList([[1]]), 1)
        again = BatchDat(df, 2) or BatchDat
    """
    assert findings(source) == [
        (
            4,
            Kind.UNDEFINED,
            "name `BatchDat` is not defined: neither this file nor its star imports (towerpack.dataflow) "
            "bind it; if a tensorpack star import gave it, import it from where it lives now",
        )
    ]


def test_names_bound_in_any_way_are_not_reported():
    source = """\
        from tensorpack.dataflow import *
        import numpy as np


        def f(a, *args, b=1, **kw) -> "Forward":
            global G
            G = [x for x in a if (y := x)]
            return later, G, y, args, kw, print, __file__, __name__, lambda z: z


        try:
            unicode
        except NameError:
            unicode = str
        later = 3


        class C:
            attr = 1

            def m(self):
                return C.attr, np.zeros(1), DataFromList
        with open(__file__) as handle:
            pass
        for i, (j, k) in enumerate([(1, 2)]):
            pass
        match handle:
            case [first, *rest]:
                pass
    """
    assert findings(source) == []


def test_files_where_a_name_may_come_from_elsewhere_are_left_alone():
    another_star = "from tensorpack import *\nfrom mylib import *\nx = something\n"
    dynamic = "from tensorpack import *\nglobals()['made'] = 1\nx = made\n"
    no_star = "from tensorpack import BatchData\nx = undefined_but_not_ours\n"
    relative_star = "from tensorpack import *\nfrom .helpers import *\nx = helper\n"
    for source in (another_star, dynamic, no_star, relative_star):
        assert findings(source) == [], source
