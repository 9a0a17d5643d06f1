"""LMDB datasets: LMDBData (a sharded, sequential reader), LMDBDataDecoder, and the writer.

A dataset written by :func:`write_lmdb` (``LMDBSerializer.save``) keeps datapoint ``i`` under
the ASCII key ``'{:08}'.format(i)`` and the list of keys under ``__keys__`` (a ``uint8`` array of
shape ``[n, 8]`` in the wire format's record layout, no pickle). Keys in byte order are also
storage order, so a run of consecutive keys is read with one cursor, sequentially.

Before a database is mapped, its meta pages are checked against the file's size: LMDB maps the
file and touches pages beyond a truncated file's end, which kills the process with SIGBUS (the
reference dies so); here a truncated or damaged file raises :class:`DatasetFormatError` instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import struct
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import lmdb
import numpy as np

from ..pipeline.base import DataFlow, dataflow_len
from ..pipeline.mapping import MapData
from ..pipeline.progress import progress_bar
from ..wire.codec import WireFormatError, pack, unpack
from .errors import DatasetFormatError
from .reader import DatasetReader

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


#: An LMDB meta page: the page header, then ``MDB_meta`` (magic, version, address, map size, the
#: two ``MDB_db`` records of 48 bytes whose first ``u32`` in the first one is the page size,
#: ``mm_last_pg``, ``mm_txnid``), as LMDB lays it out on 64-bit machines. Read: magic, version,
#: page size, the main tree's depth and root page, last page, transaction id.
_PAGE_HEADER = 16
_META = struct.Struct("<II8x8xI44x6xH32xQQQ")
_MAGIC = 0xBEEFC0DE
_VERSION = 1
_PAGE_SIZES = [1 << k for k in range(9, 17)]


def _data_file(path: str) -> str:
    return os.path.join(path, "data.mdb") if os.path.isdir(path) else path


def check_lmdb_file(path: str) -> None:
    """Raise :class:`DatasetFormatError` unless the file holds every page its current meta page uses.

    Reads both meta pages (LMDB uses the one with the larger transaction id), checks that their
    transaction ids are consecutive, and compares ``(last_pg + 1) * page_size`` with the file's
    size, before anything maps the file.
    """
    file = _data_file(path)
    size = os.stat(file).st_size
    with open(file, "rb") as f:
        head = f.read(_PAGE_HEADER + _META.size)
        if len(head) < _PAGE_HEADER + _META.size:
            raise DatasetFormatError(f"{file}: {size} bytes, too short for an LMDB database (truncated?)")
        page_size = _META.unpack_from(head, _PAGE_HEADER)[2]
        if page_size not in _PAGE_SIZES:
            raise DatasetFormatError(
                f"{file}: not an LMDB database, or a damaged one (page size {page_size})"
            )
        f.seek(page_size)
        metas = [_META.unpack_from(head, _PAGE_HEADER)]
        second = f.read(_PAGE_HEADER + _META.size)
        if len(second) < _PAGE_HEADER + _META.size:
            raise DatasetFormatError(
                f"{file}: {size} bytes, too short for the two LMDB meta pages (truncated?)"
            )
        metas.append(_META.unpack_from(second, _PAGE_HEADER))
    for number, (magic, version, *_) in enumerate(metas):
        if magic != _MAGIC or version != _VERSION:
            raise DatasetFormatError(
                f"{file}: meta page {number} is not an LMDB meta page (magic {magic:#x}, version {version}); "
                "not an LMDB database, or a damaged one"
            )
    # LMDB writes transaction t's meta to page t % 2, so the two ids differ by at most one; a
    # damaged id would make LMDB read an old snapshot (fewer entries, or freed pages) silently
    if abs(metas[0][6] - metas[1][6]) > 1:
        raise DatasetFormatError(
            f"{file}: the LMDB meta pages record transactions {metas[0][6]} and {metas[1][6]}; "
            "one of them is damaged"
        )
    _, _, _, depth, root, last_page, _ = max(metas, key=lambda m: m[6])
    needed = (last_page + 1) * page_size
    if needed > size:
        raise DatasetFormatError(
            f"{file}: the LMDB database records {needed} bytes ({last_page + 1} pages of {page_size}) "
            f"but the file has {size}: it is truncated (an interrupted copy?)"
        )
    with open(file, "rb") as f:
        _check_tree_tail(_Tree(file, f.fileno(), page_size, last_page, size), root, depth)


_PAGE = struct.Struct("<8x2xHHH")  # flags, lower, upper
_NODE = struct.Struct("<HHHH")  # lo, hi, flags, key size
_P_BRANCH, _P_LEAF, _P_LEAF2 = 0x01, 0x02, 0x20
_F_BIGDATA = 0x01
_NO_PAGE = (1 << 64) - 1
#: How far past its page's start a damaged node offset plus key size can make LMDB read.
_REACH = 2 * 65536 + 16


@dataclasses.dataclass(frozen=True)
class _Tree:
    file: str
    fd: int
    page_size: int
    last_page: int
    size: int

    def damaged(self, pgno: int, what: str) -> DatasetFormatError:
        return DatasetFormatError(f"{self.file}: the LMDB database is damaged (page {pgno}: {what})")


def _check_tree_tail(tree: _Tree, root: int, depth: int) -> None:
    """Check the main tree's pages from which damaged offsets could make LMDB read past the file.

    LMDB trusts the node offsets and sizes in its pages; a damaged one in a page near the end
    of the file makes it read past the end (SIGBUS). Walks the branch pages (a small part of
    the tree) and checks them and the leaf pages within reach of the file's end.
    """
    if root == _NO_PAGE:
        return
    tail = max(2, (tree.size - _REACH) // tree.page_size)
    stack = [(root, 1)]
    visited = 0
    while stack:
        pgno, level = stack.pop()
        visited += 1
        if not 2 <= pgno <= tree.last_page or level > depth or visited > tree.last_page:
            raise tree.damaged(pgno, f"not a page of the tree at level {level} of {depth}")
        children = _check_page(tree, pgno, branch=level < depth)
        for child in children:
            if level + 1 < depth or child >= tail:
                stack.append((child, level + 1))


def _check_page(tree: _Tree, pgno: int, branch: bool) -> list[int]:
    """Check one branch or leaf page's nodes lie within it; return a branch page's children."""
    ps = tree.page_size
    page = os.pread(tree.fd, ps, pgno * ps)
    flags, lower, upper = _PAGE.unpack_from(page)
    if flags & _P_LEAF2:
        return []
    if flags & (_P_BRANCH | _P_LEAF) != (_P_BRANCH if branch else _P_LEAF):
        raise tree.damaged(pgno, f"flags {flags:#x} where a {'branch' if branch else 'leaf'} page belongs")
    if not _PAGE_HEADER <= lower <= upper <= ps or (lower - _PAGE_HEADER) % 2:
        raise tree.damaged(pgno, f"node table bounds {lower}..{upper}")
    children = []
    for i in range((lower - _PAGE_HEADER) // 2):
        (ptr,) = struct.unpack_from("<H", page, _PAGE_HEADER + 2 * i)
        if not upper <= ptr <= ps - _NODE.size:
            raise tree.damaged(pgno, f"node {i} at offset {ptr}")
        lo, hi, node_flags, ksize = _NODE.unpack_from(page, ptr)
        end = ptr + _NODE.size + ksize
        if branch:
            child = lo | hi << 16 | node_flags << 32
            if end > ps or not 2 <= child <= tree.last_page:
                raise tree.damaged(pgno, f"node {i} (child page {child}, key of {ksize} bytes)")
            children.append(child)
            continue
        dsize = lo | hi << 16
        if node_flags & _F_BIGDATA:
            if end + 8 > ps:
                raise tree.damaged(pgno, f"node {i} (key of {ksize} bytes)")
            (first,) = struct.unpack_from("<Q", page, end)
            if not 2 <= first <= tree.last_page or first * ps + _PAGE_HEADER + dsize > tree.size:
                raise tree.damaged(pgno, f"node {i} (a value of {dsize} bytes at page {first})")
        elif end + dsize > ps:
            raise tree.damaged(pgno, f"node {i} (key of {ksize} and value of {dsize} bytes)")
    return children


def _open_env(path: str, readonly: bool, map_size: int = INITIAL_MAP_SIZE) -> lmdb.Environment:
    if readonly:
        check_lmdb_file(path)
        with _damage_named(path):
            return _lmdb_open(path, readonly, map_size)
    return _lmdb_open(path, readonly, map_size)


@contextlib.contextmanager
def _damage_named(path: str) -> Iterator[None]:
    """Turn LMDB's errors about a damaged database into :class:`DatasetFormatError` naming the file."""
    try:
        yield
    except lmdb.Error as e:
        raise DatasetFormatError(
            f"{_data_file(path)}: the LMDB database is damaged ({type(e).__name__}: {e})"
        ) from None


def _lmdb_open(path: str, readonly: bool, map_size: int) -> lmdb.Environment:
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
        env = _open_env(path, readonly=True)
        entry = _ENVS[key] = [env, 0, _mapped_range(path)]
    entry[1] += 1
    return entry[0]


def _mapped_range(path: str) -> tuple[int, int] | None:
    """Addresses ``[start, end)`` of the open database file's bytes in this process's memory.

    From ``/proc/self/maps`` (``None`` where there is none); LMDB maps more address space than
    the file has, and touching the part past the file's end raises SIGBUS.
    """
    file = os.path.realpath(_data_file(path))
    try:
        with open("/proc/self/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == file and int(fields[2], 16) == 0:
            start = int(fields[0].split("-")[0], 16)
            return start, start + os.stat(file).st_size
    return None


def _file_bounds(path: str) -> tuple[int, int] | None:
    """The mapped address range of ``path``'s open environment in this process, or None."""
    return _ENVS.get((os.getpid(), os.path.realpath(path)), [None, None, None])[2]


def _check_in_file(view: memoryview, bounds: tuple[int, int] | None, path: str, key: bytes) -> None:
    """Raise :class:`DatasetFormatError` if ``view`` (from the map) reaches past the file's end.

    A damaged size in LMDB's B-tree gives a value that runs past the end of the file; reading it
    would kill the process with SIGBUS. ``bounds``: :func:`_file_bounds`, looked up once per read.
    """
    if bounds is None or not view.nbytes:
        return
    start = np.frombuffer(view, np.uint8).__array_interface__["data"][0]
    if start < bounds[0] or start + view.nbytes > bounds[1]:
        raise DatasetFormatError(
            f"{_data_file(path)}: entry {key!r} ({view.nbytes} bytes) runs past the end of the file; "
            "the LMDB database is damaged"
        )


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
            :class:`~towerpack.dataflow.formats.reader.DatasetReader` for this and the sharding options).
        keys: the keys to read, in storage order: a list, or a format string over ``0 .. n-1``
            (e.g. ``'{:08}'``). By default the ``__keys__`` entry written by ``LMDBSerializer``,
            else every key of the database (a scan of the keys, without their values).

    The database is opened read-only and lock-free, and again in every process by
    :meth:`reset_state`, so a reader can be handed to worker processes.
    """

    #: Whether a database without a valid ``__keys__`` entry is damaged (rather than scanned).
    _key_table_required = False

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
            with _damage_named(self.lmdb_path), env.begin(buffers=True) as txn:
                if isinstance(keys, str):
                    count = env.stat()["entries"] - int(txn.get(KEYS_KEY) is not None)
                    return [keys.format(i).encode("ascii") for i in range(count)]
                if keys is not None:
                    return [k.encode("ascii") if isinstance(k, str) else bytes(k) for k in keys]
                stored = txn.get(KEYS_KEY)
                if stored is not None:
                    _check_in_file(stored, _file_bounds(self.lmdb_path), self.lmdb_path, KEYS_KEY)
                    try:
                        table = unpack(bytearray(stored))
                    except WireFormatError:
                        table = None  # not ours (the reference pickles its key list): scan instead
                    if isinstance(table, np.ndarray) and table.dtype == np.uint8 and table.ndim == 2:
                        return _FixedKeys(table)
                if self._key_table_required:
                    raise DatasetFormatError(
                        f"{_data_file(self.lmdb_path)}: no valid {KEYS_KEY.decode()} entry, which "
                        "LMDBSerializer.save always writes: the database is damaged or not one of its files"
                    )
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
        keys, bounds = self._keys, _file_bounds(self.lmdb_path)
        with _damage_named(self.lmdb_path), self._env.begin(buffers=True) as txn, txn.cursor() as cur:
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
                    raise DatasetFormatError(
                        f"{self.lmdb_path}: key {key!r} is listed but not in the database (damaged?)"
                    )
                _check_in_file(value, bounds, self.lmdb_path, key)
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

    _key_table_required = True

    def __init__(
        self, lmdb_path: str | os.PathLike, shuffle: bool = True, allow_pickle: bool = False, **kw: Any
    ):
        super().__init__(lmdb_path, shuffle, **kw)
        self.allow_pickle = allow_pickle

    def _datapoint(self, key: bytes, value: memoryview) -> Any:
        try:
            return unpack(bytearray(value), self.allow_pickle)
        except WireFormatError as e:
            raise DatasetFormatError(
                f"{self.lmdb_path}: entry {key!r} is not a datapoint record: {e}"
            ) from None


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

    path = os.fspath(path)
    if os.path.exists(path):
        raise FileExistsError(f"{path} already exists; LMDB datasets are written once, to a new path")
    df.reset_state()
    env = _open_env(path, readonly=False, map_size=INITIAL_MAP_SIZE)
    pending: list[tuple[bytes, bytes]] = []
    pending_bytes = count = 0
    try:
        with progress_bar(
            total=dataflow_len(df), unit="dp", disable=not progress, desc=f"writing {path}"
        ) as bar:
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
