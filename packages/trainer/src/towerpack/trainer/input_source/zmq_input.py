"""ZMQInput: train from a towerpack.dataflow ZMQ stream (a data server or ``send_dataflow_zmq``)."""

from __future__ import annotations

import threading
import time

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
    serve``; several trainer processes reading one producer each receive distinct datapoints.
    The stream is endless, so ``size()`` is unknown unless given.
    """

    def __init__(self, end_point: str, hwm: int = 50, bind: bool = False, size: int | None = None):
        from towerpack.dataflow import RemoteDataZMQ

        self.end_point = end_point
        self._fixed_size = size
        super().__init__(RemoteDataZMQ(end_point, hwm=hwm, bind=bind, timeout=POLL_S))

    def _size(self) -> int:
        if self._fixed_size is None:
            raise NotImplementedError("ZMQInput reads an endless stream; pass size= for an epoch size")
        return self._fixed_size

    def datapoints(self, stop_event: threading.Event):
        last = time.monotonic()
        warned = False
        while not stop_event.is_set():
            try:
                for dp in self.ds:
                    last, warned = time.monotonic(), False
                    yield dp
            except TimeoutError:
                # Nothing arrived for POLL_S: look at the stop flag, then keep waiting.
                if not warned and time.monotonic() - last > WARN_AFTER_S:
                    logger.warning("ZMQInput: no datapoint from %s for %.0f s", self.end_point, WARN_AFTER_S)
                    warned = True
