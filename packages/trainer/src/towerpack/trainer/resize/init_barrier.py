"""A barrier in the launcher's Gloo store that the ranks of an elastic job meet at before ``hvd.init()``.

Horovod's Gloo timeout (``HOROVOD_GLOO_TIMEOUT_SECONDS``) bounds both its rendezvous and every collective.
A job that resizes in place keeps it short, so that a step waiting for a silent peer fails soon after the
launcher has noticed the peer gone; but ranks start seconds apart (TensorFlow's import, the graph), which
a short timeout would fail at ``hvd.init()``. So they first meet here, with a timeout of their own: rank 0
waits until every rank has put its key, then puts ``go``, which the others wait for (about two requests per
rank, whatever the number of ranks). The store (see ``towerpack.launcher.gloo_store``) is emptied before
every attempt and every resize, and the barrier's ``tag`` names the generation.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping

__all__ = ["BarrierError", "store_barrier"]

_SCOPE = "towerpack-barrier"
# Horovod's client talks to the store directly; an http_proxy variable must not divert our requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class BarrierError(RuntimeError):
    """The ranks did not all reach the barrier in time."""


def _url(env: Mapping[str, str], key: str) -> str:
    # Built as Horovod builds its own: the address carries the store's token after its port.
    return (
        f"http://{env['HOROVOD_GLOO_RENDEZVOUS_ADDR']}:{env['HOROVOD_GLOO_RENDEZVOUS_PORT']}/{_SCOPE}/{key}"
    )


def _refused(key: str, e: urllib.error.HTTPError) -> BarrierError:
    return BarrierError(f"the launcher's store refused the barrier's key {key!r} (HTTP {e.code})")


def _put(env: Mapping[str, str], key: str) -> None:
    request = urllib.request.Request(_url(env, key), b"1", method="PUT")
    try:
        with _OPENER.open(request, timeout=10.0):
            pass
    except urllib.error.HTTPError as e:  # 403: not this job's token
        raise BarrierError(
            f"the launcher's store refused the barrier's key {key!r} (HTTP {e.code})"
        ) from None


def _wait(env: Mapping[str, str], key: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with _OPENER.open(_url(env, key), timeout=10.0):  # the store holds a GET until the key comes
                return True
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise BarrierError(
                    f"the launcher's store refused the barrier's key {key!r} (HTTP {e.code})"
                ) from None
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    return False


def store_barrier(
    tag: str, rank: int, size: int, timeout: float, env: Mapping[str, str] | None = None
) -> None:
    """Return once all ``size`` ranks have called this with ``tag``; :class:`BarrierError` after
    ``timeout`` seconds."""
    env = os.environ if env is None else env
    deadline = time.monotonic() + timeout
    _put(env, f"{tag}-{rank}")
    if rank == 0:
        for r in range(1, size):
            if not _wait(env, f"{tag}-{r}", deadline):
                raise BarrierError(f"rank {r} did not reach the barrier {tag!r} in {timeout:g} s")
        _put(env, f"{tag}-go")
    elif not _wait(env, f"{tag}-go", deadline):
        raise BarrierError(f"rank 0 did not open the barrier {tag!r} before hvd.init() within {timeout:g} s")
