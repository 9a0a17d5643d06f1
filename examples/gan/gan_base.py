"""What the GAN scripts of this folder share: a model with two losses, the trainers that alternate
between its two networks, and the WGAN-GP gradient penalty. Copy it next to your own GAN script.

- ``GANModelDesc``: ``build_graph`` builds a generator under the variable scope ``gen`` and a
  discriminator (critic) under ``discrim``, sets ``self.d_loss`` and ``self.g_loss`` and calls
  ``collect_variables()`` (``self.d_vars``, ``self.g_vars``).
- ``GANTrainer``: one train op per step: the discriminator's update, then (a control dependency)
  the generator's. On one device, or data-parallel over ``towers`` devices of this process.
- ``SeparateGANTrainer``: separate ops for the two updates; its ``run_step`` runs the
  discriminator's every ``d_period`` steps and the generator's every ``g_period`` steps.
- ``HorovodGANTrainer``, ``HorovodSeparateGANTrainer``: the same with one tower per process
  (``launch --np N``), gradients averaged across the processes by Horovod.
- ``gradient_penalty``: the penalty of Gulrajani et al. (2017) on interpolates of real and fake.
- ``RandomZData``: an endless DataFlow of noise batches, e.g. to sample from a trained generator.

Neither trainer is a ``SingleCostTrainer``: each builds its graph in ``__init__`` and is trained
with ``trainer.train_with_defaults(...)``, or with ``launch_train_with_config(config, trainer)``
for a config without model and data (``AutoResumeTrainConfig`` resumes a GAN like any model).
"""

from __future__ import annotations

import contextlib

import numpy as np

from towerpack.dataflow import RNGDataFlow
from towerpack.trainer import (
    BatchNorm,
    HorovodTrainer,
    ModelDescBase,
    TowerFunc,
    TowerTrainer,
    Trainer,
    TrainTowerContext,
    add_moving_summary,
    apply_default_prefetch,
    argscope,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.devices import ensure_cpu_devices, num_cpu_devices, resolve_devices
from towerpack.trainer.graph_builder import SyncMultiGPUParameterServerBuilder, aggregate_grads
from towerpack.trainer.input_source import FeedfreeInput

__all__ = [
    "GANModelDesc",
    "GANTrainer",
    "HorovodGANTrainer",
    "HorovodSeparateGANTrainer",
    "RandomZData",
    "SeparateGANTrainer",
    "gradient_penalty",
]


class GANModelDesc(ModelDescBase):
    """A GAN: ``build_graph(*inputs)`` sets ``d_loss``, ``g_loss``, ``d_vars`` and ``g_vars``.

    ``optimizer()`` is called twice, once per network, under variable reuse: each network gets
    its own optimizer state (Adam counts each network's updates), while a variable the method
    creates with ``get_variable`` (a ``learning_rate`` for ``ScheduledHyperParamSetter``) is shared.
    """

    d_loss: tf.Tensor
    g_loss: tf.Tensor
    d_vars: list
    g_vars: list

    def collect_variables(self, g_scope: str = "gen", d_scope: str = "discrim") -> None:
        """Set ``g_vars`` and ``d_vars``: the trainable variables under the two variable scopes."""
        get = lambda scope: tfv1.get_collection(tfv1.GraphKeys.TRAINABLE_VARIABLES, f"{scope}/")
        self.g_vars, self.d_vars = get(g_scope), get(d_scope)
        for scope, found in ((g_scope, self.g_vars), (d_scope, self.d_vars)):
            if not found:
                raise ValueError(
                    f"{type(self).__name__}: no trainable variable under the variable scope {scope!r}; "
                    "build the generator in tf.compat.v1.variable_scope('gen') and the discriminator "
                    "in variable_scope('discrim'), or pass the scopes to collect_variables()"
                )

    def build_losses(self, logits_real, logits_fake) -> None:
        """The standard GAN losses (the generator's non-saturating form) from the discriminator's
        logits on real and fake samples; summarized with the discriminator's accuracy."""
        xent = lambda logits, label: tf.reduce_mean(
            tf.nn.sigmoid_cross_entropy_with_logits(logits=logits, labels=tf.fill(tf.shape(logits), label))
        )
        with tf.name_scope("GAN_loss"):
            self.d_loss = tf.multiply(0.5, xent(logits_real, 1.0) + xent(logits_fake, 0.0), name="d_loss")
            self.g_loss = tf.identity(xent(logits_fake, 1.0), name="g_loss")
            right = tf.concat([tf.cast(logits_real > 0, tf.float32), tf.cast(logits_fake < 0, tf.float32)], 0)
            d_accuracy = tf.reduce_mean(right, name="d_accuracy")
        add_moving_summary(self.d_loss, self.g_loss, d_accuracy)

    def optimizer(self):
        raise NotImplementedError(f"{type(self).__name__} must implement optimizer()")

    def get_optimizers(self) -> tuple:
        """``(discriminator's optimizer, generator's optimizer)``, made once."""
        if not hasattr(self, "_optimizers"):
            with tfv1.variable_scope(tfv1.get_variable_scope(), reuse=tfv1.AUTO_REUSE):
                self._optimizers = (self.optimizer(), self.optimizer())
            if not all(isinstance(opt, tfv1.train.Optimizer) for opt in self._optimizers):
                raise TypeError(
                    f"{type(self).__name__}.optimizer() must return a tf.compat.v1.train.Optimizer, "
                    f"got {type(self._optimizers[0]).__name__}"
                )
        return self._optimizers


def gradient_penalty(critic, real, fake, alpha=None):
    """WGAN-GP's penalty ``mean((|grad_x critic(x)| - 1)^2)`` at ``x = real + alpha * (fake - real)``
    (Gulrajani et al. 2017), with ``alpha`` uniform in [0, 1) per sample unless given.

    ``critic`` must score each sample on its own (LayerNorm, not BatchNorm). Returns the penalty
    (named ``gradient_penalty``) and the per-sample gradient norms.
    """
    if alpha is None:
        shape = tf.concat([tf.shape(real)[:1], tf.ones([real.shape.rank - 1], tf.int32)], 0)
        alpha = tfv1.random_uniform(shape, name="alpha")
    interp = real + alpha * (fake - real)
    (grad,) = tf.gradients(critic(interp), [interp])
    # The small constant keeps the penalty's own gradient finite where the critic is flat.
    norm = tf.sqrt(tf.reduce_sum(tf.square(grad), axis=list(range(1, real.shape.rank))) + 1e-10)
    return tf.reduce_mean(tf.square(norm - 1.0), name="gradient_penalty"), norm


class GANTrainer(TowerTrainer):
    """One step: the discriminator's update, then the generator's, both from the same batch.

    Args:
        input: an InputSource, or a DataFlow (read through a ``QueueInput``).
        model: a ``GANModelDesc``.
        towers: data-parallel towers in this process (GPUs, else logical CPU devices). Each tower
            reads its own batch; the variables are shared and each network's gradients averaged
            over the towers, so K towers at batch b train like one at batch K*b.
    """

    def __init__(self, input, model: GANModelDesc, towers: int = 1, **trainer_args):
        super().__init__(**trainer_args)
        apply_d, apply_g = self._build(input, model, towers)
        with tf.name_scope("optimize"):
            self._make_train_ops(apply_d, apply_g)

    def _make_train_ops(self, apply_d, apply_g) -> None:
        """Given functions that build each network's update op, say what a step runs."""
        d_op = apply_d()
        with tf.control_dependencies([d_op]):
            self.train_op = apply_g()

    def _build(self, input, model, towers: int):
        """Build the towers; return ``(apply_d, apply_g)``: functions that build the op applying
        that network's gradients (averaged over the towers and processes)."""
        if not isinstance(model, GANModelDesc):
            raise TypeError(f"{type(self).__name__} trains a GANModelDesc, got {type(model).__name__}")
        if self.hvd is not None and towers != 1:
            raise ValueError(f"{type(self).__name__} trains one tower per process, got towers={towers}")
        self.devices = resolve_devices(towers) if towers != 1 else ()
        input = apply_default_prefetch(input, self)
        if len(self.devices) > 1 and not isinstance(input, FeedfreeInput):
            raise TypeError(
                f"{towers} towers need a feed-free input (QueueInput), got {type(input).__name__}"
            )
        signature = model.get_input_signature()
        if self.measure_input_wait:
            input.measure_wait()
        self.register_callback(input.get_callbacks() if input.setup_done() else input.setup(signature))
        self.tower_func = TowerFunc(model.build_graph, signature)
        d_opt, g_opt = model.get_optimizers()

        def grads(opt, loss, var_list, what: str):
            pairs = opt.compute_gradients(loss, var_list=var_list, colocate_gradients_with_ops=True)
            pairs = [(g, v) for g, v in pairs if g is not None]
            if not pairs:
                raise ValueError(f"{what} does not depend on any of its network's trainable variables")
            return pairs

        def tower_grads():
            self.tower_func(*input.get_input_tensors())
            d_grads = grads(d_opt, model.d_loss, model.d_vars, "d_loss")
            return d_grads, grads(g_opt, model.g_loss, model.g_vars, "g_loss")

        with self._tower_scopes():
            if len(self.devices) > 1:
                # Shared variables spread over the towers' devices by size, as the reference's GAN did.
                builder = SyncMultiGPUParameterServerBuilder(range(len(self.devices)), devices=self.devices)
                per_tower = builder.call_for_each_tower(tower_grads)
            else:
                with TrainTowerContext(""):
                    per_tower = [tower_grads()]

        def apply(index: int, opt, scope: str):
            def build():
                # Under its network's name: the optimizers' own variables (Adam's beta powers) too.
                with tf.name_scope(scope):
                    grads = aggregate_grads([t[index] for t in per_tower], colocation=True)
                    if self.hvd is not None:  # HorovodTrainer's: the average over the processes
                        grads = self.allreduce(grads)
                    return opt.apply_gradients(grads, name="apply")

            return build

        return apply(0, d_opt, "discrim"), apply(1, g_opt, "gen")

    def _tower_scopes(self):
        """Where the towers are built (SeparateGANTrainer changes how BatchNorm updates its averages)."""
        return contextlib.nullcontext()

    def _setup_graph_from_config(self, config) -> None:
        Trainer._setup_graph_from_config(self, config)  # the graph exists: no model or data here

    def initialize(self, session_creator, session_init) -> None:
        session_creator = ensure_cpu_devices(session_creator, num_cpu_devices(self.devices))
        super().initialize(session_creator, session_init)


class SeparateGANTrainer(GANTrainer):
    """Separate train ops for the two networks: ``run_step`` runs the discriminator's every
    ``d_period`` steps and the generator's every ``g_period`` steps (each a hooked run: a step
    that runs both advances ``global_step`` by 2). WGAN trains the critic 5 times per generator
    step: ``g_period=5``. Periods count training steps, so they continue across a resume.

    BatchNorm layers update their moving averages whenever their output is computed (not
    through ``UPDATE_OPS``), so neither op pays for the other network's updates.
    """

    def __init__(self, input, model, d_period: int = 1, g_period: int = 1, towers: int = 1, **trainer_args):
        for name, period in (("d_period", d_period), ("g_period", g_period)):
            if isinstance(period, bool) or not isinstance(period, int) or period < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {period!r}")
        self.d_period, self.g_period = d_period, g_period
        super().__init__(input, model, towers, **trainer_args)

    def _make_train_ops(self, apply_d, apply_g) -> None:
        self.d_min, self.g_min = apply_d(), apply_g()

    def _tower_scopes(self):
        return argscope(BatchNorm, ema_update="internal")

    @property
    def train_step(self) -> int:
        """Training steps run so far, counted from the first step of the first epoch."""
        return (self.epoch_num - 1) * self.steps_per_epoch + self.local_step

    def run_step(self):
        step = self.train_step
        if step % self.d_period == 0:
            self.hooked_sess.run(self.d_min)
        if step % self.g_period == 0:
            self.hooked_sess.run(self.g_min)


class HorovodGANTrainer(GANTrainer, HorovodTrainer):
    """``GANTrainer`` with one tower per process and each network's gradients averaged across the
    processes (``launch --np N script.py``); ``HorovodTrainer``'s arguments go as keywords."""


class HorovodSeparateGANTrainer(SeparateGANTrainer, HorovodTrainer):
    """``SeparateGANTrainer`` across processes, as ``HorovodGANTrainer``; every process runs the
    same ops in the same steps."""


class RandomZData(RNGDataFlow):
    """Endless batches ``[z]``, ``z`` of ``shape`` (e.g. ``(64, z_dim)``), uniform in [-1, 1)."""

    def __init__(self, shape, seed: int | None = None):
        self.shape = tuple(shape)
        self.seed = seed

    def __iter__(self):
        while True:
            yield [self.rng.uniform(-1, 1, size=self.shape).astype(np.float32)]
