"""The key-value store Horovod's Gloo rendezvous talks to over HTTP, open only to the job's ranks.

Horovod's ``HTTPStore`` sends ``PUT /<scope>/<key>`` with the value as body, polls ``GET /<scope>/<key>``
(404 until the key exists) and sends ``DELETE /<scope>/<rank>`` when a rank is done with a scope.

Horovod's client has no authentication. It builds its URLs as
``http://<HOROVOD_GLOO_RENDEZVOUS_ADDR>:<HOROVOD_GLOO_RENDEZVOUS_PORT>/<scope>/<key>`` and takes the host
and port from what precedes the first ``/``. So the ranks get ``ADDR=<host>:<port>/<token>``: their
requests reach ``host:port`` with paths ``/<token>:<port>/<scope>/<key>``, and the store refuses (403)
every request whose first path segment is not exactly that. The token comes from the job's secret
(:mod:`towerpack.launcher.job_secret`). Horovod 0.28.1, the pinned version, is tested with this.

At scale (measured by ``benchmarks/control_plane.py``): Horovod 0.28.1's Gloo stores, for each rank,
136 bytes per other rank, and every rank reads every other rank's value, one request per connection,
polling every 10 ms until it exists. So the store holds O(ranks^2) bytes (``reset`` sizes its limits
for the attempt's world size), its listen queue is sized for a whole job connecting at once, and a
``GET`` of a key that does not exist yet is held up to ``HOLD_S`` until a ``PUT`` brings it, so that
ranks waiting for a slow one poll a few times a second rather than a hundred.
"""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from towerpack.launcher.net import family

#: The largest value a rank may store, and the most the store holds at once, for small jobs; larger
#: ones get ``VALUE_PER_RANK`` per rank and ``TOTAL_PER_RANK_SQUARED`` per squared rank (Gloo's values).
MAX_VALUE = 1 << 20
MAX_TOTAL = 64 << 20
VALUE_PER_RANK = 256
TOTAL_PER_RANK_SQUARED = 1024
#: Seconds a GET of a missing key waits for it before the 404.
HOLD_S = 0.5


@dataclass(frozen=True)
class StoreAddress:
    """Where the ranks find the store, and the token it requires."""

    addr: str
    port: int
    token: str


def rank_env(store: StoreAddress) -> dict[str, str]:
    """The variables that point a rank's Horovod at the store (see the module's docstring)."""
    return {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": f"{store.addr}:{store.port}/{store.token}",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(store.port),
    }


class _Handler(BaseHTTPRequestHandler):
    server: GlooStore
    timeout = 30  # a client that stops sending mid-request does not hold a thread for long

    def _key(self) -> tuple[str, str] | None:
        parts = self.path.split("/")
        if len(parts) < 2 or not hmac.compare_digest(parts[1].encode(), self.server.prefix.encode()):
            self._reply(403)
            return None
        if len(parts) != 4:
            self._reply(400)
            return None
        return parts[2], parts[3]

    def _reply(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_GET(self) -> None:
        key = self._key()
        if key:
            value = self.server.wait_get(*key, HOLD_S)
            self._reply(404) if value is None else self._reply(200, value)

    def do_PUT(self) -> None:
        key = self._key()
        if not key:
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._reply(411)
            return
        if not 0 <= length <= self.server.max_value:
            self._reply(413)
            return
        value = self.rfile.read(length)
        self._reply(200 if self.server.put(*key, value) else 507)

    def do_DELETE(self) -> None:
        # A rank leaving a scope; values stay until the next attempt clears the store.
        if self._key():
            self._reply(200)

    def log_message(self, format, *args) -> None:
        pass


class GlooStore(ThreadingHTTPServer):
    """Serves the store on ``addr`` (port 0: a free port) in a daemon thread, sized for ``world`` ranks;
    ``reset(world)`` between attempts. Only requests carrying ``token`` are answered."""

    daemon_threads = True

    def __init__(self, addr: str, token: str, port: int = 0, world: int = 1):
        self.address_family = family(addr)
        super().__init__((addr, port), _Handler)
        self.token = token
        self.prefix = f"{token}:{self.port}"
        self._lock = threading.Lock()
        self._data: dict[tuple[str, str], bytes] = {}
        self._waiting: dict[tuple[str, str], threading.Event] = {}
        self._size = 0
        self._size_for(world)
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def address(self, addr: str) -> StoreAddress:
        return StoreAddress(addr, self.port, self.token)

    def _size_for(self, world: int) -> None:
        self.max_value = max(MAX_VALUE, VALUE_PER_RANK * world)
        self.max_total = max(MAX_TOTAL, TOTAL_PER_RANK_SQUARED * world * world)
        self.socket.listen(max(128, 2 * world))  # all ranks may connect at once (the kernel caps it)

    def get(self, scope: str, key: str) -> bytes | None:
        with self._lock:
            return self._data.get((scope, key))

    def wait_get(self, scope: str, key: str, timeout: float) -> bytes | None:
        """The value, waiting up to ``timeout`` seconds for it to be put; None if it is not there."""
        with self._lock:
            value = self._data.get((scope, key))
            if value is not None or timeout <= 0:
                return value
            event = self._waiting.setdefault((scope, key), threading.Event())
        event.wait(timeout)
        return self.get(scope, key)

    def put(self, scope: str, key: str, value: bytes) -> bool:
        with self._lock:
            old = self._data.get((scope, key), b"")
            if self._size - len(old) + len(value) > self.max_total:
                return False
            self._data[(scope, key)] = value
            self._size += len(value) - len(old)
            event = self._waiting.pop((scope, key), None)
        if event is not None:
            event.set()
        return True

    def reset(self, world: int) -> None:
        """Empty the store for a new attempt of ``world`` ranks."""
        with self._lock:
            self._data.clear()
            self._size = 0
            self._size_for(world)

    def close(self) -> None:
        self.shutdown()
        self.server_close()
