"""NVIDIA GPUs as the driver's NVML library sees them: count, names, memory, utilization.

Built on ``pynvml`` (NVIDIA's ``nvidia-ml-py`` package), which loads the driver's
``libnvidia-ml.so.1`` when a context starts. Without an NVIDIA driver, entering ``NVMLContext``
raises :class:`NvmlException` saying that this library is missing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NVMLContext"]

#: The driver library NVML calls go to.
NVML_LIBRARY = "libnvidia-ml.so.1"


class NvmlException(RuntimeError):
    """An NVML call failed; ``code`` is NVML's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise ImportError("NVMLContext needs NVIDIA's NVML binding: pip install nvidia-ml-py") from None
    return pynvml


def _call(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, with an NVML error turned into an :class:`NvmlException`."""
    pynvml = _pynvml()
    try:
        return fn(*args)
    except pynvml.NVMLError as e:
        if e.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
            raise NvmlException(
                e.value,
                f"NVML is not available: the NVIDIA driver's library {NVML_LIBRARY} was not found "
                "(this machine has no NVIDIA driver, or it is not on the library path)",
            ) from None
        raise NvmlException(e.value, f"NVML: {fn.__name__} failed: {e}") from None


class NvidiaDevice:
    """One GPU, from :meth:`NVMLContext.device`."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def memory(self) -> dict[str, int]:
        """``{'total', 'free', 'used'}`` in bytes."""
        info = _call(_pynvml().nvmlDeviceGetMemoryInfo, self._handle)
        return {"total": int(info.total), "free": int(info.free), "used": int(info.used)}

    def utilization(self) -> dict[str, int]:
        """``{'gpu', 'memory'}``: the percent of the last sample period in which the GPU computed /
        its memory was read or written."""
        rates = _call(_pynvml().nvmlDeviceGetUtilizationRates, self._handle)
        return {"gpu": int(rates.gpu), "memory": int(rates.memory)}

    def name(self) -> str:
        name = _call(_pynvml().nvmlDeviceGetName, self._handle)
        return name.decode() if isinstance(name, bytes) else str(name)


class NVMLContext:
    """``with NVMLContext() as ctx:`` starts NVML, and shuts it down at the end.

    ``ctx.num_devices()``, ``ctx.devices()``, ``ctx.device(i)`` (an :class:`NvidiaDevice`).
    """

    def __enter__(self) -> NVMLContext:
        _call(_pynvml().nvmlInit)
        return self

    def __exit__(self, *exc: Any) -> None:
        _call(_pynvml().nvmlShutdown)

    def num_devices(self) -> int:
        return int(_call(_pynvml().nvmlDeviceGetCount))

    def devices(self) -> list[NvidiaDevice]:
        return [self.device(i) for i in range(self.num_devices())]

    def device(self, idx: int) -> NvidiaDevice:
        count = self.num_devices()
        if not 0 <= idx < count:
            raise IndexError(f"no GPU {idx}: NVML found {count}")
        return NvidiaDevice(_call(_pynvml().nvmlDeviceGetHandleByIndex, idx))
