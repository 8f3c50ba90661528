#!/usr/bin/env bash
# Run fixes' GPU tests, then GPU benchmarks, on a CUDA machine, for one torch.
#
#   bash scripts/gpu_checks.sh LABEL "PACKAGE ..." ["BENCHMARK ARGS;BENCHMARK ARGS"] [WHEEL_DIR] [TORCH_SITE]
#
#   LABEL       names the logs: gpu-LABEL.log, bench-LABEL.log under $OUT (default ./gpu-out)
#   PACKAGE     packages/<PACKAGE>/tests are run with `pytest -m gpu` (default: autotune, sac-replay)
#   BENCHMARK   benchmark command lines (script and arguments), separated by ';'
#   WHEEL_DIR   torchfix wheels (`pip wheel --no-deps -w DIR packages/*`), installed with
#               `pip install --no-index --no-deps --target` (default: wheels)
#   TORCH_SITE  optional directory holding a CUDA torch installed with --target, put first on
#               PYTHONPATH; without it the machine's own torch is used
#
# Staging a CUDA torch for a machine without network access, with plain pip (on a machine with it):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#       -d torch-wheels torch==2.13.0 triton==<the version torch pins> nvidia-nccl-cu13
#   (copy torch-wheels/ over, then)  pip install --no-index --no-deps --target site-2.13 torch-wheels/*.whl
set -uo pipefail
label=$1
packages=${2:-"torchfix-autotune torchfix-sac-replay"}
benchmarks=${3:-}
wheels=${4:-wheels}
torch_site=${5:-}
out=${OUT:-gpu-out}; mkdir -p "$out"
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheels"/*.whl || exit 1
export PYTHONPATH=$site${torch_site:+:$torch_site}${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{
  python3 -c 'import torch, triton, sys; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "python", sys.version.split()[0])'
  python3 -m torchfix_core --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print("activation:", r["activation"]); [print(" ", f["id"], f["state"], "-", f["reason"]) for f in r["fixes"]]'
  for p in $packages; do
    echo "=== $p: pytest -m gpu"
    python3 -m pytest -p no:cacheprovider -m gpu -v -rA "packages/$p/tests" 2>&1 | tail -40
  done
} 2>&1 | tee "$out/gpu-$label.log"
[ -z "$benchmarks" ] && exit 0
IFS=';' read -ra items <<< "$benchmarks"
for item in "${items[@]}"; do
  echo "=== $item"
  # shellcheck disable=SC2086
  timeout 300 python3 $item 2>&1 | tail -40
done 2>&1 | tee "$out/bench-$label.log"
