"""towerpack.utils.fs: directories, walking, the dataset root, and downloads from a real local HTTP server."""

from __future__ import annotations

import collections
import http.server
import os
import threading

import pytest

from towerpack.utils import fs

PAYLOAD = bytes(range(256)) * 40  # 10240 bytes


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: collections.Counter = collections.Counter()

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.hits[path] += 1
        if path == "/data.bin":
            self._send(200, PAYLOAD)
        elif path == "/empty":
            self._send(200, b"")
        elif path == "/short":  # announces the whole payload, sends half, hangs up
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD[: len(PAYLOAD) // 2])
            self.close_connection = True
        else:
            self._send(404, b"not here")

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    """An HTTP server on 127.0.0.1 in a thread; yields its base URL and its hit counter."""
    _Handler.hits = collections.Counter()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", _Handler.hits
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def test_download_writes_the_file_and_reuses_a_complete_one(server, tmp_path):
    base, hits = server
    target = tmp_path / "new" / "dir"
    path = fs.download(f"{base}/data.bin?token=1", target)
    assert path == str(target / "data.bin")  # the query string is not part of the name
    assert (target / "data.bin").read_bytes() == PAYLOAD
    assert sorted(os.listdir(target)) == ["data.bin"]  # no .part file left
    # an existing file is used again: without a size, and with the right one
    assert fs.download(f"{base}/data.bin", target) == path
    assert fs.download(f"{base}/data.bin", target, expect_size=len(PAYLOAD)) == path
    assert hits["/data.bin"] == 1
    # one of another size is downloaded again
    (target / "data.bin").write_bytes(b"partial")
    assert fs.download(f"{base}/data.bin", target, expect_size=len(PAYLOAD)) == path
    assert hits["/data.bin"] == 2 and (target / "data.bin").read_bytes() == PAYLOAD
    # an explicit name
    assert fs.download(f"{base}/data.bin", target, filename="copy.bin") == str(target / "copy.bin")
    assert (target / "copy.bin").read_bytes() == PAYLOAD


def test_download_failures_name_the_url_and_leave_nothing(server, tmp_path):
    base, _ = server
    with pytest.raises(OSError, match=rf"{base}/data.bin gave 10240 bytes, not the expected 10"):
        fs.download(f"{base}/data.bin", tmp_path, expect_size=10)
    with pytest.raises(OSError, match=rf"download of {base}/missing failed: Not Found"):
        fs.download(f"{base}/missing", tmp_path)
    with pytest.raises(OSError, match=rf"download of {base}/short stopped after 5120 of 10240 bytes"):
        fs.download(f"{base}/short", tmp_path)
    with pytest.raises(OSError, match="gave 0 bytes"):
        fs.download(f"{base}/empty", tmp_path, filename="e")
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="pass filename="):
        fs.download(f"{base}/", tmp_path)
    with pytest.raises(OSError, match=r"download of http://127\.0\.0\.1:1/x failed"):
        fs.download("http://127.0.0.1:1/x", tmp_path)  # nothing listens on port 1


def test_mkdir_p_recursive_walk_and_normpath(tmp_path):
    fs.mkdir_p(tmp_path / "a" / "b")
    fs.mkdir_p(tmp_path / "a" / "b")  # exists: nothing to do
    fs.mkdir_p("")
    with pytest.raises(TypeError):
        fs.mkdir_p(None)
    (tmp_path / "a" / "top.txt").write_text("1")
    (tmp_path / "a" / "b" / "deep.txt").write_text("2")
    walked = sorted(fs.recursive_walk(tmp_path / "a"))
    assert walked == [str(tmp_path / "a" / "b" / "deep.txt"), str(tmp_path / "a" / "top.txt")]
    with pytest.raises(FileNotFoundError, match="not a directory"):
        list(fs.recursive_walk(tmp_path / "nowhere"))
    assert fs.normpath("a/./b/../c") == "a/c"
    assert fs.normpath("s3://bucket/a/../b") == "s3://bucket/a/../b"


def test_get_dataset_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORPACK_DATASET", str(tmp_path / "data"))
    assert fs.get_dataset_path("mnist_data", "x.gz") == str(tmp_path / "data" / "mnist_data" / "x.gz")
    assert not (tmp_path / "data").exists()  # nothing is created
    monkeypatch.delenv("TENSORPACK_DATASET")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert fs.get_dataset_path("ptb") == str(tmp_path / "tensorpack_data" / "ptb")
