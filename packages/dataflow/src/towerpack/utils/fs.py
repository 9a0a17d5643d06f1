"""Files and directories: ``mkdir_p``, ``download``, ``recursive_walk``, ``get_dataset_path``.

``get_dataset_path`` is also what the dataset readers of :mod:`towerpack.dataflow.dataset` use.
``download`` writes into ``<file>.part`` and renames it when complete, so a file that exists is a
whole one: it is used again without a download (checked against ``expect_size`` when given).
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

from .progress import progress_bar

__all__ = ["download", "get_dataset_path", "mkdir_p", "normpath", "recursive_walk"]

_log = logging.getLogger(__name__)

#: Environment variable naming the root of all datasets.
DATASET_VAR = "TENSORPACK_DATASET"
#: Seconds a download may wait for the server before it fails.
DOWNLOAD_TIMEOUT = 60.0
_CHUNK = 1 << 16


def mkdir_p(dirname: str | os.PathLike) -> None:
    """Make directory ``dirname`` and its parents; nothing to do if it exists (or is ``''``)."""
    if dirname is None:
        raise TypeError("mkdir_p needs a directory name, got None")
    dirname = os.fspath(dirname)
    if dirname:
        os.makedirs(dirname, exist_ok=True)


def recursive_walk(rootdir: str | os.PathLike) -> Iterator[str]:
    """Every file under ``rootdir`` (recursively), as a path starting with ``rootdir``."""
    rootdir = os.fspath(rootdir)
    if not os.path.isdir(rootdir):
        raise FileNotFoundError(f"recursive_walk: {rootdir} is not a directory")
    for dirpath, _, filenames in os.walk(rootdir):
        for name in filenames:
            yield os.path.join(dirpath, name)


def get_dataset_path(*subdirs: str) -> str:
    """``$TENSORPACK_DATASET/<subdirs>`` (``~/tensorpack_data/<subdirs>`` when unset).

    Nothing is created or checked: readers say which files are missing, ``download`` makes the
    directory it writes into.
    """
    root = os.environ.get(DATASET_VAR) or os.path.join(os.path.expanduser("~"), "tensorpack_data")
    return os.path.join(root, *subdirs)


def normpath(path: str) -> str:
    """``os.path.normpath``, except for URLs (anything with ``://``), which come back unchanged."""
    return path if "://" in path else os.path.normpath(path)


def download(
    url: str, dir: str | os.PathLike, filename: str | None = None, expect_size: int | None = None
) -> str:
    """Download ``url`` into directory ``dir`` (created if missing); returns the file's path.

    Args:
        url: an ``http(s)://`` (or ``file://``, ``ftp://``) URL.
        dir: where to put the file.
        filename: its name; by default the last part of the URL's path (without a query string).
        expect_size: its size in bytes, if known. An existing file of this size is not downloaded
            again (one of another size is); a download of another size is an error.

    An existing file is used as it is when ``expect_size`` is None (files are renamed into place
    only when complete). Failures raise ``OSError`` naming the URL; nothing partial is left.
    """
    if filename is None:
        filename = os.path.basename(urllib.parse.urlsplit(url).path)
        if not filename:
            raise ValueError(f"cannot name the file from the URL {url!r}: pass filename=")
    dir = os.fspath(dir)
    mkdir_p(dir)
    path = os.path.join(dir, filename)
    if os.path.isfile(path):
        size = os.path.getsize(path)
        if expect_size is None or size == expect_size:
            _log.info("%s exists (%d bytes): not downloading %s again", path, size, url)
            return path
        _log.warning("%s has %d bytes, not %d: downloading it again", path, size, expect_size)
    partial = path + ".part"
    try:
        size = _fetch(url, partial, filename)
    except BaseException:
        _remove(partial)
        raise
    if size == 0 or (expect_size is not None and size != expect_size):
        _remove(partial)
        wanted = "" if expect_size is None else f", not the expected {expect_size}"
        raise OSError(f"download of {url} gave {size} bytes{wanted}; nothing was written to {path}")
    os.replace(partial, path)
    _log.info("Downloaded %s (%d bytes) to %s", url, size, path)
    return path


def _fetch(url: str, dest: str, label: str) -> int:
    """Stream ``url`` into file ``dest`` with a progress bar; returns the number of bytes written."""
    try:
        response = urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT)
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise OSError(f"download of {url} failed: {reason}") from e
    with response, open(dest, "wb") as out:
        total = response.headers.get("Content-Length")
        total = int(total) if total and total.isdigit() else None
        with progress_bar(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label) as bar:
            try:
                shutil.copyfileobj(_Counting(response, bar), out, _CHUNK)
            except (OSError, http.client.HTTPException) as e:
                raise OSError(f"download of {url} failed: {e!r}") from e
        size = out.tell()
    if total is not None and size != total:
        raise OSError(f"download of {url} stopped after {size} of {total} bytes")
    return size


class _Counting:
    """A readable that reports how many bytes were read to a progress bar."""

    def __init__(self, raw, bar) -> None:
        self._raw, self._bar = raw, bar

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self._bar.update(len(data))
        return data


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
