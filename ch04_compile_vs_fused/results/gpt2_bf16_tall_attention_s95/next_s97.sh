#!/bin/bash
# What step 23 still needs on the GPU (written in session 96, not run): three device calls on one warm
# machine, each about 9 minutes, from the repository root:
#   bash ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95/next_s97.sh build   # cold: the binaries
#   bash ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95/next_s97.sh tests   # the tests, a plant
#   bash ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95/next_s97.sh rows    # issue #42's rows
# build: tall_rows_test.patch applied (AttentionRows.TallBackwardRowsAreTheTallBackwardByHeadRounded,
#   step 23's kernel over the QKV rows against itself by head) and left applied; ch04_kernels,
#   ch04_tests and demo_gpt2_report built (a build cut off at the call's end goes on in the next call).
# tests: AttentionRows.* in ch04_kernels, then the plant gpt2_rows_dk16_1pct (dK's odd columns 1%
#   high in the rows' stores) against both backward tests (each must fail); the second-step test of
#   steps 22 and 23 and the 200-step training test (ctest); step 23's fuzz at LAB_FUZZ_CASES=12.
# rows: demo_gpt2_report --no-check --reps 10 with steps 22 and 23 at small:1024, medium:512, xl:256
#   and small:1024 with vocabulary 50304, and torch_reference.py --bf16 --modes reduce-overhead at the
#   same four shapes (the same session), then torch_reference.py --from/--lab for the README tables.
# Writes into $OUT/n (or ./n_out without $OUT). Run in session 97 (run_h100_s97/); the patch is in the tree now,
# so its apply below finds nothing to do.
set -o pipefail
HERE=ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95
L=${OUT:+$OUT/n}; L=${L:-./n_out}; mkdir -p $L
END=$(( $(date +%s) + 550 )); T0=$(date +%s)
t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
left() { echo $(( END - $(date +%s) )); }
B=build/ch04_compile_vs_fused
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
git apply --check $HERE/tall_rows_test.patch 2> /dev/null && git apply $HERE/tall_rows_test.patch
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) && cmake build > /dev/null
case "$1" in
build)
  timeout $(( $(left) - 5 )) cmake --build build -j16 --target ch04_kernels ch04_tests ch04_fuzz demo_gpt2_report \
    > $L/build.log 2>&1; t "build rc=$? (124: cut off, go on with the next call)"; grep -m3 -i " error" $L/build.log ;;
tests)
  cmake --build build -j16 --target ch04_kernels ch04_tests ch04_fuzz > $L/build.log 2>&1; t "build rc=$?"
  timeout 120 $B/ch04_kernels --gtest_filter='AttentionRows.*' > $L/attention_rows.txt 2>&1
  t "AttentionRows rc=$? $(grep -c '^\[       OK' $L/attention_rows.txt) OK $(grep -c '^\[  FAILED  \] AttentionRows' $L/attention_rows.txt) FAILED"
  H=ch04_compile_vs_fused/attention/hopper/backward_wgmma.cuh; cp $H /tmp/h.bak
  FROM='return make_float2(k[0] * scale, k[1] * scale);' TO='return make_float2(k[0] * scale, 1.01f * k[1] * scale);' \
    python3 -c 'import os, sys; p = sys.argv[1]; s = open(p).read(); assert s.count(os.environ["FROM"]) == 1
open(p, "w").write(s.replace(os.environ["FROM"], os.environ["TO"]))' $H &&
    cmake --build build -j16 --target ch04_kernels > $L/plant.log 2>&1 &&
    timeout 120 $B/ch04_kernels --gtest_filter='AttentionRows.Backward*:AttentionRows.Tall*' > $L/plant_dk16.txt 2>&1
  t "plant gpt2_rows_dk16_1pct: $(grep '^\[  FAILED  \] AttentionRows' $L/plant_dk16.txt | sort -u | tr '\n' ' ') (both backward tests must fail)"
  cp /tmp/h.bak $H; touch $H; cmake --build build -j16 --target ch04_kernels > $L/rebuild.log 2>&1; t "rebuilt rc=$?"
  timeout $(( $(left) - 60 )) ctest --test-dir build -j8 -R 'Gpt2SecondStep\..*(gelu_forward_in_product|tall_attention)|Gpt2Training' \
    > $L/ctest_steps.txt 2>&1; t "second step and training rc=$? $(grep -E 'tests passed|tests failed' $L/ctest_steps.txt)"
  grep -E "mean difference" $L/ctest_steps.txt | grep -E "gelu_forward_in_product|tall_attention" | tee -a $L/timeline
  LAB_FUZZ_CASES=12 timeout $(( $(left) - 5 )) ctest --test-dir build -L fuzz -R 'tall' > $L/ctest_fuzz.txt 2>&1
  t "fuzz rc=$? $(grep -E 'tests passed|tests failed' $L/ctest_fuzz.txt)" ;;
rows)
  cmake --build build -j16 --target demo_gpt2_report optimized_gpt2_step_fused_bf16_tall_attention > $L/build.log 2>&1; t "build rc=$?"
  V=fused_bf16_gelu_forward_in_product,fused_bf16_tall_attention
  for row in "small:1024 10000 12x768x12x1024x4x10000x3" "medium:512 10000 24x1024x16x512x4x10000x3" \
             "xl:256 10000 48x1600x25x256x4x10000x3" "small:1024 50304 12x768x12x1024x4x50304x3"; do
    set -- $row; tag=${1%%:*}; [ $2 = 50304 ] && tag=v50304
    [ $(left) -lt 60 ] && { t "skip $tag"; continue; }
    timeout 100 $B/demo_gpt2_report --configs $1 --vocab $2 --variants $V --no-check --reps 10 --csv $L/report_$tag.csv \
      > $L/report_$tag.txt 2>&1; t "report $tag rc=$?"
    timeout $(( $(left) < 150 ? $(left) : 150 )) python3 tools/torch_reference.py $B/optimized_gpt2_step_fused_bf16_tall_attention \
      --bf16 --modes reduce-overhead --reps 10 --shape $3 --json $L/torch_$tag.json > $L/torch_$tag.txt 2>&1
    t "torch $tag rc=$? $(grep fastest $L/torch_$tag.txt)"
    python3 tools/torch_reference.py --from $L/torch_$tag.json --lab $L/report_$tag.csv --markdown $L/vs_torch_$tag.md \
      > /dev/null 2>&1; t "table $tag rc=$?"
  done ;;
*) echo "next_s97.sh: say build, tests or rows"; exit 2 ;;
esac
t done
