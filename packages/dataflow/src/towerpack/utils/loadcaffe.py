"""Caffe models to towerpack weights: ``load_caffe`` and ``python -m towerpack.utils.loadcaffe``.

``python -m towerpack.utils.loadcaffe PROTOTXT CAFFEMODEL OUT.npz`` writes the weights of a Caffe
model under the names towerpack's layers use, ready for ``SmartInit('OUT.npz')``:

- Convolution ``L``: ``L/W`` (h, w, in, out, from Caffe's out, in, h, w) and ``L/b``;
- InnerProduct ``L``: ``L/W`` (in, out) and ``L/b``; after a spatial (N, C, H, W) input, ``W`` is
  stored 4-D as (H, W, C, out) so that it matches an NHWC flatten;
- BatchNorm ``L``: ``L/mean/EMA`` and ``L/variance/EMA`` (Caffe's running sums divided by its
  scale factor);
- Scale after a BatchNorm (same input): ``L/gamma`` and ``L/beta`` of that BatchNorm.

Other layers with weights are reported and skipped. Reading a model needs pycaffe (``import
caffe``), which is not on PyPI: build it from Caffe's sources. The conversion itself
(:func:`convert_layers`) works on plain arrays.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from .fs import download, get_dataset_path
from .utils import change_env

__all__ = ["get_caffe_pb", "load_caffe"]

_log = logging.getLogger(__name__)

CAFFE_PROTO_URL = "https://github.com/BVLC/caffe/raw/master/src/caffe/proto/caffe.proto"


@dataclass(frozen=True)
class CaffeLayer:
    """What the conversion needs of one layer of a Caffe net."""

    name: str
    type: str
    blobs: Sequence[np.ndarray] = ()
    #: The names of the blobs the layer reads.
    bottoms: Sequence[str] = ()
    #: The shape of its first input blob (needed for InnerProduct after a spatial layer).
    input_shape: tuple[int, ...] = field(default=())


def convert_layers(layers: Sequence[CaffeLayer]) -> dict[str, np.ndarray]:
    """The towerpack weights (name -> array) of these layers, by the rules in the module docstring."""
    params: dict[str, np.ndarray] = {}
    for layer in layers:
        convert = _CONVERTERS.get(layer.type)
        if convert is not None:
            _log.info("Converting layer %s of type %s", layer.name, layer.type)
            params.update(convert(layer, layers))
        elif len(layer.blobs):
            _log.warning(
                "Layer %s of type %s has weights but is not supported: skipped", layer.name, layer.type
            )
    return params


def _expect_blobs(layer: CaffeLayer, counts: Sequence[int]) -> None:
    if len(layer.blobs) not in counts:
        wanted = " or ".join(str(c) for c in counts)
        raise ValueError(
            f"{layer.type} layer {layer.name} has {len(layer.blobs)} weight blobs, expected {wanted}"
        )


def _conv(layer: CaffeLayer, _: Sequence[CaffeLayer]) -> dict[str, np.ndarray]:
    _expect_blobs(layer, (1, 2))
    w = np.asarray(layer.blobs[0])
    if w.ndim != 4:
        raise ValueError(f"Convolution layer {layer.name}: weights of shape {w.shape}, expected 4-D")
    out = {f"{layer.name}/W": w.transpose(2, 3, 1, 0)}
    if len(layer.blobs) == 2:
        out[f"{layer.name}/b"] = np.asarray(layer.blobs[1])
    return out


def _fc(layer: CaffeLayer, _: Sequence[CaffeLayer]) -> dict[str, np.ndarray]:
    _expect_blobs(layer, (2,))
    w = np.asarray(layer.blobs[0])
    if len(layer.input_shape) == 4:
        _log.info("InnerProduct layer %s reads a spatial input %s", layer.name, layer.input_shape)
        w = w.reshape((-1, *layer.input_shape[1:])).transpose(2, 3, 1, 0)
    else:
        w = w.T
    return {f"{layer.name}/W": w, f"{layer.name}/b": np.asarray(layer.blobs[1])}


def _bn(layer: CaffeLayer, _: Sequence[CaffeLayer]) -> dict[str, np.ndarray]:
    _expect_blobs(layer, (3,))
    scale = float(np.asarray(layer.blobs[2]).ravel()[0])
    scale = 1.0 / scale if scale != 0 else 0.0  # Caffe stores a zero factor for untrained statistics
    return {
        f"{layer.name}/mean/EMA": np.asarray(layer.blobs[0]) * scale,
        f"{layer.name}/variance/EMA": np.asarray(layer.blobs[1]) * scale,
    }


def _scale(layer: CaffeLayer, layers: Sequence[CaffeLayer]) -> dict[str, np.ndarray]:
    _expect_blobs(layer, (2,))
    bottom = layer.bottoms[0] if layer.bottoms else None
    for other in layers:
        if other.type == "BatchNorm" and other.bottoms and other.bottoms[0] == bottom:
            _log.info("Merging Scale layer %s into BatchNorm layer %s", layer.name, other.name)
            return {
                f"{other.name}/gamma": np.asarray(layer.blobs[0]),
                f"{other.name}/beta": np.asarray(layer.blobs[1]),
            }
    raise ValueError(
        f"Scale layer {layer.name} does not follow a BatchNorm layer (none reads its input {bottom!r}); "
        "only Scale layers that complete a BatchNorm are supported"
    )


_CONVERTERS = {"Convolution": _conv, "InnerProduct": _fc, "BatchNorm": _bn, "Scale": _scale}


def _import_caffe() -> ModuleType:
    with change_env("GLOG_minloglevel", "2"):
        try:
            import caffe
        except ImportError as e:
            raise ImportError(
                f"loading a Caffe model needs pycaffe (`import caffe` failed: {e}); it is not on PyPI: "
                "build Caffe with its Python interface and put it on PYTHONPATH"
            ) from None
    return caffe


def _layers_of(net) -> list[CaffeLayer]:
    """The layers of a pycaffe ``Net``."""
    layers = []
    for name, layer in zip(net._layer_names, net.layers, strict=True):
        bottoms = tuple(net.bottom_names.get(name, ()))
        shape = tuple(net.blobs[bottoms[0]].data.shape) if bottoms and bottoms[0] in net.blobs else ()
        blobs = [np.array(b.data) for b in layer.blobs]
        layers.append(CaffeLayer(name, layer.type, blobs, bottoms, shape))
    return layers


def load_caffe(model_desc: str, model_file: str) -> dict[str, np.ndarray]:
    """The weights of a Caffe model as towerpack names them (see the module docstring).

    Args:
        model_desc: the ``.prototxt`` file.
        model_file: the ``.caffemodel`` file.
    """
    for path in (model_desc, model_file):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"load_caffe: {path} does not exist")
    caffe = _import_caffe()
    with change_env("GLOG_minloglevel", "2"):
        caffe.set_mode_cpu()
        net = caffe.Net(model_desc, model_file, caffe.TEST)
    params = convert_layers(_layers_of(net))
    _log.info("Loaded %d arrays from the Caffe model: %s", len(params), ", ".join(sorted(params)))
    return params


def get_caffe_pb() -> ModuleType:
    """Caffe's protobuf module (``caffe_pb2``), to read ``.caffemodel`` files without pycaffe.

    On first use it downloads ``caffe.proto`` into ``get_dataset_path('caffe')`` and compiles it
    with ``protoc`` (which must be on PATH); reading it needs the ``protobuf`` package.
    """
    folder = get_dataset_path("caffe")
    module_file = os.path.join(folder, "caffe_pb2.py")
    if not os.path.isfile(module_file):
        protoc = shutil.which("protoc")
        if protoc is None:
            raise FileNotFoundError(
                "get_caffe_pb compiles caffe.proto with protoc, which is not on PATH "
                "(Debian/Ubuntu: apt-get install protobuf-compiler)"
            )
        download(CAFFE_PROTO_URL, folder)
        done = subprocess.run(
            [protoc, "caffe.proto", "--python_out", "."], cwd=folder, capture_output=True, text=True
        )
        if done.returncode != 0 or not os.path.isfile(module_file):
            raise RuntimeError(f"protoc could not compile {folder}/caffe.proto: {done.stderr.strip()}")
    spec = importlib.util.spec_from_file_location("caffe_pb2", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _save(params: dict[str, np.ndarray], output: str) -> None:
    if output.endswith(".npz"):
        np.savez_compressed(output, **params)
    else:
        _log.warning("%s: a .npy file holds a pickled dict; prefer .npz", output)
        np.save(output, params, allow_pickle=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m towerpack.utils.loadcaffe",
        description="Convert a Caffe model's weights into an .npz file of towerpack weight names.",
    )
    parser.add_argument("model", help="the model description (.prototxt)")
    parser.add_argument("weights", help="the weights (.caffemodel)")
    parser.add_argument("output", help="the file to write: .npz (or .npy, a pickled dict)")
    args = parser.parse_args(argv)
    if not args.output.endswith((".npz", ".npy")):
        parser.error(f"the output must end in .npz or .npy, got {args.output}")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        params = load_caffe(args.model, args.weights)
    except (ImportError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    _save(params, args.output)
    print(f"wrote {len(params)} arrays to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
