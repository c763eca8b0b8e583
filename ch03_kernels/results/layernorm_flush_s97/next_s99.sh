#!/bin/bash
# The flush that also empties evict_last lines (flush_last.patch: tools/torch_timing.py's L2Flush and
# tools/l2_flush_last.py), measured on its own before any table is regenerated (written in session 98,
# not run). Two device calls on one warm machine (pip's build of the package cold may take most of
# the first), from the repository root:
#   bash ch03_kernels/results/layernorm_flush_s97/next_s99.sh install   # the programs and the package
#   bash ch03_kernels/results/layernorm_flush_s97/next_s99.sh measure   # about 6 minutes
# install builds the two LayerNorm programs and the package (pip install ./python); measure times, in
# one process each and on one machine: torch_ops_bench's bf16 LayerNorm (forward and backward), GELU and
# cross-entropy rows with the tools' flush as it is ("before"), then with the patch applied ("after"),
# then ln_flush.py with the patch (its "ordinary" form reads the buffer alone, so its two forms stay
# the two flushes), and the tools' CPU tests with the patch. The patch is taken back at exit.
#   bash ch03_kernels/results/layernorm_flush_s97/next_s99.sh flushes   # session 99's next step, ~2 min
# flushes runs ln_flush.py at 16384x768 and 8192x4096 under four flushes: ordinary, last, and the two
# written in session 99 (discard, demote; not run yet). The one to keep: torch.compile's y-only form at
# 16384x768 as slow as under "last", eager at 8192x4096 as fast as under "ordinary".
# OPS=layernorm_bf16,layernorm_backward_bf16 (an environment variable) times those rows alone, for a call
# that must also install the package (session 99 planned it so, with the device's time short).
# What would follow: every torch.compile figure that loads with evict_last is a little slower "after"
# and the lab's figures do not move (no lab kernel loads with hints: grep evict_last). If so, the
# patch lands (one commit, its README saying which tables were timed before it), and the python
# README's LayerNorm row at 16384x768 is timed again with it.
# Run it on a tree without the patch: measure applies it for "after" and takes it back at exit, so a
# copy applied by hand beforehand would be taken back too (and "before" would not be before).
# tools (session 100; no package, no build, about 2 minutes): tools_flush.py with the patch applied, the tools'
# own flush against the ordinary sum, then test_tools with the patch.
# yonly (session 100; about 3 minutes cold): would the lab's forward gain by not writing mean and rstd where
# no gradient is wanted (torch.compile's y-only kernel does not)? Builds optimized_layernorm_bf16 three
# ways (as it is; the statistics' store behind a null check; no statistics' store at all) and times them
# alternated, four rounds at 16384x768. Changes the source only in the device's copy, and puts it back.
# Writes into $OUT/f (or ./flush_out without $OUT).
set -o pipefail
HERE=ch03_kernels/results/layernorm_flush_s97
L=${OUT:+$OUT/f}; L=${L:-./flush_out}; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
trap 'git apply -R $HERE/flush_last.patch 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) &&
  cmake --build build -j16 --target optimized_layernorm_bf16 optimized_layernorm_backward_one_pass_bf16 > $L/build.log 2>&1
t "build rc=$?"
case "$1" in
install)
  MAX_JOBS=16 timeout 500 python3 -m pip install --no-build-isolation ./python > $L/pip.log 2>&1; t "pip rc=$?"
  t done; exit 0 ;;
measure) python3 -c "import cuda_perf_lab" 2>/dev/null || { t "the package is not installed: run install first"; exit 2; } ;;
flushes)  # session 99's two new flushes (ln_flush.py's docstring), no package needed; about 2 minutes
  for shape in 16384x768 8192x4096; do
    timeout 150 python3 $HERE/ln_flush.py 6 $shape build/ch03_kernels/optimized_layernorm_bf16 ordinary,last,discard,demote \
      > $L/flushes_$shape.txt 2>&1; t "ln_flush $shape rc=$?"; tail -13 $L/flushes_$shape.txt | tee -a $L/timeline
  done; t done; exit 0 ;;
tools)
  git apply $HERE/flush_last.patch && t "patch applied" || { t "patch does not apply"; exit 2; }
  timeout 150 python3 $HERE/tools_flush.py 6 > $L/tools_flush.txt 2>&1; t "tools_flush rc=$?"; tail -9 $L/tools_flush.txt | tee -a $L/timeline
  (cd tools/tests && timeout 120 python3 -m unittest test_tools > $L/test_tools.txt 2>&1); t "test_tools rc=$?"
  t done; exit 0 ;;
yonly)
  LN=ch03_kernels/optimized_layernorm.cu; cp $LN /tmp/ln.cu; trap 'cp /tmp/ln.cu $LN; touch $LN' EXIT
  B=build/ch03_kernels/optimized_layernorm_bf16; cp $B /tmp/ln_stats
  sed -i 's|  if (lane == 0) mean\[row\] = mu, rstd\[row\] = rs;|  if (lane == 0 \&\& mean != nullptr) mean[row] = mu, rstd[row] = rs;|' $LN
  grep -q "mean != nullptr" $LN && cmake --build build -j16 --target optimized_layernorm_bf16 > $L/build_branch.log 2>&1 &&
    cp $B /tmp/ln_branch; t "branch build rc=$?"
  sed -i 's|  if (lane == 0 \&\& mean != nullptr) mean\[row\] = mu, rstd\[row\] = rs;|  (void)mu, (void)rs;|' $LN
  grep -q "(void)mu" $LN && cmake --build build -j16 --target optimized_layernorm_bf16 > $L/build_none.log 2>&1 &&
    cp $B /tmp/ln_none; t "no-store build rc=$?"
  cp /tmp/ln.cu $LN; touch $LN; cmake --build build -j16 --target optimized_layernorm_bf16 > /dev/null 2>&1
  for r in 1 2 3 4; do for b in ln_stats ln_branch ln_none; do
    echo "$r $b $(/tmp/$b --shape 16384x768 --no-check --benchmark_format=json | python3 -c 'import json, sys
print([x["real_time"] for x in json.load(sys.stdin)["benchmarks"] if x.get("aggregate_name") == "median"][0])')" |
      tee -a $L/yonly.txt
  done; done; t done; exit 0 ;;
*) echo "next_s99.sh: say install, measure, flushes, tools or yonly"; exit 2 ;;
esac
OPS=${OPS:-layernorm_bf16,layernorm_backward_bf16,gelu_bf16,cross_entropy_bf16}
for when in before after; do
  [ $when = after ] && { git apply $HERE/flush_last.patch && t "patch applied" || { t "patch does not apply"; exit 2; }; }
  timeout 150 python3 tools/torch_ops_bench.py --ops $OPS --compile-modes default --reps 50 --json $L/ops_$when.json \
    --markdown $L/ops_$when.md > $L/ops_$when.txt 2>&1; t "ops $when rc=$?"; grep -E "^layernorm_bf16 " $L/ops_$when.txt | tee -a $L/timeline
done
timeout 120 python3 $HERE/ln_flush.py 6 16384x768 build/ch03_kernels/optimized_layernorm_bf16 > $L/ln_flush.txt 2>&1
t "ln_flush rc=$?"; tail -8 $L/ln_flush.txt | tee -a $L/timeline
(cd tools/tests && timeout 120 python3 -m unittest test_tools > $L/test_tools.txt 2>&1); t "test_tools rc=$?"
t done
