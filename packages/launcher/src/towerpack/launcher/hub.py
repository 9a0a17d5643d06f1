"""The hub: one thread that serves every control connection of a launcher, and ``Channel``, one live
connection on it (messages in, heartbeats both ways, a silent or broken peer reported once).

Node 0 talks to every other node at once. With a thread per connection and one more for its
heartbeats, 1,000 nodes meant 2,000 threads waking every second, and handshakes that a busy node 0
answered too late. The hub is a selector loop instead: it accepts connections, reads every socket
that has data and dispatches its complete messages, and every ``TICK_S`` it sends the heartbeats that
are due, all in one pass, and finds the peers that went silent. Handlers run on the hub's thread and
must not block (they put events on a queue); sending is allowed from any thread.
"""

from __future__ import annotations

import collections
import contextlib
import selectors
import socket
import threading
import time
import traceback
from collections.abc import Callable
from typing import Protocol

from towerpack.launcher.errors import Closed, ProtocolError
from towerpack.launcher.protocol import Connection, Heartbeat, Loss, LossReason, Message

#: Seconds between the hub's passes over its handlers (heartbeats due, silent peers, deadlines).
TICK_S = 0.1


class Handler(Protocol):
    """What the hub serves: a socket to read when it is ready, and a clock."""

    def fileno(self) -> int: ...

    def on_readable(self) -> None: ...

    def on_tick(self, now: float) -> None:
        """Called every ``TICK_S`` with ``time.monotonic()``."""


class Hub:
    """A daemon thread running a selector over its handlers' sockets (see the module's docstring).

    ``add``/``remove``/``call`` may be used from any thread: they run on the hub's thread, in order.
    A handler that raises is dropped (its traceback printed), never the hub.
    """

    _default: Hub | None = None
    _default_lock = threading.Lock()

    def __init__(self, name: str = "launch-hub"):
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._calls: collections.deque[Callable[[], None]] = collections.deque()
        self._handlers: dict[Handler, int] = {}  # handler -> its descriptor when added
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @classmethod
    def default(cls) -> Hub:
        """This process's hub, started on first use."""
        with cls._default_lock:
            if cls._default is None:
                cls._default = cls()
            return cls._default

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the hub's thread (at once if this is it)."""
        if self.on_thread():
            fn()
            return
        self._calls.append(fn)
        with contextlib.suppress(BlockingIOError):  # else a wake-up is pending already
            self._wake_w.send(b"\0")

    def add(self, handler: Handler) -> None:
        self.call(lambda: self._add(handler))

    def remove(self, handler: Handler, close: socket.socket | None = None) -> None:
        """Stop serving ``handler``; then close ``close`` (its socket) if given. A socket is closed only
        here, after it left the selector, so that its descriptor cannot be reused while registered."""
        self.call(lambda: self._remove(handler, close))

    def _add(self, handler: Handler) -> None:
        fd = handler.fileno()
        if fd < 0 or handler in self._handlers:
            return
        self._sel.register(fd, selectors.EVENT_READ, handler)
        self._handlers[handler] = fd

    def _remove(self, handler: Handler, close: socket.socket | None) -> None:
        fd = self._handlers.pop(handler, None)
        if fd is not None:
            self._sel.unregister(fd)
        if close is not None:
            close.close()

    def _run(self) -> None:
        next_tick = time.monotonic() + TICK_S
        while True:
            for key, _ in self._sel.select(max(next_tick - time.monotonic(), 0.0)):
                if key.data is None:
                    self._run_calls()
                elif key.data in self._handlers:  # not removed by an earlier handler of this pass
                    self._guard(key.data, key.data.on_readable)
            now = time.monotonic()
            if now >= next_tick:
                next_tick = now + TICK_S
                for handler in list(self._handlers):
                    self._guard(handler, handler.on_tick, now)

    def _run_calls(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(4096):
                pass
        while self._calls:
            fn = self._calls.popleft()
            try:
                fn()
            except Exception:
                traceback.print_exc()

    def _guard(self, handler: Handler, fn: Callable, *args) -> None:
        try:
            fn(*args)
        except Exception:
            traceback.print_exc()
            self._remove(handler, None)


class Channel:
    """An authenticated connection in use, served by a hub: heartbeats go out every ``interval``
    seconds; every other message is handed to ``on_message``; ``on_lost(Loss)`` is called once when the
    peer closes, breaks the protocol or stays silent for ``timeout`` seconds. Both callbacks run on the
    hub's thread and must not block."""

    def __init__(
        self,
        conn: Connection,
        interval: float,
        timeout: float,
        on_message: Callable[[Message], None],
        on_lost: Callable[[Loss], None],
        hub: Hub | None = None,
    ):
        self.conn = conn
        self.interval = interval
        self.timeout = timeout
        self.hub = hub or Hub.default()
        self._on_message = on_message
        self._on_lost = on_lost
        self._ended = threading.Lock()
        self._done = False  # lost or closed
        self.lost: Loss | None = None
        self.last_heard = time.time()
        self._heard = time.monotonic()
        self._next_beat = self._heard + interval
        self._fd = conn.sock.fileno()

    def start(self) -> None:
        self.hub.add(self)

    def fileno(self) -> int:
        return self._fd

    def send(self, msg: Message) -> bool:
        """Send ``msg``; False if the connection is gone (the loss is reported as well)."""
        if self._done:
            return False
        try:
            self.conn.send(msg)
            return True
        except OSError as exc:
            self._lose(LossReason.CLOSED, f"sending failed: {exc.strerror or exc}")
            return False

    def on_readable(self) -> None:
        try:
            self.conn.fill()
            while (msg := self.conn.take()) is not None:
                self._heard, self.last_heard = time.monotonic(), time.time()
                if not isinstance(msg, Heartbeat):
                    self._on_message(msg)
        except Closed:
            self._lose(LossReason.CLOSED, "connection closed")
        except ProtocolError as exc:
            self._lose(LossReason.BROKEN, str(exc))

    def on_tick(self, now: float) -> None:
        if now - self._heard > self.timeout:
            self._lose(LossReason.SILENT, f"nothing for {self.timeout:g} s")
        elif now >= self._next_beat:
            self._next_beat = now + self.interval
            self.send(Heartbeat())

    def _end(self) -> bool:
        """Mark the channel ended; True for the caller that did it (the only one to act on it)."""
        with self._ended:
            if self._done:
                return False
            self._done = True
        self.conn.shutdown()
        self.hub.remove(self, close=self.conn.sock)
        return True

    def _lose(self, reason: LossReason, detail: str) -> None:
        last_heard = self.last_heard
        if self._end():
            self.lost = Loss(reason, detail, last_heard)
            self._on_lost(self.lost)

    def close(self) -> None:
        """End the connection on purpose (no loss is reported)."""
        self._end()
