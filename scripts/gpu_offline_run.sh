#!/usr/bin/env bash
# gpu_check.py --offline-synthetic on a CUDA machine that cannot download anything.
#
#   scripts/gpu_offline_run.sh STAGE OUT [SCRIPTS]
#
# STAGE holds what the machine lacks: whl/*.whl (ctranslate2, faster-whisper, platformdirs,
# diskcache), llama_src.tar.xz (the llama-cpp-python sdist, models/docs/tests removed) and
# assets/ (`scripts/synthetic_models.py export-tokenizers`). llama.cpp is built with CUDA in
# the background, at low priority, while the torch engines are timed. The JSON report goes
# to OUT/gpu_report.json, the build's log to OUT/llama_build.log.
set -o pipefail
STAGE=$(realpath "$1"); OUT=$(realpath "$2"); SCRIPTS=$(realpath "${3:-scripts}")
BUILD_LIMIT=${LLAMA_BUILD_LIMIT:-320}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 S2S_CACHE_DIR=/tmp/s2s-cache
mkdir -p "$OUT"

cuda_lib_args() {  # cuBLAS and the driver library where CMake's FindCUDAToolkit missed them
  local lib drv inc
  lib=$(find /usr/local /usr/lib /opt -name 'libcublas.so*' 2>/dev/null | grep -v stubs | sort | head -1)
  drv=$(find /usr/local/nvidia /usr/lib /usr/local/cuda* -name 'libcuda.so*' 2>/dev/null | sort | head -1)
  inc=$(find /usr/local /opt -name cublas_v2.h 2>/dev/null | head -1)
  [ -n "$lib" ] && echo -n " -DCUDA_cublas_LIBRARY=$lib -DCUDA_cublasLt_LIBRARY=${lib/libcublas/libcublasLt}"
  [ -n "$drv" ] && echo -n " -DCUDA_cuda_driver_LIBRARY=$drv"
  [ -n "$inc" ] && echo -n " -DCMAKE_CUDA_FLAGS=-I$(dirname "$inc") -DCMAKE_CXX_FLAGS=-I$(dirname "$inc")"
}

LL=/tmp/llama-build
rm -rf "$LL" && mkdir -p "$LL" && tar xJf "$STAGE/llama_src.tar.xz" -C "$LL"
SRC=$(echo "$LL"/llama_cpp_python-*)
(
  cd "$SRC" || exit 1
  start=$(date +%s)
  # FlashAttention kernels off: they double the build time; single arch (Hopper, sm_90)
  args="-G Ninja -Wno-dev -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90
        -DGGML_NATIVE=off -DGGML_CUDA_FA=off -DLLAVA_BUILD=off -DLLAMA_OPENSSL=off
        -DSKBUILD_PLATLIB_DIR=/tmp/llama-platlib"
  if ! cmake -S . -B b $args >build.log 2>&1; then
    echo "== retry with: $(cuda_lib_args)" >>build.log
    rm -rf b && cmake -S . -B b $args $(cuda_lib_args) >>build.log 2>&1
  fi && nice -n 19 timeout "$BUILD_LIMIT" ninja -C b -j16 >>build.log 2>&1 \
     && cmake --install b >>build.log 2>&1
  status=$?
  echo $(( $(date +%s) - start )) >build_s.txt
  if [ $status -eq 0 ]; then touch BUILD_OK; else tail -c 4000 build.log >BUILD_FAILED; fi
  cp build.log "$OUT/llama_build.log"
) &

PY=${PYTHON:-python3}
if [ -d "$STAGE/whl" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$STAGE"/whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
# GPU_CHECK_EXTRA="--tiny --allow-no-cuda" tries the whole run on a CPU machine
$PY "$SCRIPTS/gpu_check.py" --offline-synthetic "$STAGE/assets" --work /tmp/gpu-models \
  --llama-src "$SRC" --llama-wait $((BUILD_LIMIT + 20)) --report "$OUT/gpu_report.json" \
  $GPU_CHECK_EXTRA
rc=$?
wait
exit $rc
