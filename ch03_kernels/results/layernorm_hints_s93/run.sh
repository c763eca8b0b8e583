#!/bin/bash
# LayerNorm bf16 at 16384x768 against torch.compile, one device call (about 7 minutes on an H100): hints.patch
# applied to a scratch state of optimized_layernorm.cu (restored at exit), the bf16 program built, each
# LAB_LN_CFG setting's --check-only, ncu's DRAM bytes of the lab kernel (t256, cs, ef) and of inductor's, the
# settings alternated with torch.compile in one process (../layernorm_blocks_h100_s89/ln_sweep.py, cold L2),
# inductor's Triton source. Run from the repository root: bash ch03_kernels/results/layernorm_hints_s93/run.sh
# Writes into $OUT/ln (or ./ln_hints_out without $OUT).
set -o pipefail
HERE=ch03_kernels/results/layernorm_hints_s93; F=ch03_kernels/optimized_layernorm.cu
L=${OUT:+$OUT/ln}; L=${L:-./ln_hints_out}; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/timeline; }
cp $F /tmp/ln_orig.cu; trap 'cp /tmp/ln_orig.cu $F; touch $F' EXIT
patch -p1 --quiet < $HERE/hints.patch || { echo "hints.patch does not apply"; exit 2; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L/timeline
P=build/ch03_kernels/optimized_layernorm_bf16
( [ -f build/CMakeCache.txt ] || cmake --preset default > $L/cmake.log 2>&1 ) &&
  cmake --build build -j16 --target optimized_layernorm_bf16 > $L/build.log 2>&1; t "build rc=$?"
CFGS=t256,cs,ef,efel,el,gl,t128cs,t128ef
for c in ${CFGS//,/ }; do
  LAB_LN_CFG=$c timeout 60 $P --check-only > $L/check_$c.txt 2>&1
  echo "$c check rc=$? $(grep -c PASS $L/check_$c.txt) PASS $(grep -c FAIL $L/check_$c.txt) FAIL" | tee -a $L/checks.txt
done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,launch__registers_per_thread
M=$M,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
for c in t256 cs ef; do
  LAB_LN_CFG=$c timeout 60 ncu --clock-control none --metrics $M -k regex:layernorm_rows -c 1 $P --check-only \
    --shape 16384x768 --skip-check-set > $L/ncu_$c.txt 2>&1; t "ncu $c rc=$?"
done
timeout 120 ncu --clock-control none --metrics $M -k regex:triton -s 2 -c 1 python3 $HERE/ln_inductor.py 4 > $L/ncu_torch.txt 2>&1
t "ncu torch rc=$?"
TORCH_LOGS=output_code timeout 120 python3 $HERE/ln_inductor.py 2 > $L/torch_code.txt 2>&1; t "inductor source rc=$?"
timeout 300 python3 ch03_kernels/results/layernorm_blocks_h100_s89/ln_sweep.py $P $CFGS 4 > $L/sweep.txt 2>&1
t "sweep rc=$?"; tail -10 $L/sweep.txt
