"""ZMQInput: train from a towerpack.dataflow ZMQ stream (a data server or ``send_dataflow_zmq``)."""

from __future__ import annotations

import threading
import time

from towerpack.dataflow import RemoteDataZMQ, WireLimits
from towerpack.dataflow.wire.codec import DEFAULT_LIMITS
from towerpack.dataflow.wire.credit import HEARTBEAT_S

from .queue import QueueInput
from .utils import logger

__all__ = ["ZMQInput"]

#: The receiving thread wakes up this often to notice that training ended.
POLL_S = 0.5
#: Warn when no datapoint arrived for this long.
WARN_AFTER_S = 30.0


class ZMQInput(QueueInput):
    """Receive datapoints over ZMQ (the package's wire format, no pickle) and queue them for the graph.

    A background thread pulls with ``towerpack.dataflow.RemoteDataZMQ(end_point, hwm, bind)`` and
    enqueues into a TF FIFOQueue, exactly like :class:`QueueInput`; no custom TF op is involved.
    With ``bind=False`` (the default) it connects to a producer that binds, e.g. ``dataflow
    serve``, or to several (``end_point`` a list); several trainer processes reading one producer
    each receive distinct datapoints. The stream is endless (a server's end-of-epoch marks are
    passed over), so ``size()`` is unknown unless given. With ``TrainConfig(exact_resume=True)`` it
    joins its servers in a session and logs the positions the datapoints carry (docs/data_servers.md).

    ``curve_server_key``, ``curve_secret_key``, ``limits``, ``heartbeat`` and ``allow_pickle``
    are those of ``RemoteDataZMQ``: a CURVE server's public key and this client's secret key
    file, the wire limits of received messages, the heartbeat timeout in seconds.
    """

    def __init__(
        self,
        end_point: str | list[str],
        hwm: int = 50,
        bind: bool = False,
        size: int | None = None,
        *,
        curve_server_key=None,
        curve_secret_key=None,
        limits: WireLimits = DEFAULT_LIMITS,
        heartbeat: float | None = HEARTBEAT_S,
        allow_pickle: bool = False,
    ):
        self.end_point = end_point if isinstance(end_point, str) else ", ".join(end_point)
        self._fixed_size = size
        remote = RemoteDataZMQ(
            end_point,
            hwm=hwm,
            bind=bind,
            timeout=POLL_S,
            curve_server_key=curve_server_key,
            curve_secret_key=curve_secret_key,
            limits=limits,
            heartbeat=heartbeat,
            allow_pickle=allow_pickle,
        )
        super().__init__(remote)

    def _size(self) -> int:
        if self._fixed_size is None:
            raise NotImplementedError("ZMQInput reads an endless stream; pass size= for an epoch size")
        return self._fixed_size

    def datapoints(self, stop_event: threading.Event):
        last = time.monotonic()
        warned = False
        log = self._tracker.log if self._tracker is not None else None
        while not stop_event.is_set():
            try:
                for dp in self.ds:
                    last, warned = time.monotonic(), False
                    if log is not None:  # exact resume: the positions of its items, in queue order
                        log.append(self.ds.position_tag)
                    yield dp
            except TimeoutError:
                # Nothing arrived for POLL_S: look at the stop flag, then keep waiting.
                if not warned and time.monotonic() - last > WARN_AFTER_S:
                    logger.warning("ZMQInput: no datapoint from %s for %.0f s", self.end_point, WARN_AFTER_S)
                    warned = True
