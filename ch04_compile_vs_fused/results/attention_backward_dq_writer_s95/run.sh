#!/bin/bash
# Step 13 (dq_writer.patch: dQ's reductions issued by a producer warp, FlashAttention-3's dQ writer) on the GPU,
# one device call of about 8 minutes on an H100 from a cold machine: the patch applied (taken out again at exit),
# steps 11, 12 and 13 built, step 13's --check-only at seeds 1 and 7, compute-sanitizer synccheck and racecheck,
# two plants (each must fail), steps 11 and 13 alternated twice at d = 128 and steps 12 and 13 at d = 64, SDPA
# bf16 in the same call, and gbench_table's tables. Run from the repository root:
#   bash ch04_compile_vs_fused/results/attention_backward_dq_writer_s95/run.sh
# Writes into $OUT/w (or ./w_out without $OUT).
set -o pipefail
HERE=ch04_compile_vs_fused/results/attention_backward_dq_writer_s95
H=ch04_compile_vs_fused/attention/hopper/backward_wgmma.cuh
L=${OUT:+$OUT/w}; L=${L:-./w_out}; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
git apply $HERE/dq_writer.patch || { echo "dq_writer.patch does not apply"; exit 2; }
trap 'git apply -R $HERE/dq_writer.patch; touch $H' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
P11=optimized_attention_backward_fused_wgmma_persistent; P12=optimized_attention_backward_fused_wgmma_tall
P13=optimized_attention_backward_fused_wgmma_dq_writer
B=build/ch04_compile_vs_fused
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) && cmake build > /dev/null &&
  cmake --build build -j16 --target $P11 $P12 $P13 > $L/build.log 2>&1; t "build rc=$?"; grep -m3 -i " error" $L/build.log
for seed in 1 7; do
  timeout 150 $B/$P13 --check-only --seed $seed > $L/check_$seed.txt 2>&1
  t "check seed $seed rc=$? $(grep -c ': PASS' $L/check_$seed.txt) PASS $(grep -c ': FAIL' $L/check_$seed.txt) FAIL $(grep -c N/A $L/check_$seed.txt) N/A"
done
grep -h ": FAIL" $L/check_*.txt | cut -c1-200 | head -5
for tool in synccheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool $B/$P13 --check-only --skip-check-set --shape 1x2x129x128x1 \
    --shape 2x1x300x64x1 > $L/$tool.txt 2>&1; t "$tool rc=$? $(grep -c 'ERROR SUMMARY: 0' $L/$tool.txt) of 1"
done
plant() {  # name, text, replacement
  cp $H /tmp/w_patched.cuh
  FROM="$2" TO="$3" python3 -c '
import os, sys; p = sys.argv[1]; s = open(p).read(); assert s.count(os.environ["FROM"]) == 1, "plant text not found once"
open(p, "w").write(s.replace(os.environ["FROM"], os.environ["TO"]))' $H || { t "plant $1: text missing"; return; }
  cmake --build build -j16 --target $P13 > $L/plant_$1.log 2>&1
  timeout 150 $B/$P13 --check-only > $L/plant_$1.txt 2>&1; rc=$?
  t "plant $1: rc=$rc $(grep -c ': FAIL' $L/plant_$1.txt) FAIL $(grep -c ': PASS' $L/plant_$1.txt) PASS: $([ $rc != 0 ] && echo caught || echo MISSED)"
  cp /tmp/w_patched.cuh $H; touch $H
}
plant writer_other_consumer 'const int* to = sh.dq_to + 4 * c;' 'const int* to = sh.dq_to + 4 * (c ^ 1);'
plant dq_1pct 'make_float2(a * scale, b * scale)' 'make_float2(a * scale * (consumer == 1 ? 1.01f : 1.f), b * scale)'
cmake --build build -j16 --target $P13 > $L/rebuild.log 2>&1; t "rebuilt rc=$?"
S128="--shape 8x16x4096x128x0 --shape 8x16x4096x128x1"; S64="--shape 4x12x1024x64x1 --shape 8x16x4096x64x0 --shape 8x16x4096x64x1"
for r in 1 2; do
  for p in $P11 $P13; do timeout 60 $B/$p $S128 --no-check --benchmark_format=json > $L/t128_${p##*_}_$r.json 2> /dev/null; t "$p d128 run $r rc=$?"; done
  for p in $P12 $P13; do timeout 60 $B/$p $S64 --no-check --benchmark_format=json > $L/t64_${p##*_}_$r.json 2> /dev/null; t "$p d64 run $r rc=$?"; done
done
timeout 150 python3 tools/torch_reference.py $B/$P13 --reps 10 $S128 $S64 --json $L/torch_bwd.json > $L/torch_bwd.txt 2>&1
t "torch_reference rc=$?"; grep "SDPA bf16" $L/torch_bwd.txt
python3 tools/gbench_table.py --run persistent=$L/t128_persistent_1.json --run persistent=$L/t128_persistent_2.json \
  --run dq_writer=$L/t128_writer_1.json --run dq_writer=$L/t128_writer_2.json --torch $L/torch_bwd.json \
  --torch-impl "SDPA bf16" --baseline persistent 2>&1 | tee $L/table128.md
python3 tools/gbench_table.py --run tall=$L/t64_tall_1.json --run tall=$L/t64_tall_2.json \
  --run dq_writer=$L/t64_writer_1.json --run dq_writer=$L/t64_writer_2.json --torch $L/torch_bwd.json \
  --torch-impl "SDPA bf16" --baseline tall 2>&1 | tee $L/table64.md
t done
