#!/bin/bash
# Step 11's device call, written in session 90 and run in session 91 (an H100, 175 s; call1_verify.log): on the GPU
# machine from the repository root: builds steps 10 and 11, step 11's --check-only at seed 1 (the
# topic's shapes and its own two, where blocks run several key tiles), synccheck at those two, its
# two plants (each in its own scratch copy, in parallel), steps 10 and 11 timed alternated (Google
# Benchmark JSON) and SDPA through tools/torch_reference.py, and gbench_table.py's table. Logs in
# /tmp/b90, copied under $OUT/b (about 330 s on an H100 from a cold build).
set -o pipefail
L=/tmp/b90; rm -rf $L; mkdir -p $L $OUT/b
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
trap 'cp $L/timeline $L/table.md $L/torch_bwd.txt $L/plants.txt $L/check_set.txt $L/synccheck.txt $OUT/b/ 2>/dev/null; tar czf $OUT/b/all.tgz -C /tmp b90' TERM
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $L/gpu
P11=optimized_attention_backward_fused_wgmma_persistent; P10=optimized_attention_backward_fused_wgmma_p_under_dp
B=build/ch04_compile_vs_fused
t start
( ( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) && cmake --build build -j12 --target $P11 $P10 > $L/build.log 2>&1; echo "build rc=$?" >> $L/timeline ) & BA=$!
( tools/planted_bugs.sh $L/plants1 attn_persistent_dk_carried > $L/plants1.txt 2>&1; echo "plant 1 rc=$?" >> $L/timeline ) & BC=$!
( tools/planted_bugs.sh $L/plants2 attn_persistent_rows_stale > $L/plants2.txt 2>&1; echo "plant 2 rc=$?" >> $L/timeline ) & BD=$!
wait $BA; t built
timeout 120 $B/$P11 --check-only --seed 1 > $L/check_set.txt 2>&1; t "check set rc=$? $(grep -c PASS $L/check_set.txt) pass $(grep -c FAIL $L/check_set.txt) fail $(grep -c N/A $L/check_set.txt) na"
timeout 100 compute-sanitizer --tool synccheck $B/$P11 --check-only --skip-check-set --shape 4x16x288x128x1 --shape 20x8x128x128x0 > $L/synccheck.txt 2>&1; t "synccheck rc=$? $(grep -c 'ERROR SUMMARY: 0' $L/synccheck.txt)"
wait $BC $BD; t "plants done"; cat $L/plants1.txt $L/plants2.txt > $L/plants.txt; grep -E "caught|MISSED|planted_bugs" $L/plants.txt
SH="--shape 4x12x1024x64x1 --shape 8x16x4096x64x0 --shape 8x16x4096x64x1 --shape 8x16x4096x128x0 --shape 8x16x4096x128x1"
for r in 1 2; do [ $r = 2 ] && [ $(( $(date +%s) - T0 )) -gt 270 ] && break; for p in $P10 $P11; do timeout 60 $B/$p $SH --no-check --benchmark_format=json > $L/t_${p##*_}_$r.json 2> $L/t_${p##*_}_$r.err; t "$p run $r rc=$?"; done; done
[ $(( $(date +%s) - T0 )) -lt 250 ] && python3 tools/torch_reference.py $B/$P11 --reps 10 $SH --json $L/torch_bwd.json > $L/torch_bwd.txt 2>&1; t "torch_reference rc=$?"; grep "SDPA bf16" $L/torch_bwd.txt
[ -s $L/torch_bwd.json ] && python3 tools/gbench_table.py --run p_under_dp=$L/t_dp_1.json --run p_under_dp=$L/t_dp_2.json --run persistent=$L/t_persistent_1.json --run persistent=$L/t_persistent_2.json --torch $L/torch_bwd.json --torch-impl "SDPA bf16" --baseline p_under_dp 2>&1 | tee $L/table.md
t done
cp $L/timeline $L/table.md $L/torch_bwd.txt $L/plants.txt $L/check_set.txt $L/synccheck.txt $OUT/b/ 2>/dev/null
tar czf $OUT/b/all.tgz -C /tmp b90
