"""Data-parallel trainers over the devices of one process: one tower per device.

Each tower reads its own batch from the InputSource (the total batch is the per-tower batch
times the number of towers). Without GPUs the towers run on logical CPU devices, so the same
script trains on a laptop. The older form ``Trainer(config, ...)`` takes the devices from
``TrainConfig(nr_tower=..., tower=...)`` and is trained with ``.train()``.
"""

from __future__ import annotations

from . import logger
from .base import DataFlowInput
from .callbacks.graph import RunOp
from .choice import Choice
from .config import TrainConfig
from .devices import ensure_cpu_devices, num_cpu_devices, resolve_devices
from .graph_builder.asynchronous import AsyncMultiGPUBuilder
from .graph_builder.data_parallel import build_towers
from .graph_builder.parameter_server import PSDevice, SyncMultiGPUParameterServerBuilder
from .graph_builder.replicated import SyncMultiGPUReplicatedBuilder
from .graph_builder.utils import AllReduceMode
from .input_source.base import FeedfreeInput
from .tower_trainer import SingleCostTrainer

__all__ = [
    "AsyncMultiGPUTrainer",
    "MultiGPUTrainerBase",
    "SyncMultiGPUTrainer",
    "SyncMultiGPUTrainerParameterServer",
    "SyncMultiGPUTrainerReplicated",
    "VarStrategy",
]


_UNSET = object()


class VarStrategy(Choice):
    """How ``build_on_multi_tower`` gives towers their variables (``var_strategy=``)."""

    SHARED = "shared"  # every tower uses tower 0's variables
    REPLICATED = "replicated"  # tower k>0 gets local copies in variable scope tower{k}


def _bind_positionals(owner: str, args: tuple, names: tuple, keywords: dict) -> dict:
    """Name the positional ``args`` after ``names``; return them with the keywords that were given."""
    if len(args) > len(names):
        raise TypeError(
            f"{owner}() takes at most {len(names) + 1} positional arguments here "
            f"(gpus or config, then {', '.join(names)}); got {len(args) + 1}"
        )
    given = {k: v for k, v in keywords.items() if v is not _UNSET}
    for name, value in zip(names, args, strict=False):
        if name in given:
            raise TypeError(f"{owner}() got multiple values for argument {name!r}")
        given[name] = value
    return given


class MultiGPUTrainerBase(SingleCostTrainer):
    """Base class of the multi-device trainers.

    Args:
        gpus: a tower count, a list of GPU ids, a list of device names (``"/cpu:1"``), or (older
            form) a ``TrainConfig`` whose ``tower`` list gives the GPU ids.
        gpu_prefetch: copy each tower's batch to its GPU one step ahead (``StagingInput``) when
            a DataFlow is given.

    Attributes: ``devices``, one device name per tower.
    """

    default_input = DataFlowInput.QUEUE

    def __init__(self, gpus, gpu_prefetch: bool = True):
        config = None
        if isinstance(gpus, TrainConfig):
            config, gpus = gpus, gpus.tower
        super().__init__(config)
        self.devices = resolve_devices(gpus)
        self.gpu_prefetch = bool(gpu_prefetch)

    @staticmethod
    def build_on_multi_tower(
        towers, func, devices=None, var_strategy: VarStrategy | str = VarStrategy.SHARED, vs_names=None
    ):
        """Call ``func`` in every tower (older API); returns the list of results.

        Args:
            towers: GPU ids, one per tower.
            func: builds one tower.
            devices: one device per tower (default ``/gpu:{id}``).
            var_strategy: a ``VarStrategy`` or its value: ``"shared"`` (every tower uses tower 0's
                variables) or ``"replicated"`` (tower k>0 gets local copies in variable scope ``tower{k}``).
            vs_names: the variable scope of each tower, overriding the strategy's default.
        """
        replicated = VarStrategy.parse(var_strategy, "var_strategy") is VarStrategy.REPLICATED
        if vs_names is None:
            vs_names = [""] + [f"tower{k}" if replicated else "" for k in range(1, len(towers))]
        return build_towers(towers, func, devices, vs_names, local_replicas=replicated)

    def _make_builder(self):
        raise NotImplementedError

    def _build(self, builder, grad_list, get_opt_fn) -> list:
        """Set ``train_op`` from the towers' gradients; return extra callbacks."""
        raise NotImplementedError

    def _setup_graph(self, input, get_cost_fn, get_opt_fn):
        if len(self.devices) > 1 and not isinstance(input, FeedfreeInput):
            raise TypeError(
                f"{type(input).__name__} feeds one batch that every tower would share; "
                f"{type(self).__name__} needs a feed-free input (e.g. QueueInput(dataflow)) so that "
                "each tower reads its own batch"
            )
        builder = self._make_builder()
        logger.info(
            "Building %d training towers on %s (%s) ...",
            len(self.devices),
            ", ".join(self.devices),
            type(self).__name__,
        )
        grad_list = builder.call_for_each_tower(self._make_get_grad_fn(input, get_cost_fn, get_opt_fn))
        return self._build(builder, grad_list, get_opt_fn)

    def initialize(self, session_creator, session_init) -> None:
        session_creator = ensure_cpu_devices(session_creator, num_cpu_devices(self.devices))
        super().initialize(session_creator, session_init)


class SyncMultiGPUTrainerReplicated(MultiGPUTrainerBase):
    """Every device holds a replica of the variables; gradients are all-reduced and each replica
    applies the same update.

    Replicas start equal (``get_post_init_ops`` copies tower 0's variables after initialization
    or restore) and are copied again after every epoch unless ``broadcast_every_epoch=False``.
    Checkpoints hold tower 0's variables under the names a single-tower model uses.

    Called as ``(gpus, average=True, mode=None)``, or in the older form ``(config, gpu_prefetch=True)``
    of the reference, where the second positional argument is ``gpu_prefetch``.

    Args:
        gpus: see ``MultiGPUTrainerBase``.
        average: average the gradients over the towers (sum them otherwise).
        mode: the ``AllReduceMode``, or its value ``"nccl"``, ``"collective"`` or ``"cpu"``; default
            NCCL between GPUs and ``"cpu"`` between CPU devices.
        gpu_prefetch: see ``MultiGPUTrainerBase``.
        broadcast_every_epoch: default ``BROADCAST_EVERY_EPOCH``.
    """

    BROADCAST_EVERY_EPOCH = True

    def __init__(
        self,
        gpus,
        *args,
        average: bool = _UNSET,
        mode: AllReduceMode | str | None = _UNSET,
        gpu_prefetch: bool = _UNSET,
        broadcast_every_epoch: bool | None = None,
    ):
        # The older form (config, gpu_prefetch=True) and the newer (gpus, average=True, mode=None)
        # give the second positional different meanings.
        names = ("gpu_prefetch",) if isinstance(gpus, TrainConfig) else ("average", "mode")
        given = _bind_positionals(
            type(self).__name__, args, names, {"average": average, "mode": mode, "gpu_prefetch": gpu_prefetch}
        )
        average = given.get("average", True)
        mode = given.get("mode")
        super().__init__(gpus, given.get("gpu_prefetch", True))
        self.average = bool(average)
        self._builder = SyncMultiGPUReplicatedBuilder(
            list(range(len(self.devices))), self.average, mode, self.devices
        )
        self.mode = self._builder.mode
        self.broadcast_every_epoch = (
            self.BROADCAST_EVERY_EPOCH if broadcast_every_epoch is None else bool(broadcast_every_epoch)
        )

    def _make_builder(self):
        return self._builder

    def _build(self, builder, grad_list, get_opt_fn):
        self.train_op, post_init = builder.build(grad_list, get_opt_fn)
        if len(self.devices) == 1:
            return []
        return [RunOp(post_init, run_before=True, run_as_trigger=self.broadcast_every_epoch, verbose=True)]

    @staticmethod
    def get_post_init_ops():
        """The op that copies tower 0's variables to the replicas of the other towers."""
        return SyncMultiGPUReplicatedBuilder.get_post_init_ops()


class SyncMultiGPUTrainerParameterServer(MultiGPUTrainerBase):
    """One shared copy of the variables; the towers' gradients are averaged and applied once.

    Args:
        gpus: see ``MultiGPUTrainerBase``.
        ps_device: a ``PSDevice`` or its value: ``"gpu"``: variables spread over the towers' devices
            by size (``LeastLoadedDeviceSetter``); ``"cpu"``: all on ``/cpu:0``.
        gpu_prefetch: see ``MultiGPUTrainerBase``.
        average: average the gradients over the towers (sum them otherwise).
    """

    def __init__(
        self,
        gpus,
        ps_device: PSDevice | str = PSDevice.GPU,
        gpu_prefetch: bool = True,
        *,
        average: bool = True,
    ):
        super().__init__(gpus, gpu_prefetch)
        self._builder = SyncMultiGPUParameterServerBuilder(
            list(range(len(self.devices))), ps_device, self.devices, average
        )
        self.ps_device = self._builder.ps_device

    def _make_builder(self):
        return self._builder

    def _build(self, builder, grad_list, get_opt_fn):
        self.train_op = builder.build(grad_list, get_opt_fn)
        return []


def SyncMultiGPUTrainer(gpus, gpu_prefetch: bool = True):
    """``SyncMultiGPUTrainerParameterServer(gpus, ps_device='gpu')``, the usual synchronous trainer."""
    return SyncMultiGPUTrainerParameterServer(gpus, ps_device=PSDevice.GPU, gpu_prefetch=gpu_prefetch)


class AsyncMultiGPUTrainer(MultiGPUTrainerBase):
    """Every tower updates the shared variables with its own gradients, without averaging.

    Args:
        gpus: see ``MultiGPUTrainerBase``.
        scale_gradient: multiply each tower's gradients by 1/K (K towers).
        gpu_prefetch: see ``MultiGPUTrainerBase``.
    """

    def __init__(self, gpus, scale_gradient: bool = True, gpu_prefetch: bool = True):
        super().__init__(gpus, gpu_prefetch)
        self.scale_gradient = bool(scale_gradient)
        self._builder = AsyncMultiGPUBuilder(
            list(range(len(self.devices))), self.scale_gradient, self.devices
        )

    def _make_builder(self):
        return self._builder

    def _build(self, builder, grad_list, get_opt_fn):
        self.train_op = builder.build(grad_list, get_opt_fn)
        return []
