#!/bin/bash
# The 80-query backward's building blocks (blocks.patch, written in session 100 and compiled for sm_90a
# there, not run): apply the patch to the working tree first, so that the device's copy has it
#   git apply ch04_compile_vs_fused/results/attention_backward_m80_plan_s98/blocks.patch
# then, from the repository root on the device (about 4 minutes cold, most of it the build):
#   bash ch04_compile_vs_fused/results/attention_backward_m80_plan_s98/next_s101.sh
# It builds ch04_kernels, runs BackwardM80Blocks.* (stmatrix_x4_trans; mma_ss_n80 in the S^T and dQ^T
# forms; dS^T from the accumulators through store_ds_rows into dQ^T's product), then plants the
# patch's three bugs, each of which its test must fail. Land the patch only if all four tests pass
# and all three plants are caught. Writes into $OUT/m80 (or ./m80_out without $OUT).
set -o pipefail
L=${OUT:+$OUT/m80}; L=${L:-./m80_out}; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
[ -f ch04_compile_vs_fused/tests/kernels/backward_m80_blocks_test.cu ] || { t "blocks.patch is not applied"; exit 2; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) && cmake build > /dev/null
cmake --build build -j16 --target ch04_kernels > $L/build.log 2>&1; t "build rc=$?"; grep -m3 " error" $L/build.log
build/ch04_compile_vs_fused/ch04_kernels --gtest_filter='BackwardM80Blocks.*' > $L/tests.txt 2>&1
t "BackwardM80Blocks rc=$? $(grep -cE '^\[       OK \]' $L/tests.txt) OK, $(grep -cE '^\[  FAILED  \]' $L/tests.txt) FAILED lines"
timeout 400 tools/planted_bugs.sh $L/plants m80_stmatrix_untransposed m80_product_trans_swapped m80_ds_rows_unswizzled \
  > $L/plants.txt 2>&1; t "plants rc=$? (0: each caught)"; tail -5 $L/plants.txt | tee -a $L/timeline
