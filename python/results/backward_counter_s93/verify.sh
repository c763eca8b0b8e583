#!/bin/bash
# backward_counter.patch applied (restored at exit), the package built and its attention tests run (about 3
# minutes on an H100). Run from the repository root: bash python/results/backward_counter_s93/verify.sh
set -o pipefail
HERE=python/results/backward_counter_s93; L=${OUT:+$OUT/counter}; L=${L:-./counter_out}; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
FILES="python/csrc/bridge.hpp python/csrc/bridge_attention_hopper.cu python/csrc/ops.cpp"
mkdir -p /tmp/counter_orig; for f in $FILES; do cp $f /tmp/counter_orig/; done
trap 'for f in $FILES; do cp /tmp/counter_orig/$(basename $f) $f; touch $f; done' EXIT
patch -p1 --quiet < $HERE/backward_counter.patch || { echo "backward_counter.patch does not apply"; exit 2; }
MAX_JOBS=14 python3 -m pip install --no-build-isolation ./python > $L/pip.log 2>&1; t "pip rc=$?"
python3 -c "from cuda_perf_lab import _C; print([(s, _C.hopper_attention_backward_kernel(*s)) for s in
  [(8, 16, 4096, 64), (4, 12, 1024, 64), (8, 16, 4096, 128)]])" 2>&1 | tee -a $L/timeline
timeout 300 python3 -m pytest python/tests -q -k attention > $L/pytest_attention.txt 2>&1
t "pytest -k attention rc=$? $(tail -1 $L/pytest_attention.txt)"
