"""Loop semantics of the base Trainer: callback order and counts, stopping, errors, counters."""

import pytest

from towerpack.trainer import Callback, NoOpTrainer, StopTraining, Trainer
from towerpack.trainer.compat import tf, tfv1

pytestmark = pytest.mark.usefixtures("graph")


class Recorder(Callback):
    """Records every hook call as (event, epoch_num, local_step, global_step)."""

    def __init__(self, chief_only=True):
        self.events = []
        self._chief_only = chief_only

    def _rec(self, name):
        t = self.trainer
        self.events.append((name, t.epoch_num, t.local_step, t.global_step))

    def _setup_graph(self):
        self.events.append(("setup_graph",))

    def _before_train(self):
        self._rec("before_train")

    def _before_epoch(self):
        self._rec("before_epoch")

    def _before_run(self, ctx):
        self._rec("before_run")

    def _after_run(self, ctx, values):
        self._rec("after_run")

    def _trigger_step(self):
        self._rec("trigger_step")

    def _after_epoch(self):
        self._rec("after_epoch")

    def _trigger(self):
        self._rec("trigger")

    def _after_train(self):
        self._rec("after_train")

    def names(self):
        return [e[0] for e in self.events]


def counter_trainer(cls=Trainer):
    """A custom trainer in the understand-trainer style: graph built first, then train_op set."""
    trainer = cls()
    var = tfv1.get_variable("counter", initializer=tf.constant(0, tf.int64), trainable=False)
    trainer.train_op = tfv1.assign_add(var, 1).op
    trainer.counter = var
    return trainer


def test_callback_order_and_counts():
    trainer = counter_trainer()
    rec = Recorder()
    trainer.train(callbacks=[rec], monitors=[], steps_per_epoch=2, max_epoch=2)

    step = ["before_run", "after_run", "trigger_step"]
    epoch = ["before_epoch", *step, *step, "after_epoch", "trigger"]
    assert rec.names() == ["setup_graph", "before_train", *epoch, *epoch, "after_train"]
    # Counters as callbacks see them: epochs are 1-based, local_step 0-based, global_step counts runs.
    assert rec.events[1] == ("before_train", 0, -1, 0)
    assert rec.events[2] == ("before_epoch", 1, -1, 0)
    assert rec.events[3] == ("before_run", 1, 0, 0)
    assert rec.events[4] == ("after_run", 1, 0, 1)
    assert rec.events[10] == ("trigger", 1, 1, 2)
    assert rec.events[-2] == ("trigger", 2, 1, 4)
    assert trainer.global_step == 4
    assert trainer.sess is not None and trainer.hooked_sess is not None


def test_epochs_run_from_starting_epoch_to_max_epoch_inclusive():
    trainer = counter_trainer()
    rec = Recorder()
    trainer.train(callbacks=[rec], monitors=[], steps_per_epoch=3, starting_epoch=3, max_epoch=5)
    assert [e[1] for e in rec.events if e[0] == "trigger"] == [3, 4, 5]
    assert trainer.global_step == 9
    assert (trainer.starting_epoch, trainer.max_epoch, trainer.steps_per_epoch) == (3, 5, 3)


def test_zero_steps_per_epoch_still_runs_epoch_callbacks():
    trainer = counter_trainer()
    rec = Recorder()
    trainer.train(callbacks=[rec], monitors=[], steps_per_epoch=0, max_epoch=2)
    assert rec.names().count("trigger") == 2
    assert "before_run" not in rec.names()
    assert trainer.global_step == 0


class StopAt(Callback):
    def __init__(self, step, exc=StopTraining):
        self.step = step
        self.exc = exc

    def _trigger_step(self):
        if self.trainer.global_step == self.step:
            raise self.exc("stop here")


def test_stop_training_ends_cleanly_and_runs_after_train():
    trainer = counter_trainer()
    rec = Recorder()
    trainer.train(callbacks=[StopAt(4), rec], monitors=[], steps_per_epoch=3, max_epoch=10)
    assert trainer.global_step == 4
    assert rec.names()[-1] == "after_train"
    assert rec.names().count("trigger") == 1  # epoch 2 never ended
    with pytest.raises(RuntimeError, match="closed Session"):
        trainer.sess.run(trainer.counter)


def test_request_stop_from_a_hook_ends_training_before_the_next_step():
    class RequestStop(Callback):
        def _after_run(self, ctx, values):
            if self.trainer.global_step == 2:
                ctx.request_stop()

    trainer = counter_trainer()
    rec = Recorder()
    trainer.train(callbacks=[RequestStop(), rec], monitors=[], steps_per_epoch=5, max_epoch=3)
    assert trainer.global_step == 2
    assert "after_epoch" not in rec.names()
    assert rec.names()[-1] == "after_train"


def test_exhausted_input_ends_training_cleanly():
    trainer = Trainer()
    iterator = tfv1.data.make_one_shot_iterator(tf.data.Dataset.range(5))
    trainer.train_op = iterator.get_next()
    rec = Recorder()
    trainer.train(callbacks=[rec], monitors=[], steps_per_epoch=3, max_epoch=10)
    # The sixth run raised OutOfRangeError; five completed.
    assert trainer.global_step == 5
    assert rec.names()[-1] == "after_train"


def test_other_errors_propagate_with_the_step_they_happened_at():
    class Fail(Trainer):
        def run_step(self):
            if self.global_step == 4:
                raise ValueError("bad batch")
            self.hooked_sess.run(self.train_op)

    trainer = counter_trainer(Fail)
    rec = Recorder()
    with pytest.raises(ValueError, match="bad batch") as info:
        trainer.train(callbacks=[rec], monitors=[], steps_per_epoch=3, max_epoch=10)
    assert "epoch 2, local_step 1, global_step 4" in "\n".join(info.value.__notes__)
    assert rec.names()[-1] == "after_train"


def test_keyboard_interrupt_propagates_after_cleanup():
    trainer = counter_trainer()
    rec = Recorder()
    with pytest.raises(KeyboardInterrupt):
        trainer.train(
            callbacks=[StopAt(2, KeyboardInterrupt), rec], monitors=[], steps_per_epoch=3, max_epoch=3
        )
    assert rec.names()[-1] == "after_train"
    with pytest.raises(RuntimeError, match="closed Session"):
        trainer.sess.run(trainer.counter)


def test_a_failing_after_train_does_not_skip_the_others():
    class BadCleanup(Callback):
        def _after_train(self):
            raise OSError("disk gone")

    trainer = counter_trainer()
    rec = Recorder()
    trainer.train(callbacks=[BadCleanup(), rec], monitors=[], steps_per_epoch=1, max_epoch=1)
    assert rec.names()[-1] == "after_train"


class ReadGS(Callback):
    """Records (trainer.global_step, the global_step variable, the counter variable) per epoch."""

    def __init__(self):
        self.seen = []

    def _trigger(self):
        sess = self.trainer.sess
        gs, counter = sess.run([tfv1.train.get_global_step(), self.trainer.counter])
        self.seen.append((self.trainer.global_step, int(gs), int(counter)))


def test_global_step_counts_hooked_runs_only_and_matches_the_variable():
    class TwoRuns(Trainer):
        def run_step(self):
            self.hooked_sess.run(self.train_op)
            self.hooked_sess.run(self.train_op)
            self.sess.run(self.train_op)  # not hooked: not a global step

    trainer = counter_trainer(TwoRuns)
    read = ReadGS()
    trainer.train(callbacks=[read], monitors=[], steps_per_epoch=3, max_epoch=2)
    assert read.seen == [(6, 6, 9), (12, 12, 18)]
    assert trainer.local_step == 2


def test_global_step_variable_follows_trainer_counter():
    trainer = counter_trainer()
    read = ReadGS()
    trainer.train(callbacks=[read], monitors=[], steps_per_epoch=3, max_epoch=2)
    assert read.seen == [(3, 3, 3), (6, 6, 6)]


def test_chief_only_callbacks_are_skipped_on_other_processes():
    class Worker(Trainer):
        is_chief = False

    trainer = counter_trainer(Worker)
    chief_only, everywhere = Recorder(), Recorder(chief_only=False)
    assert trainer.register_callback(chief_only) is False
    trainer.train(callbacks=[everywhere], monitors=[], steps_per_epoch=1, max_epoch=1)
    assert chief_only.events == []
    assert everywhere.names()[-1] == "after_train"


def test_registering_after_setup_and_training_twice_are_errors():
    trainer = counter_trainer()
    trainer.train(callbacks=[], monitors=[], steps_per_epoch=1, max_epoch=1)
    with pytest.raises(RuntimeError, match="after the callbacks were set up"):
        trainer.register_callback(Recorder())
    with pytest.raises(RuntimeError, match="only be called once"):
        trainer.train(callbacks=[], monitors=[], steps_per_epoch=1, max_epoch=1)


def test_trainer_without_train_op_says_what_to_do():
    trainer = Trainer()
    tfv1.get_variable("v", [1])
    with pytest.raises(RuntimeError, match=r"set trainer\.train_op or override run_step"):
        trainer.train(callbacks=[], monitors=[], steps_per_epoch=1, max_epoch=1)


def test_monitor_in_callbacks_is_rejected():
    from towerpack.trainer import ScalarPrinter

    trainer = counter_trainer()
    with pytest.raises(TypeError, match="monitors="):
        trainer.train(callbacks=[ScalarPrinter()], monitors=[], steps_per_epoch=1, max_epoch=1)


def test_noop_trainer_runs_only_callbacks():
    from support.trainer_models import ArrayBatches, LinearRegression, linear_data
    from towerpack.trainer import TrainConfig, launch_train_with_config

    weights = []

    class ReadW(Callback):
        def _trigger(self):
            weights.append(self.trainer.sess.run(self.trainer.towers[0].get_variable("w")).tolist())

    x, y, _ = linear_data(64)
    trainer = NoOpTrainer()
    config = TrainConfig(
        model=LinearRegression(),
        dataflow=ArrayBatches(x, y, batch_size=16),
        max_epoch=2,
        callbacks=[ReadW()],
        monitors=[],
    )
    launch_train_with_config(config, trainer)
    assert trainer.global_step == 8
    assert weights == [[0.0] * 4, [0.0] * 4]
