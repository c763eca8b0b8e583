#!/bin/bash
# Do the lab's own products lose to cuBLAS where their tiles leave the last wave empty? (written in
# session 98, not run). One device call, about 3 minutes warm; run from the repository root:
#   bash ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95/waves_s99.sh
# Steps 21 to 23 make the MLP's first product (forward) and the product of its input gradient
# (backward) with the lab's persistent product (gpt2/fused/gelu_product.cuh): 128 x 128 tiles, a block
# an SM. Both products are tokens x 4d. Their tiles, and the share of the last round's SMs that have
# a tile (132 SMs):
#   small:1024  (4096 x 3072)  768 tiles, 5.8 rounds, 97%   step 21 1.021x step 20 (session 87)
#   medium:512  (2048 x 4096)  512 tiles, 3.9 rounds, 97%   step 21 0.993x
#   xl:256      (1024 x 6400)  400 tiles, 3.03 rounds, 76%  step 21 0.971x
# If the waves explain xl, then at xl step 22 (steps 21 and 22 differ from 20 only in these products)
# against step 20 should follow the fill:
#   xl:320 1280 rows, 500 tiles, 95% | xl:416 1664 rows, 650 tiles, 98% | xl:256 76%
# with medium:544 (2176 rows, 544 tiles, 82%) as the control at medium. If the ratio follows the fill,
# a step that runs the fused product only where its rounds are full (cuBLAS's products elsewhere) is
# the next step; if not, the waves are not the cause.
# Writes into $OUT/w (or ./waves_out without $OUT).
set -o pipefail
L=${OUT:+$OUT/w}; L=${L:-./waves_out}; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) &&
  cmake --build build -j16 --target demo_gpt2_report > $L/build.log 2>&1; t "build rc=$?"
for round in 1 2; do  # twice, to see the run-to-run spread beside the differences
  timeout 200 build/ch04_compile_vs_fused/demo_gpt2_report --configs xl:256,xl:320,xl:416,medium:512,medium:544 \
    --variants fused_bf16_ln_grads,fused_bf16_gelu_forward_in_product --no-check --reps 10 \
    --csv $L/waves_$round.csv --markdown $L/waves_$round.md > $L/waves_$round.txt 2>&1; t "round $round rc=$?"
done
t done
