"""The key-value store Horovod's Gloo rendezvous talks to over HTTP.

Horovod's ``HTTPStore`` sends ``PUT /<scope>/<key>`` with the value as body, polls ``GET /<scope>/<key>``
(404 until the key exists) and sends ``DELETE /<scope>/<rank>`` when a rank is done with a scope.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    server: RendezvousServer

    def _key(self) -> tuple[str, str] | None:
        parts = self.path.split("/")
        if len(parts) != 3:
            self._reply(400)
            return None
        return parts[1], parts[2]

    def _reply(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_GET(self) -> None:
        key = self._key()
        if key:
            value = self.server.get(*key)
            self._reply(404) if value is None else self._reply(200, value)

    def do_PUT(self) -> None:
        key = self._key()
        if key:
            length = int(self.headers.get("Content-Length", "0"))
            self.server.put(*key, self.rfile.read(length))
            self._reply(200)

    def do_DELETE(self) -> None:
        # A rank leaving a scope; values stay until the next attempt clears the store.
        if self._key():
            self._reply(200)

    def log_message(self, format, *args) -> None:
        pass


class RendezvousServer(ThreadingHTTPServer):
    """Serves the store on ``addr`` (port 0: a free port) in a daemon thread; ``clear()`` between attempts."""

    daemon_threads = True

    def __init__(self, addr: str, port: int = 0):
        super().__init__((addr, port), _Handler)
        self._lock = threading.Lock()
        self._data: dict[tuple[str, str], bytes] = {}
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def get(self, scope: str, key: str) -> bytes | None:
        with self._lock:
            return self._data.get((scope, key))

    def put(self, scope: str, key: str, value: bytes) -> None:
        with self._lock:
            self._data[(scope, key)] = value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def close(self) -> None:
        self.shutdown()
        self.server_close()
