"""LMDB datasets: LMDBData (a sharded, sequential reader), LMDBDataDecoder, and the writer.

A dataset written by :func:`write_lmdb` (``LMDBSerializer.save``) keeps datapoint ``i`` under
the ASCII key ``'{:08}'.format(i)`` and the list of keys under ``__keys__`` (a ``uint8`` array of
shape ``[n, 8]`` in the wire format's record layout, no pickle). Keys in byte order are also
storage order, so a run of consecutive keys is read with one cursor, sequentially.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import lmdb
import numpy as np

from .base import DataFlow
from .mapping import MapData
from .reader import DatasetReader
from .wire import WireFormatError, pack, unpack

__all__ = ["KEYS_KEY", "LMDBData", "LMDBDataDecoder", "write_lmdb"]

KEYS_KEY = b"__keys__"
#: The initial map size of a database being written (doubled whenever it fills up).
INITIAL_MAP_SIZE = 1 << 40


def key_of(i: int) -> bytes:
    return f"{i:08}".encode("ascii")


class _FixedKeys(Sequence):
    """Keys of one width held in a ``uint8`` array ``[n, width]``: compact for millions of keys."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i):  # type: ignore[override]
        return self.table[i].tobytes()


def _open_env(path: str, readonly: bool, map_size: int = INITIAL_MAP_SIZE) -> lmdb.Environment:
    return lmdb.open(
        path,
        subdir=os.path.isdir(path),
        readonly=readonly,
        lock=False,  # a finished dataset is only read; the single writer needs no lock file either
        readahead=True,
        map_size=map_size,
        meminit=False,
        max_readers=1,
    )


#: Open read-only environments by (pid, real path): LMDB refuses to open one file twice in a process.
_ENVS: dict[tuple[int, str], list] = {}


def _acquire(path: str) -> lmdb.Environment:
    key = (os.getpid(), os.path.realpath(path))
    entry = _ENVS.get(key)
    if entry is None:
        entry = _ENVS[key] = [_open_env(path, readonly=True), 0]
    entry[1] += 1
    return entry[0]


def _close_inherited() -> None:
    """In a forked child: close the environments the parent had open.

    LMDB allows one open environment per file in a process, and a forked child inherits the
    parent's; a worker that opens the file itself would be refused. Closing the inherited copy
    unmaps and closes it in the child only.
    """
    pid = os.getpid()
    for key in [k for k in _ENVS if k[0] != pid]:
        env = _ENVS.pop(key)[0]
        env.close()


os.register_at_fork(after_in_child=_close_inherited)


def _release(path: str, pid: int) -> None:
    key = (pid, os.path.realpath(path))
    entry = _ENVS.get(key)
    if entry is None or pid != os.getpid():
        return
    entry[1] -= 1
    if entry[1] == 0:
        del _ENVS[key]
        entry[0].close()


class LMDBData(DatasetReader):
    """Yield ``[key, value]`` (both ``bytes``) for every entry of an LMDB database except ``__keys__``.

    Args:
        lmdb_path: the database file (or directory holding ``data.mdb``).
        shuffle: shuffle the order of blocks and pass records through a shuffle buffer (see
            :class:`~towerpack.dataflow.reader.DatasetReader` for this and the sharding options).
        keys: the keys to read, in storage order: a list, or a format string over ``0 .. n-1``
            (e.g. ``'{:08}'``). By default the ``__keys__`` entry written by ``LMDBSerializer``,
            else every key of the database (a scan of the keys, without their values).

    The database is opened read-only and lock-free, and again in every process by
    :meth:`reset_state`, so a reader can be handed to worker processes.
    """

    def __init__(
        self,
        lmdb_path: str | os.PathLike,
        shuffle: bool = True,
        keys: Sequence[bytes] | str | None = None,
        **reader_options: Any,
    ) -> None:
        super().__init__(shuffle, **reader_options)
        self.lmdb_path = os.fspath(lmdb_path)
        if not os.path.exists(self.lmdb_path):
            raise FileNotFoundError(f"LMDB database {self.lmdb_path} does not exist")
        self._env: lmdb.Environment | None = None
        self._keys = self._find_keys(keys)
        self._sorted = all(self._keys[i] < self._keys[i + 1] for i in range(min(len(self._keys), 1000) - 1))

    def _find_keys(self, keys: Sequence[bytes] | str | None) -> Sequence[bytes]:
        env = _acquire(self.lmdb_path)
        try:
            with env.begin() as txn:
                if isinstance(keys, str):
                    count = env.stat()["entries"] - int(txn.get(KEYS_KEY) is not None)
                    return [keys.format(i).encode("ascii") for i in range(count)]
                if keys is not None:
                    return [k.encode("ascii") if isinstance(k, str) else bytes(k) for k in keys]
                stored = txn.get(KEYS_KEY)
                if stored is not None:
                    try:
                        table = unpack(bytearray(stored))
                    except WireFormatError:
                        table = None  # not ours (the reference pickles its key list): scan instead
                    if isinstance(table, np.ndarray) and table.dtype == np.uint8 and table.ndim == 2:
                        return _FixedKeys(table)
                with txn.cursor() as cur:
                    return [bytes(k) for k in cur.iternext(keys=True, values=False) if k != KEYS_KEY]
        finally:
            _release(self.lmdb_path, os.getpid())

    def _count(self) -> int:
        return len(self._keys)

    def _open(self) -> None:
        if self._env is None:
            self._env = _acquire(self.lmdb_path)
            weakref.finalize(self, _release, self.lmdb_path, os.getpid())

    def _value(self, value: memoryview) -> Any:
        return bytes(value)

    def _read_run(self, start: int, stop: int) -> Iterator[Any]:
        keys = self._keys
        with self._env.begin(buffers=True) as txn, txn.cursor() as cur:
            positioned = self._sorted and cur.set_key(keys[start])
            for i in range(start, stop):
                key = keys[i]
                if positioned and cur.key() == key:
                    value = cur.value()
                    positioned = cur.next()
                else:
                    value = txn.get(key)
                    positioned = False
                if value is None:
                    raise KeyError(f"{self.lmdb_path}: key {key!r} is listed but not in the database")
                yield self._datapoint(key, value)

    def _datapoint(self, key: bytes, value: memoryview) -> Any:
        return [key, self._value(value)]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_env"] = None  # opened again by reset_state in the process that reads
        return state


class LMDBDataDecoder(MapData):
    """``decoder(key, value)`` for every ``[key, value]`` of an :class:`LMDBData`; ``None`` drops it."""

    def __init__(self, lmdb_data: LMDBData, decoder: Callable[[bytes, bytes], Any]) -> None:
        self.lmdb_data = lmdb_data
        self.decoder = decoder
        super().__init__(lmdb_data, lambda dp: decoder(dp[0], dp[1]))


class LMDBRecords(LMDBData):
    """The datapoints of a dataset written by :func:`write_lmdb`, decoded into writable arrays."""

    def __init__(
        self, lmdb_path: str | os.PathLike, shuffle: bool = True, allow_pickle: bool = False, **kw: Any
    ):
        super().__init__(lmdb_path, shuffle, **kw)
        self.allow_pickle = allow_pickle

    def _datapoint(self, key: bytes, value: memoryview) -> Any:
        try:
            return unpack(bytearray(value), self.allow_pickle)
        except WireFormatError as e:
            raise WireFormatError(f"{self.lmdb_path}: entry {key!r} is not a datapoint record: {e}") from None


def write_lmdb(
    df: DataFlow,
    path: str | os.PathLike,
    write_frequency: int = 5000,
    allow_pickle: bool = False,
    progress: bool = True,
) -> int:
    """Write one epoch of ``df`` to a new LMDB database file; return the number of datapoints.

    Commits every ``write_frequency`` datapoints (or 256 MB). The map starts at 1 TiB of address
    space (the file grows only as data is written) and doubles if it fills up, re-writing the
    uncommitted datapoints, so nothing is lost.
    """
    import tqdm

    path = os.fspath(path)
    if os.path.exists(path):
        raise FileExistsError(f"{path} already exists; LMDB datasets are written once, to a new path")
    df.reset_state()
    env = _open_env(path, readonly=False, map_size=INITIAL_MAP_SIZE)
    pending: list[tuple[bytes, bytes]] = []
    pending_bytes = count = 0
    try:
        with tqdm.tqdm(total=_total(df), unit="dp", disable=not progress, desc=f"writing {path}") as bar:
            for dp in df:
                record = pack(dp, allow_pickle)
                pending.append((key_of(count), record))
                pending_bytes += len(record)
                count += 1
                bar.update(1)
                if len(pending) >= write_frequency or pending_bytes > COMMIT_BYTES:
                    _commit(env, pending)
                    pending, pending_bytes = [], 0
        keys = np.frombuffer(b"".join(key_of(i) for i in range(count)), np.uint8).reshape(count, 8)
        pending.append((KEYS_KEY, pack(keys)))
        _commit(env, pending)
        env.sync()
    finally:
        env.close()
    return count


#: Uncommitted bytes after which the writer commits anyway.
COMMIT_BYTES = 256 << 20


def _total(df: DataFlow) -> int | None:
    try:
        return len(df)
    except NotImplementedError:
        return None


def _commit(env: lmdb.Environment, items: list[tuple[bytes, bytes]]) -> None:
    """Put ``items`` in one transaction, growing the map as often as needed."""
    while True:
        try:
            with env.begin(write=True) as txn:
                for k, v in items:
                    txn.put(k, v)
            return
        except lmdb.MapFullError:
            env.set_mapsize(env.info()["map_size"] * 2)
