"""ScheduledHyperParamSetter against the reference's behaviour, in the style of its own unit test.

The reference tests its setter with a NoOpTrainer (callbacks only, no model) and a parameter
object that records ``{global_step: value}`` whenever the setter writes it. These six cases
check what that test checks (first write, interpolated values, nothing after the schedule,
the start-of-training warning and its absence) and the ``set_at_beginning=False`` advice, with
towerpack's imports.
"""

from __future__ import annotations

import unittest

from towerpack.trainer import NoOpTrainer, ObjAttrParam, ScheduledHyperParamSetter, logger
from towerpack.trainer.compat import tf, tfv1


class RecordedParam:
    """Holds ``value`` (1.0 at first) and records each write at the trainer's global step."""

    def __init__(self):
        self.trainer = None
        self.history = {}
        self._value = 1.0

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, v):
        self.history[self.trainer.global_step] = v
        self._value = v


class ScheduledHyperParamSetterTest(unittest.TestCase):
    def setUp(self):
        self.param = RecordedParam()
        self.graph = tf.Graph()

    def train(self, setter, steps_per_epoch, max_epoch, starting_epoch=1):
        with self.graph.as_default():
            tfv1.get_variable("unused", shape=[])
            trainer = NoOpTrainer()
            self.param.trainer = trainer
            trainer.train_with_defaults(
                callbacks=[setter],
                extra_callbacks=[],
                monitors=[],
                steps_per_epoch=steps_per_epoch,
                max_epoch=max_epoch,
                starting_epoch=starting_epoch,
            )
        return self.param.history

    def setter(self, schedule, **kwargs):
        return ScheduledHyperParamSetter(ObjAttrParam(self.param, "value"), schedule, **kwargs)

    def test_linear_interpolation_by_step(self):
        setter = self.setter([(30, 0.3), (40, 0.4), (50, 0.5)], interp="linear", step_based=True)
        history = self.train(setter, steps_per_epoch=10, max_epoch=50, starting_epoch=20)
        self.assertEqual(min(history), 30)
        self.assertEqual(history[30], 0.3)
        self.assertEqual(history[40], 0.4)
        self.assertEqual(history[45], 0.45)
        self.assertEqual(max(history), 50)  # nothing is set after the last point

    def test_schedule_by_epoch(self):
        history = self.train(self.setter([(10, 0.3), (20, 0.4), (30, 0.5)]), steps_per_epoch=1, max_epoch=50)
        self.assertEqual(min(history), 10)
        self.assertEqual(history, {10: 0.3, 20: 0.4, 30: 0.5})

    def test_start_after_the_schedule(self):
        setter = self.setter([(10, 0.3), (20, 0.4), (30, 0.5)])
        with self.assertLogs(logger=logger.LOGGER, level="WARNING"):
            history = self.train(setter, steps_per_epoch=1, max_epoch=92, starting_epoch=90)
        # Set once, before training, to what the schedule says by epoch 89; then never again.
        self.assertEqual(history, {0: 0.5})

    def test_warning_when_starting_in_the_middle(self):
        setter = self.setter([(10, 0.3), (20, 0.4), (30, 0.5)])
        with self.assertLogs(logger=logger.LOGGER, level="WARNING") as logs:
            history = self.train(setter, steps_per_epoch=1, max_epoch=21, starting_epoch=20)
        self.assertTrue(any("should become 0.3" in line and "epoch 19" in line for line in logs.output))
        self.assertEqual(history, {0: 0.3, 1: 0.4})

    def test_no_warning_when_the_value_matches_the_schedule(self):
        setter = self.setter([(10, 0.3), (20, 1.0), (30, 1.5)])
        with self.assertNoLogs(logger=logger.LOGGER, level="WARNING"):
            history = self.train(setter, steps_per_epoch=1, max_epoch=22, starting_epoch=21)
        self.assertEqual(history, {0: 1.0})  # the value scheduled at epoch 20, set again

    def test_without_set_at_beginning_the_warning_advises_and_nothing_is_set(self):
        setter = self.setter([(10, 0.3), (20, 0.4), (30, 0.5)], set_at_beginning=False)
        with self.assertLogs(logger=logger.LOGGER, level="WARNING") as logs:
            history = self.train(setter, steps_per_epoch=1, max_epoch=21, starting_epoch=20)
        self.assertTrue(any("check how the parameter is initialized" in line for line in logs.output))
        self.assertEqual(history, {1: 0.4})


if __name__ == "__main__":
    unittest.main()
