#!/usr/bin/env bash
# One matrix cell without nox, for a machine with no package index (the GPU machine): the installed
# torch and Python, torchfix from prebuilt wheels, every test directory run in parallel.
#
#   bash scripts/run_matrix_cell.sh SRC WHEEL_DIR OUT_DIR [JOBS]
#
# SRC: a checkout (its packages/*/tests and tests/ are run). WHEEL_DIR: torchfix wheels (core, the
# fixes, -all, the two demo fixtures) plus hatchling and its dependencies (the core's fault tests
# install a fixture from source). SRC/.commit, if present, names the commit SRC was exported from.
# As `nox -s tests_torch` does, the two demo fixtures (torchfix_demo_*) are on torchfix-core's
# tests' PYTHONPATH only: every other directory runs with what a user's environment holds.
# Writes OUT_DIR/torch-X.Y.Z-pyA.B/{doctor.json,commit.txt,<dir>.xml,<dir>.log},
# the layout scripts/compatibility.py reads from .matrix-results/.
# CELL_ONLY / CELL_SKIP (space-separated names such as "torchfix-aot-fallback cross-package") run a
# part of the cell, so that a cell can be split over calls of a machine with a time limit per call;
# each test process gets OMP_NUM_THREADS = cores / JOBS.
set -uo pipefail
src=$(cd "$1" && pwd) wheels=$2 out=$3 jobs=${4:-8}
site=$(mktemp -d) fixtures=$(mktemp -d)
shopt -s nullglob
demos=("$wheels"/torchfix_demo_*.whl) others=()
for wheel in "$wheels"/*.whl; do [[ $wheel == */torchfix_demo_* ]] || others+=("$wheel"); done
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "${others[@]}" || exit 1
if [ ${#demos[@]} -gt 0 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$fixtures" "${demos[@]}" || exit 1
fi
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} TORCHINDUCTOR_COMPILE_THREADS=1 PYTHONDONTWRITEBYTECODE=1
threads=$(( $(nproc) / jobs )); export OMP_NUM_THREADS=$(( threads > 0 ? threads : 1 ))
cell=torch-$(python3 -c 'import torch; print(torch.__version__.split("+")[0])')-py$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
mkdir -p "$out/$cell"
python3 -m torchfix_core --json > "$out/$cell/doctor.json"
cp "$src/.commit" "$out/$cell/commit.txt" 2>/dev/null || git -C "$src" rev-parse --short HEAD > "$out/$cell/commit.txt" 2>/dev/null
for dir in "$src"/packages/torchfix-*/tests "$src/tests"; do
  name=$(basename "$(dirname "$dir")"); [ "$dir" = "$src/tests" ] && name=cross-package
  if [ -n "${CELL_ONLY:-}" ] && [[ " $CELL_ONLY " != *" $name "* ]]; then continue; fi
  if [[ " ${CELL_SKIP:-} " == *" $name "* ]]; then continue; fi
  own=""; [ "$name" = torchfix-core ] && own=$fixtures:
  (cd "$src" && PYTHONPATH=$own$PYTHONPATH python3 -m pytest -q -p no:cacheprovider -m "not gpu and not slow" --junitxml "$out/$cell/$name.xml" \
    "$dir" > "$out/$cell/$name.log" 2>&1; echo "$cell $name: exit $? $(tail -1 "$out/$cell/$name.log")") &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
done
wait
