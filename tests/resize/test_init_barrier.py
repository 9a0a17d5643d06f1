"""The barrier an elastic job's ranks meet at before hvd.init(), on the launcher's real Gloo store (the
token in the address, as Horovod's client sends it): nobody leaves before the last arrives, and a rank
that never comes is named."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from towerpack.launcher.gloo_store import GlooStore, rank_env
from towerpack.trainer.resize.init_barrier import BarrierError, store_barrier


@pytest.fixture
def store():
    s = GlooStore("127.0.0.1", "a-token-of-the-barrier-test", world=4)
    yield s
    s.close()


def test_ranks_that_start_apart_leave_together_once_the_last_arrives(store):
    env = rank_env(store.address("127.0.0.1"))
    left: dict[int, float] = {}

    def rank(r: int, delay: float) -> None:
        time.sleep(delay)
        store_barrier("start", r, 4, 20.0, env)
        left[r] = time.monotonic()

    began = time.monotonic()
    threads = [threading.Thread(target=rank, args=(r, d)) for r, d in enumerate((0.0, 0.2, 1.2, 0.4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(left) == [0, 1, 2, 3]
    assert min(left.values()) - began >= 1.2  # nobody left before rank 2 came
    assert max(left.values()) - min(left.values()) < 1.0  # the store holds each wait: no 1 s polling


def test_a_rank_that_never_comes_is_named_and_a_wrong_token_is_refused(store):
    env = rank_env(store.address("127.0.0.1"))

    def rank1() -> None:
        with contextlib.suppress(BarrierError):  # rank 0 gives up, so rank 1 never sees "go"
            store_barrier("regroup-3", 1, 3, 2.0, env)

    came = threading.Thread(target=rank1)
    came.start()
    with pytest.raises(BarrierError, match="rank 2 did not reach the barrier 'regroup-3' in 1 s"):
        store_barrier("regroup-3", 0, 3, 1.0, env)  # rank 1 comes, rank 2 never does
    came.join(10)
    with pytest.raises(BarrierError, match="rank 0 did not open the barrier 'x'"):
        store_barrier("x", 1, 2, 1.0, env)
    wrong = dict(
        env, HOROVOD_GLOO_RENDEZVOUS_ADDR=env["HOROVOD_GLOO_RENDEZVOUS_ADDR"].replace("a-token", "b-token")
    )
    with pytest.raises(BarrierError, match="refused the barrier's key 'start-1' \\(HTTP 403\\)"):
        store_barrier("start", 1, 2, 1.0, wrong)
