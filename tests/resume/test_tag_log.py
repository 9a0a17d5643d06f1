"""TagLog: the tags a consumer took, handed in order to another thread that waits for them."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from towerpack.dataflow.resume.tags import TagLog


def test_pop_joins_the_keys_of_the_oldest_tags_in_order():
    log = TagLog()
    for tag in (5, np.array([7, 8], np.int64), None, 9):
        log.append(tag)
    assert log.pop(3).tolist() == [5, 7, 8]
    assert (log.appended, log.popped, len(log)) == (4, 3, 1)
    assert log.pop(1).tolist() == [9]
    assert log.pop(0).tolist() == []


def test_a_pop_waits_for_tags_appended_later_and_times_out_naming_them():
    log = TagLog()
    with pytest.raises(TimeoutError, match=r"the tags of 2 datapoints did not come within 0\.05 s"):
        log.pop(2, timeout=0.05)

    def append_later():
        time.sleep(0.2)
        log.append(1)
        log.append(2)

    thread = threading.Thread(target=append_later)
    thread.start()
    start = time.monotonic()
    assert log.pop(2, timeout=10).tolist() == [1, 2]
    assert time.monotonic() - start < 5
    thread.join(timeout=10)


def test_every_waiting_pop_is_woken_by_the_append_it_waits_for():
    """The consumer appends a little slower than another thread pops one tag at a time, so that the
    popping thread waits for almost every tag: the pops end with the appends (an append that did not
    wake a waiting pop would leave it waiting its whole timeout)."""
    log, n = TagLog(), 500

    def consume():
        for k in range(n):
            time.sleep(0.0002)
            log.append(k)

    thread = threading.Thread(target=consume)
    thread.start()
    start = time.monotonic()
    got = [int(log.pop(1, timeout=30)[0]) for _ in range(n)]
    elapsed = time.monotonic() - start
    thread.join(timeout=10)
    assert got == list(range(n))
    assert (log.appended, log.popped, len(log)) == (n, n, 0)
    assert elapsed < 10
