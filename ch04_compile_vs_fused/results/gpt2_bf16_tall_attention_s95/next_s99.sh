#!/bin/bash
# Step 24 (full_waves.patch: the lab's GELU products only where their tiles fill their rounds) and
# the measurement that decides it (written in session 98, not run). Apply the patch to the working
# tree first (git apply ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95/full_waves.patch),
# so that the device's copy has it; then, from the repository root, one warm machine:
#   bash ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95/next_s99.sh waves  # ~3 min warm
#   bash ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95/next_s99.sh tests  # ~6 min cold
#   bash ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95/next_s99.sh rows   # ~5 min
# waves: do steps 21 to 23 lose to step 20 at xl because their own product's last round is nearly
#   empty? The product (gpt2/fused/gelu_product.cuh) makes 128 x 128 tiles, a block an SM; the MLP's
#   two products are tokens x 4d. The share of the rounds' block slots holding a tile (132 SMs):
#     small:1024  (4096 x 3072)  768 tiles, 6 rounds, 0.97   step 21 1.021x step 20 (session 87)
#     medium:512  (2048 x 4096)  512 tiles, 4 rounds, 0.97   step 21 0.993x
#     xl:256      (1024 x 6400)  400 tiles, 4 rounds, 0.76   step 21 0.971x
#   It times steps 20 and 22 (22 differs from 20 only in these products) at xl with contexts 256, 320
#   and 416 (fills 0.76, 0.95, 0.98) and at medium with 512 and 544 (0.97, 0.82), twice. If step 22's
#   ratio to step 20 follows the fill, step 24's rule (kMinFill 0.9) is the answer; if not, the fill is
#   not the cause and the patch is dropped.
# tests: with the patch, step 24's --check-only, its second-step test, the training test (every
#   step), ProductFill (ch04_cpu), demo_gpt2_report's check (now on step 24), and the plant
#   gpt2_product_fill_rounds (inline).
# rows: steps 20, 23 and 24 at issue #42's four rows, then torch_reference --bf16 reduce-overhead at
#   each (max-autotune at small and medium needs a call each: 192 s and 313 s to compile).
# Writes into $OUT/w (or ./next_s99_out without $OUT).
set -o pipefail
L=${OUT:+$OUT/w}; L=${L:-./next_s99_out}; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
B=build/ch04_compile_vs_fused
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) && cmake build > /dev/null
STEP24=optimized_gpt2_step_fused_bf16_full_waves
case "$1" in
waves)
  cmake --build build -j16 --target demo_gpt2_report > $L/build.log 2>&1; t "build rc=$?"
  for round in 1 2; do  # twice, for the run-to-run spread beside the differences
    timeout 200 $B/demo_gpt2_report --configs xl:256,xl:320,xl:416,medium:512,medium:544 \
      --variants fused_bf16_ln_grads,fused_bf16_gelu_forward_in_product --no-check --reps 10 \
      --csv $L/waves_$round.csv --markdown $L/waves_$round.md > $L/waves_$round.txt 2>&1; t "round $round rc=$?"
  done ;;
tests)
  [ -f ch04_compile_vs_fused/gpt2/steps/24_$STEP24.cu ] || { t "full_waves.patch is not applied"; exit 2; }
  cmake --build build -j16 --target $STEP24 ch04_cpu ch04_tests demo_gpt2_report > $L/build.log 2>&1; t "build rc=$?"
  timeout 120 $B/$STEP24 --check-only > $L/check.txt 2>&1; t "check-only rc=$? $(grep -c PASS $L/check.txt) PASS"
  $B/ch04_cpu --gtest_filter='ProductFill.*' > $L/product_fill.txt 2>&1; t "ProductFill rc=$?"
  timeout 300 ctest --test-dir build -R "Gpt2SecondStep\..*full_waves|Gpt2Training|demo_gpt2_report\.check" \
    -j4 --timeout 280 > $L/ctest.txt 2>&1; t "ctest rc=$? $(grep -E 'tests passed|tests failed' $L/ctest.txt)"
  F=ch04_compile_vs_fused/gpt2/fused/gelu_product.cuh; cp $F /tmp/gp.orig  # the plant, inline
  sed -i 's|rounds = (tiles + blocks - 1) / blocks;|rounds = tiles / blocks;|' $F
  cmake --build build -j16 --target ch04_cpu > $L/plant_build.log 2>&1
  $B/ch04_cpu --gtest_filter='ProductFill.*' > $L/plant.txt 2>&1; t "plant gpt2_product_fill_rounds rc=$? (1: caught)"
  cp /tmp/gp.orig $F; touch $F; cmake --build build -j16 --target ch04_cpu > /dev/null 2>&1 ;;
rows)
  cmake --build build -j16 --target demo_gpt2_report $STEP24 > $L/build.log 2>&1; t "build rc=$?"
  for row in small:1024:10000 medium:512:10000 xl:256:10000 small:1024:50304; do
    IFS=: read -r size ctx vocab <<< "$row"; tag=$size$ctx-v$vocab
    timeout 150 $B/demo_gpt2_report --configs $size:$ctx --vocab $vocab --no-check --reps 10 \
      --variants fused_bf16_ln_grads,fused_bf16_tall_attention,fused_bf16_full_waves --csv $L/report_$tag.csv \
      > $L/report_$tag.txt 2>&1; t "report $tag rc=$?"
    case $size in small) s=12x768x12;; medium) s=24x1024x16;; xl) s=48x1600x25;; esac
    timeout 200 python3 tools/torch_reference.py $B/$STEP24 --bf16 --modes reduce-overhead --reps 10 \
      --shape ${s}x${ctx}x4x${vocab}x3 --json $L/torch_$tag.json > $L/torch_$tag.txt 2>&1
    t "torch $tag rc=$?"
    python3 tools/torch_reference.py --from $L/torch_$tag.json --lab $L/report_$tag.csv --markdown $L/vs_torch_$tag.md \
      > /dev/null 2>&1; tail -3 $L/vs_torch_$tag.md | tee -a $L/timeline
  done ;;
*) echo "next_s99.sh: say waves, tests or rows"; exit 2 ;;
esac
t done
