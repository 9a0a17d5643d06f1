#!/usr/bin/env bash
# Install Horovod (Gloo + TensorFlow, no MPI) into a virtualenv from a cached wheel,
# building the wheel from the PyPI sdist on the first run.
#
#   scripts/build_horovod.sh VENV [CACHE_DIR]
#
# The wheel is cached under CACHE_DIR/<horovod>-tf<tf>-<python tag>-<cpu|cuda>/ so later runs
# take seconds. With a CUDA build of TensorFlow and nvcc present it is built with NCCL GPU
# operations (HOROVOD_FLAVOR=cpu|cuda overrides the choice).
set -euo pipefail

VENV=${1:?usage: build_horovod.sh VENV [CACHE_DIR]}
CACHE_DIR=${2:-.cache/wheels}
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
PY="$VENV/bin/python"
ROOT=$(cd "$(dirname "$0")/.." && pwd)

# Prints "<version> <cpu|cuda>": the installed TensorFlow and whether it is the CUDA build.
read -r tf_version tf_flavor < <("$PY" - <<'PY'
from importlib.metadata import PackageNotFoundError, version
for name, flavor in (("tensorflow-cpu", "cpu"), ("tensorflow", "cuda")):
    try:
        print(version(name), flavor)
        break
    except PackageNotFoundError:
        pass
else:
    raise SystemExit("TensorFlow is not installed in the virtualenv; install towerpack-trainer first")
PY
)
py_tag=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')

# NCCL operations need both a CUDA TensorFlow and the CUDA compiler (nvcc alone, as on machines
# without a GPU, is not enough).
if [ -n "${HOROVOD_FLAVOR:-}" ]; then
    flavor=$HOROVOD_FLAVOR
elif [ "$tf_flavor" = cuda ] && command -v nvcc >/dev/null 2>&1; then
    flavor=cuda
else
    flavor=cpu
fi
# The patch level: bump it when the source patches below change, so cached wheels are rebuilt.
patches=p1
key="horovod-${HOROVOD_VERSION}-${patches}-tf${tf_version}-${py_tag}-${flavor}"
wheel_dir="$CACHE_DIR/$key"

if ! ls "$wheel_dir"/horovod-*.whl >/dev/null 2>&1; then
    echo "building Horovod $HOROVOD_VERSION for TensorFlow $tf_version ($py_tag, $flavor); takes a few minutes once"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    "$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "horovod==$HOROVOD_VERSION"
    tar -xzf "$work"/horovod-"$HOROVOD_VERSION".tar.gz -C "$work"
    src="$work/horovod-$HOROVOD_VERSION"
    # Horovod's XLA ops (off by default) do not compile against recent TensorFlow headers.
    sed -i '/xla_mpi_ops\.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
    # Horovod's process-set Gloo contexts (the global set included) make their TCP device with an
    # empty interface name instead of HOROVOD_GLOO_IFACE, so Gloo falls back to the address the
    # host name resolves to: 127.0.1.1 with Debian's default /etc/hosts, and then ranks on other
    # hosts cannot connect. Use the interface the global context was given.
    ctx="$src/horovod/common/gloo/gloo_context.cc"
    sed -i '/^void GlooContext::InitializeForProcessSet/,/CreateDevice(device_attr)/ s/device_attr\.iface = gloo_iface_;/gloo_iface_ = global_context.gloo_iface_;\n  device_attr.iface = gloo_iface_;/' "$ctx"
    grep -q 'gloo_iface_ = global_context.gloo_iface_;' "$ctx" || { echo "the Gloo interface patch no longer applies to $ctx" >&2; exit 1; }
    export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
    export HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1
    export MAKEFLAGS="-j$(nproc)"
    if [ "$flavor" = cuda ]; then
        export HOROVOD_GPU_OPERATIONS=NCCL
        nvcc_path=$(command -v nvcc)
        export HOROVOD_CUDA_HOME=${HOROVOD_CUDA_HOME:-$(dirname "$(dirname "$nvcc_path")")}
        # tensorflow[and-cuda] brings NCCL as a pip package; point Horovod at it.
        nccl_dir=$("$PY" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)
        if [ -n "$nccl_dir" ]; then
            export HOROVOD_NCCL_INCLUDE=${HOROVOD_NCCL_INCLUDE:-$nccl_dir/include}
            export HOROVOD_NCCL_LIB=${HOROVOD_NCCL_LIB:-$nccl_dir/lib}
        fi
    fi
    # Gloo's CMake files need CMake 3.x; the virtualenv carries one (constraints.txt pins it).
    PATH="$VENV/bin:$PATH" "$PY" -m pip wheel --quiet --no-build-isolation --no-deps -w "$work/wheel" "$src"
    mkdir -p "$wheel_dir"
    mv "$work"/wheel/horovod-*.whl "$wheel_dir"/
fi

"$PY" -m pip install --quiet --no-deps --force-reinstall "$wheel_dir"/horovod-*.whl
# Horovod's own runtime requirements, pinned by the project's constraints.
"$PY" -m pip install --quiet -c "$ROOT/constraints.txt" cloudpickle psutil pyyaml packaging
echo "horovod $HOROVOD_VERSION installed from $wheel_dir"
