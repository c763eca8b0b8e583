#!/bin/bash
# GPT-2 step 23 (step23.patch: the attention backward on the ladder's step 12 kernel) on the GPU, one device
# call of about 8 minutes on an H100 from a cold machine: the patch applied (taken out again at exit), steps 22
# and 23 built, step 23's --check-only at seeds 1 and 7 (the topic's shapes and its own 1x128x2x260x2x61x3),
# steps 22 and 23 alternated twice at small:1024 and medium:512 (full step, L2 flushed), and PyTorch's
# reduce-overhead at small in the same call. Run from the repository root:
#   bash ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95/run.sh
# Writes into $OUT/g (or ./g_out without $OUT).
HERE=ch04_compile_vs_fused/results/gpt2_bf16_tall_attention_s95
S23=ch04_compile_vs_fused/gpt2/steps/23_optimized_gpt2_step_fused_bf16_tall_attention.cu
L=${OUT:+$OUT/g}; L=${L:-./g_out}; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
git apply $HERE/step23.patch || { echo "step23.patch does not apply"; exit 2; }
trap 'git apply -R $HERE/step23.patch' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
P22=optimized_gpt2_step_fused_bf16_gelu_forward_in_product; P23=optimized_gpt2_step_fused_bf16_tall_attention
B=build/ch04_compile_vs_fused
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) && cmake build > /dev/null &&
  cmake --build build -j16 --target $P22 $P23 > $L/build.log 2>&1; t "build rc=$?"; grep -m3 -i " error" $L/build.log
for seed in 1 7; do
  timeout 150 $B/$P23 --check-only --seed $seed > $L/check23_$seed.txt 2>&1
  t "check23 seed $seed rc=$? $(grep -c ': PASS' $L/check23_$seed.txt) PASS $(grep -c ': FAIL' $L/check23_$seed.txt) FAIL $(grep -c 'N/A' $L/check23_$seed.txt) N/A"
done
grep -h ": FAIL" $L/check23_*.txt | cut -c1-200 | head -4
SH="--shape 12x768x12x1024x4x10000x3 --shape 24x1024x16x512x4x10000x3"
for r in 1 2; do for p in $P22 $P23; do
  timeout 90 $B/$p $SH --no-check --benchmark_format=json > $L/t_${p##*_}_$r.json 2> $L/t_${p##*_}_$r.err; t "${p##*_} run $r rc=$?"
done; done
python3 - $L <<'PY' | tee -a $L/timeline
import json, sys, glob, os
L = sys.argv[1]
for f in sorted(glob.glob(L + "/t_*.json")):
    try: d = json.load(open(f))
    except Exception as e: print(os.path.basename(f), "unreadable", e); continue
    print(os.path.basename(f), " ".join("%s %.3f ms" % (b["name"].split("/")[-1], b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1}[b["time_unit"]])
          for b in d["benchmarks"] if b.get("aggregate_name") == "median"))
PY
timeout $(( 560 - ($(date +%s) - T0) )) python3 tools/torch_reference.py $B/$P23 --bf16 --modes reduce-overhead --reps 10 \
  --shape 12x768x12x1024x4x10000x3 --json $L/torch_small_ro.json > $L/torch_small_ro.txt 2>&1; t "torch rc=$?"
grep "reduce-overhead" $L/torch_small_ro.txt
t done
