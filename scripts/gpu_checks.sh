#!/usr/bin/env bash
# Run every fix's GPU tests and GPU benchmarks on the device machine, for one torch.
#
#   bash scripts/gpu_checks.sh LABEL [PACKAGE ...]
#
# Expects torchfix wheels in .whl-tf/ (built here with `uv build`, carried to the machine) and, for a
# torch other than the image's, `. $HOME/gw/env-VERSION.sh` sourced first (../shared/tools/gpu-torch-wheels).
# Writes gpu-LABEL.log and bench-LABEL.log under $OUT (the device tool brings them back).
set -uo pipefail
label=$1; shift
packages=("$@")
[ ${#packages[@]} -eq 0 ] && packages=(torchfix-autotune torchfix-sac-replay)
out=${OUT:-/tmp/out}; mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tf .whl-tf/*.whl || exit 1
export PYTHONPATH=/tmp/tf${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{
  python3 -c 'import torch, triton, sys; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "python", sys.version.split()[0])'
  python3 -m torchfix_core --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print("activation:", r["activation"]); [print(" ", f["id"], f["state"], "-", f["reason"]) for f in r["fixes"]]'
  for p in "${packages[@]}"; do
    [ -d "packages/$p/tests" ] || continue
    echo "=== $p: pytest -m gpu"
    python3 -m pytest -p no:cacheprovider -m gpu -v -rA "packages/$p/tests" 2>&1 | tail -60
  done
} 2>&1 | tee "$out/gpu-$label.log"
{
  for script in "${BENCHMARKS[@]:-}"; do
    [ -n "$script" ] && [ -f "$script" ] || continue
    echo "=== $script"
    timeout 240 python3 "$script" 2>&1 | tail -40
  done
} 2>&1 | tee "$out/bench-$label.log"
