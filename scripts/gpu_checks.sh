#!/usr/bin/env bash
# Run fixes' GPU tests, then GPU benchmarks, on the device machine, for one torch.
#
#   bash scripts/gpu_checks.sh LABEL "PACKAGE ..." ["BENCHMARK ARGS;BENCHMARK ARGS"]
#
# Expects torchfix wheels in .whl-tf/ (built here with `pip wheel`, carried to the machine) and, for a
# torch other than the image's, `. $HOME/gw/env-VERSION.sh` sourced first (../shared/tools/gpu-torch-wheels).
# Writes gpu-LABEL.log (and bench-LABEL.log) under $OUT, which the device tool brings back.
set -uo pipefail
label=$1
packages=${2:-"torchfix-autotune torchfix-sac-replay"}
benchmarks=${3:-}
out=${OUT:-/tmp/out}; mkdir -p "$out"
rm -rf /tmp/tf && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tf .whl-tf/*.whl || exit 1
export PYTHONPATH=/tmp/tf${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
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
