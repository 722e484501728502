#!/usr/bin/env bash
# The two venvs the side-by-side needs, outside the repository (default /work/envs/ultralytics and
# /work/envs/ultralytics-edgetpu):
#
#     bash bench/importing/yolo/make_envs.sh [ULTRA_DIR] [EDGETPU_DIR]
#
# ULTRA_DIR: the project's own torch venv (.ci/ultralytics-env: torch 2.13.0+cpu, Ultralytics, onnx, litert-torch and
# ai-edge-quantizer for `format=tflite int8=True`): it trains, exports ONNX and LiteRT, and runs `model.val` on every
# .tflite file. EDGETPU_DIR: the same torch and Ultralytics plus what Ultralytics' `format=edgetpu` export asks
# check_requirements for on Python 3.11 (its own requirement strings, installed up front instead of mid-export):
# TensorFlow <= 2.19.0 (pinned to 2.19.0: left open, pip backtracked through 2.18.1, 2.18.0, 2.17.1, ... downloading
# 600 MB each), onnx2tf >= 1.26.3, < 1.29.0 (--no-deps, as Ultralytics installs it), tf_keras <= 2.19.0,
# sng4onnx, onnx_graphsurgeon, ai-edge-litert, protobuf >= 5. TensorFlow 2.19 pins numpy < 2.2 and protobuf < 6 and
# so brings older numpy, onnx and protobuf than ULTRA_DIR's: a second venv leaves the one the project's tests use as
# it is. A directory that already holds a python is kept as it is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
ultra="${1:-/work/envs/ultralytics}"
edgetpu="${2:-/work/envs/ultralytics-edgetpu}"

if [ ! -x "$ultra/bin/python" ]; then
    bash "$repo/.ci/ultralytics-env" --make "$ultra"
fi
if [ ! -x "$edgetpu/bin/python" ]; then
    python="$(bash "$repo/.ci/python" make_envs 3.11)"
    "$python" -m venv "$edgetpu"
    pip=("$edgetpu/bin/python" -m pip install --disable-pip-version-check --progress-bar off)
    # The Ultralytics of ULTRA_DIR, so both paths are one Ultralytics release.
    release="$("$ultra/bin/python" -c "from importlib.metadata import version; print(version('ultralytics'))")"
    "${pip[@]}" "torch==2.13.0+cpu" "torchvision==0.28.*" "ultralytics==$release" "onnx>=1.12.0,<2.0.0" "onnxslim>=0.1.82" \
        onnxruntime "tensorflow==2.19.0" "tf_keras<=2.19.0" "sng4onnx>=1.0.1" "onnx_graphsurgeon>=0.3.26" \
        "ai-edge-litert>=1.2.0" "protobuf>=5" pillow
    "${pip[@]}" --no-deps "onnx2tf>=1.26.3,<1.29.0"
    if ! "$edgetpu/bin/python" -c "import torchvision" 2>/dev/null; then
        site="$("$edgetpu/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
        cp "$repo/.ci/ultralytics/torchvision_cpu_ops.py" "$site/"
        echo "import torchvision_cpu_ops" > "$site/torchvision_cpu_ops.pth"
    fi
fi
"$ultra/bin/python" -c "import torch, ultralytics, onnx, litert_torch, ai_edge_quantizer, ai_edge_litert; print('ultralytics venv:', ultralytics.__version__, torch.__version__)"
"$edgetpu/bin/python" -c "import torch, ultralytics, tensorflow as tf, onnx2tf, onnx, numpy; print('edgetpu venv:', ultralytics.__version__, torch.__version__, 'tensorflow', tf.__version__, 'onnx2tf', onnx2tf.__version__, 'onnx', onnx.__version__, 'numpy', numpy.__version__)"
