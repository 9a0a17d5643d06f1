"""The ``dataflow`` command: ``serve``, ``write``, ``inspect``, ``bench``, ``keygen``, ``pack-images`` and
``read-images`` (built with fire)."""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
from typing import Any

import fire

from .cli_error import CLIError
from .formats.serializers import Format, load_dataset, save_dataset
from .parallel.runners import MultiProcessRunnerZMQ
from .pipeline.base import DataFlow
from .pipeline.printing import describe_datapoint
from .pipeline.sharding import set_rank_info
from .pipeline.speed import benchmark
from .serve.server import MAX_CONSUMERS, MAX_WINDOW, DataServer, ServerError
from .wire.credit import HEARTBEAT_S
from .wire.security import create_keys

logger = logging.getLogger("towerpack.dataflow.serve")


def load_factory(spec: str) -> DataFlow:
    """Import ``MODULE:FACTORY`` (the current directory is importable) and call the factory."""
    module_name, sep, attr = str(spec).partition(":")
    if not sep or not module_name or not attr:
        raise CLIError(f"expected MODULE:FACTORY (e.g. mypkg.data:make_df), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise CLIError(f"cannot import {module_name!r}: {e}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise CLIError(f"module {module_name!r} has no attribute {attr!r}")
    df = factory() if callable(factory) and not isinstance(factory, DataFlow) else factory
    if not isinstance(df, DataFlow):
        raise CLIError(f"{spec} returned {type(df).__name__}, not a DataFlow")
    return df


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _parse_shard(shard: str) -> tuple[int, int]:
    index, sep, count = str(shard).partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = -1
    if not sep or not 0 <= i < n:
        raise CLIError(f"--shard must be I/N with 0 <= I < N (e.g. 0/2), got {shard!r}")
    return i, n


def serve(
    factory: str,
    bind: str = "tcp://127.0.0.1:9100",
    workers: int = 0,
    curve_secret_key: str | None = None,
    curve_authorized: str | None = None,
    allow_pickle: bool = False,
    hwm: int = MAX_WINDOW,
    heartbeat: float = HEARTBEAT_S,
    epochs: bool = False,
    shard: str | None = None,
    max_consumers: int = MAX_CONSUMERS,
    stats: float | None = None,
) -> None:
    """Serve the dataflow made by FACTORY (MODULE:FACTORY) to RemoteDataZMQ consumers.

    Args:
        factory: MODULE:FACTORY, a function returning a DataFlow.
        bind: endpoint to bind.
        workers: run the dataflow in this many worker processes (0: in the server process);
            readers and ShardData in it split each epoch among them.
        curve_secret_key: the server's NAME.key_secret file; enables CURVE.
        curve_authorized: directory with the public keys of allowed clients (read at start).
        allow_pickle: let non-array objects travel pickled.
        hwm: the most datapoints in flight to one consumer (1 to 1000; a consumer asking for a
            larger window gets this one); bounds the server's memory to hwm x consumers datapoints.
        heartbeat: drop a consumer that answers no heartbeat for this many seconds.
        epochs: send consumers an end-of-epoch mark after each epoch of the dataflow, once all of
            it has been acknowledged.
        shard: I/N: serve shard I of N of every epoch (for N servers of one dataset), as if
            its placement were rank I of N.
        max_consumers: connections admitted at once; more are refused.
        stats: print datapoints/s, consumers and unacknowledged datapoints every this many seconds.
    """
    if curve_authorized is not None and curve_secret_key is None:
        raise CLIError("--curve-authorized needs --curve-secret-key (the server's own NAME.key_secret file)")
    if isinstance(hwm, bool) or not isinstance(hwm, int) or not 1 <= hwm <= MAX_WINDOW:
        raise CLIError(f"--hwm must be an integer from 1 to {MAX_WINDOW}, got {hwm!r}")
    if shard is not None:
        set_rank_info(*_parse_shard(shard))

    def make() -> DataFlow:  # made again for every exact-resume job that joins (see data_servers.md)
        df = load_factory(factory)
        return MultiProcessRunnerZMQ(df, num_proc=int(workers), allow_pickle=allow_pickle) if workers else df

    df = make()
    try:
        server = DataServer(
            df,
            bind,
            hwm=hwm,
            curve_secret_key=curve_secret_key,
            curve_authorized=curve_authorized,
            allow_pickle=allow_pickle,
            report=lambda line: print(f"[dataflow serve] {line}", flush=True),
            heartbeat=heartbeat,
            mark_epochs=bool(epochs),
            max_consumers=max_consumers,
            stats_every=stats,
            factory=make,
        )
    except ValueError as e:
        raise CLIError(str(e)) from None
    signal.signal(signal.SIGTERM, _raise_interrupt)
    print(f"[dataflow serve] starting {factory} with {workers or 'no'} worker processes", flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:
        print(f"[dataflow serve] stopped after {server.sent} datapoints", flush=True)
    except ServerError as e:
        raise CLIError(str(e)) from None


def bench(factory: str, size: int = 1000, warmup: int = 10, workers: int = 0) -> None:
    """Print the throughput of the dataflow made by FACTORY (MODULE:FACTORY).

    Args:
        factory: MODULE:FACTORY, a function returning a DataFlow.
        size: datapoints to time.
        warmup: datapoints to take before timing.
        workers: run the dataflow in this many worker processes through MultiProcessRunnerZMQ.
    """
    df = load_factory(factory)
    if workers:
        df = MultiProcessRunnerZMQ(df, num_proc=int(workers))
    try:
        report = benchmark(df, int(size), int(warmup))
    finally:
        close = getattr(df, "close", None)
        if callable(close):
            close()
    print(report, flush=True)


def _paths(data_paths: Any) -> list[str] | None:
    if data_paths is None:
        return None
    if isinstance(data_paths, (list, tuple)):
        return [str(p) for p in data_paths]
    return [p for p in str(data_paths).split(",") if p]


def write(
    factory: str, output: str, format: str | None = None, data_paths: Any = None, allow_pickle: bool = False
) -> None:
    """Write one epoch of the dataflow made by FACTORY (MODULE:FACTORY) to a dataset file.

    Args:
        factory: MODULE:FACTORY, a function returning a DataFlow.
        output: the file to create (it must not exist).
        format: lmdb, tfrecord, numpy or hdf5; by default from OUTPUT's extension
            (.lmdb, .tfrecord, .npz, .h5).
        data_paths: for hdf5, one dataset name per component, comma-separated.
        allow_pickle: store objects that are not arrays, numbers or strings pickled.
    """
    try:
        fmt = Format.of(output, format)
    except ValueError as e:
        raise CLIError(str(e)) from None
    if os.path.exists(output):
        raise CLIError(f"{output} already exists; write to a new path")
    df = load_factory(factory)
    extra = {} if fmt is Format.HDF5 else {"allow_pickle": allow_pickle}
    try:
        count = save_dataset(df, output, fmt, _paths(data_paths), **extra)
    except (ValueError, TypeError) as e:
        raise CLIError(f"cannot write {output}: {e}") from None
    print(f"wrote {count} datapoints to {output} ({fmt.value})", flush=True)


def inspect(
    path: str, format: str | None = None, data_paths: Any = None, size: int = 2000, allow_pickle: bool = False
) -> None:
    """Print a dataset's size, its first datapoint's structure and how fast it reads.

    Args:
        path: the dataset file (or LMDB directory).
        format: lmdb, tfrecord, numpy or hdf5; by default from the extension.
        data_paths: for hdf5, the datasets to read, comma-separated.
        size: datapoints to time (at most one epoch), read sequentially in this process.
        allow_pickle: read datapoints stored pickled.
    """
    try:
        fmt = Format.of(path, format)
        extra = {} if fmt is Format.HDF5 else {"allow_pickle": allow_pickle}
        df = load_dataset(path, fmt, _paths(data_paths), shuffle=False, shard=False, **extra)
    except (ValueError, OSError, KeyError) as e:
        raise CLIError(f"cannot open {path}: {e}") from None
    count = len(df)
    print(f"{path}: {fmt.value}, {count} datapoints", flush=True)
    if count == 0:
        return
    df.reset_state()
    first = next(iter(df))
    print("first datapoint:\n" + describe_datapoint(first), flush=True)
    report = benchmark(df, min(int(size), count), reset=False, progress=False)
    print(f"sequential read: {report}", flush=True)


def keygen(directory: str, name: str = "server") -> None:
    """Create a CURVE key pair NAME.key (public) and NAME.key_secret in DIRECTORY."""
    public, secret = create_keys(directory, name)
    print(f"public key: {public}\nsecret key: {secret}", flush=True)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(levelname)s %(message)s")
    # Imported here: the image commands load cv2, which the other commands do not need.
    from .image.commands import pack_images, read_images

    try:
        commands = {"serve": serve, "write": write, "inspect": inspect, "bench": bench, "keygen": keygen}
        commands |= {"pack-images": pack_images, "read-images": read_images}
        fire.Fire(commands, command=argv, name="dataflow")
    except CLIError as e:
        print(f"dataflow: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
