#!/bin/bash
# Session 94's device call: the draft step 12 (kSumDq) checked, and timed against step 10 with and without dQ's
# reduction (no_reduction.patch: LAB_BWD_DIAG=1 skips it; dQ then wrong, timing only), alternated twice, at d = 64.
# From the repository root with dq_sum.patch applied (git apply): bash ch04_compile_vs_fused/results/attention_backward_h100_s94/run.sh
L=$OUT/e; mkdir -p $L; T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
F=ch04_compile_vs_fused/attention/hopper/backward_wgmma.cuh
cp $F /tmp/bwd_orig.cuh; trap 'cp /tmp/bwd_orig.cuh $F; touch $F' EXIT
patch -p1 --quiet < ch04_compile_vs_fused/results/attention_backward_h100_s94/no_reduction.patch || { echo "no_reduction.patch does not apply"; exit 2; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
P10=optimized_attention_backward_fused_wgmma_p_under_dp; P12=optimized_attention_backward_fused_wgmma_dq_sum
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) && cmake --build build -j16 --target $P10 $P12 > $L/build.log 2>&1; t "build rc=$?"; grep -m3 -i " error" $L/build.log
B=build/ch04_compile_vs_fused
timeout 80 $B/$P12 --check-only > $L/check12.txt 2>&1; t "check12 rc=$? $(grep -c PASS $L/check12.txt) PASS $(grep -c FAIL $L/check12.txt) FAIL"
grep -E "FAIL|N/A" $L/check12.txt | head -5
S="--shape 8x16x4096x64x0 --shape 8x16x4096x64x1 --shape 4x12x1024x64x1 --no-check --benchmark_format=json"
run() { LAB_BWD_DIAG=$2 timeout 40 $B/$1 $S > $L/t.json 2>/dev/null; python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); print(sys.argv[2], " ".join("%s %.4f" % (b["name"].split("/")[2], b["real_time"]*{"ns":1e-6,"us":1e-3,"ms":1}[b["time_unit"]]) for b in d["benchmarks"] if b.get("aggregate_name")=="median"))' $L/t.json "$3" | tee -a $L/times.txt; }
for r in 1 2; do run $P10 0 "step10      r$r"; run $P10 1 "step10-noRd r$r"; run $P12 0 "step12      r$r"; done; t done
