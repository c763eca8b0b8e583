#!/bin/bash
# Step 12 (tall.patch: query tiles of 128 at d = 64, two consumers, dQ split by queries) on the GPU, one device
# call of about 8 minutes on an H100: the patch applied (and taken out again at exit), step 10 and step 12
# built, step 12's --check-only at seeds 1 and 7, compute-sanitizer synccheck, three plants (each must fail),
# step 10 and step 12 alternated twice at #42's d = 64 shapes and GPT-2 small's, SDPA bf16 in the same call,
# and gbench_table's table. Run from the repository root:
#   bash ch04_compile_vs_fused/results/attention_backward_tall_s94/run.sh
# Writes into $OUT/tall (or ./tall_out without $OUT).
set -o pipefail
HERE=ch04_compile_vs_fused/results/attention_backward_tall_s94
H=ch04_compile_vs_fused/attention/hopper/backward_wgmma.cuh
S12=ch04_compile_vs_fused/attention/backward/12_optimized_attention_backward_fused_wgmma_tall.cu
L=${OUT:+$OUT/tall}; L=${L:-./tall_out}; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
cp $H /tmp/tall_orig.cuh
trap 'cp /tmp/tall_orig.cuh $H; touch $H; rm -f $S12' EXIT
git apply $HERE/tall.patch || { echo "tall.patch does not apply"; exit 2; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
P10=optimized_attention_backward_fused_wgmma_p_under_dp; P12=optimized_attention_backward_fused_wgmma_tall
B=build/ch04_compile_vs_fused
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) && cmake build > /dev/null &&
  cmake --build build -j16 --target $P10 $P12 > $L/build.log 2>&1; t "build rc=$?"; grep -m3 -i " error" $L/build.log
for seed in 1 7; do
  timeout 120 $B/$P12 --check-only --seed $seed > $L/check_$seed.txt 2>&1
  t "check seed $seed rc=$? $(grep -c ': PASS' $L/check_$seed.txt) PASS $(grep -c ': FAIL' $L/check_$seed.txt) FAIL $(grep -c N/A $L/check_$seed.txt) N/A"
done
grep -h ": FAIL" $L/check_*.txt | cut -c1-200 | head -5
timeout 100 compute-sanitizer --tool synccheck $B/$P12 --check-only --skip-check-set --shape 2x3x520x64x1 \
  --shape 1x1x200x64x0 > $L/synccheck.txt 2>&1; t "synccheck rc=$? $(grep -c 'ERROR SUMMARY: 0' $L/synccheck.txt) of 1"
# Plants: each edit of the patched header must make --check-only fail (rc != 0); the header is restored after each.
plant() {  # name, text, replacement
  cp $H /tmp/tall_patched.cuh
  FROM="$2" TO="$3" python3 -c '
import os, sys; p = sys.argv[1]; s = open(p).read(); assert s.count(os.environ["FROM"]) == 1, "plant text not found once"
open(p, "w").write(s.replace(os.environ["FROM"], os.environ["TO"]))' $H || { t "plant $1: text missing"; return; }
  cmake --build build -j16 --target $P12 > $L/plant_$1.log 2>&1
  timeout 120 $B/$P12 --check-only > $L/plant_$1.txt 2>&1; rc=$?
  t "plant $1: rc=$rc $(grep -c ': FAIL' $L/plant_$1.txt) FAIL $(grep -c ': PASS' $L/plant_$1.txt) PASS: $([ $rc != 0 ] && echo caught || echo MISSED)"
  cp /tmp/tall_patched.cuh $H; touch $H
}
plant dq_region '(C::kTall ? consumer * 8192 : 0)' '(C::kTall ? (consumer ^ 1) * 8192 : 0)'
plant dq_1pct 'make_float2(a * scale, b * scale)' 'make_float2(a * scale * (consumer == 1 ? 1.01f : 1.f), b * scale)'
plant delta_row 'rows[C::kBr + me] = mine_delta' 'rows[C::kBr + (me ^ 1)] = mine_delta'
cmake --build build -j16 --target $P12 > $L/rebuild.log 2>&1; t "rebuilt rc=$?"
SH="--shape 4x12x1024x64x1 --shape 8x16x4096x64x0 --shape 8x16x4096x64x1"
for r in 1 2; do for p in $P10 $P12; do
  timeout 60 $B/$p $SH --no-check --benchmark_format=json > $L/t_${p##*_}_$r.json 2> $L/t_${p##*_}_$r.err; t "$p run $r rc=$?"
done; done
timeout 150 python3 tools/torch_reference.py $B/$P12 --reps 10 $SH --json $L/torch_bwd.json > $L/torch_bwd.txt 2>&1
t "torch_reference rc=$?"; grep "SDPA bf16" $L/torch_bwd.txt
[ -s $L/torch_bwd.json ] && python3 tools/gbench_table.py --run p_under_dp=$L/t_dp_1.json --run p_under_dp=$L/t_dp_2.json \
  --run tall=$L/t_tall_1.json --run tall=$L/t_tall_2.json --torch $L/torch_bwd.json --torch-impl "SDPA bf16" \
  --baseline p_under_dp 2>&1 | tee $L/table.md
t done
