#!/usr/bin/env bash
# The whole GPU check in one command: configure, build with every core, run the full test suite
# (GPU tests included), the fuzz and seed sweep (ctest -L fuzz: every variant on random shapes
# near its checks, under fresh seeds), compute-sanitizer memcheck, racecheck, initcheck and synccheck
# on every chapter's test and kernel-test binaries (chNN_tests, chNN_kernels), and end with a one-line summary. Logs go to LOGDIR,
# one file per step. LAB_FUZZ_CASES sets the fuzz shapes a variant (default 60). LAB_CHECK_JOBS=N
# runs N tests (and N sanitizer runs) at a time (default 1): they are correctness checks, so they
# may share the GPU; most of a test's time is its process creating a CUDA context.
#
#   tools/gpu_check.sh LOGDIR [BUILD_DIR]        (BUILD_DIR defaults to build)
#
# Exit status 0 when every step passed and no GPU test was skipped.
# initcheck does not count what cuBLAS and cuBLASLt write as written (CUDA 13.0 on an H200: every
# element of a product's output reported when a kernel read it; ch04_compile_vs_fused/results/
# checks_h200_s68.txt), so the GPT-2 steps' reports at kernels that read a product's output are the
# tool's; a report anywhere else is one to chase.
set -u
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -ge 1 ] && exit 0 || exit 2
fi
logdir=$1
build=${2:-build}
mkdir -p "$logdir" || { echo "gpu_check: cannot create $logdir" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
jobs=$(nproc)
check_jobs=${LAB_CHECK_JOBS:-1}
case $check_jobs in '' | *[!0-9]* | 0) echo "gpu_check: LAB_CHECK_JOBS=$check_jobs: not a positive integer" >&2; exit 2 ;; esac
failed=()
passed=()
start=$(date +%s)

step() {
  local name=$1
  shift
  printf '== %-28s %s\n' "$name" "$*"
  if "$@" >"$logdir/$name.log" 2>&1; then
    passed+=("$name")
  else
    failed+=("$name")
    echo "   FAILED: see $logdir/$name.log"
    tail -n 15 "$logdir/$name.log" | sed 's/^/   | /'
  fi
}

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

{ nvidia-smi; nvcc --version; cmake --version | head -1; } >"$logdir/environment.log" 2>&1
step configure cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
step build cmake --build "$build" -j "$jobs"
step ctest ctest --test-dir "$build" --output-on-failure -LE fuzz -j "$check_jobs"
step fuzz ctest --test-dir "$build" --verbose -L fuzz -j "$check_jobs"
# The sanitizer runs, LAB_CHECK_JOBS at a time; each writes its exit status beside its log.
sanitize() {
  local name=$1
  shift
  "$@" >"$logdir/$name.log" 2>&1
  echo $? >"$logdir/$name.status"
}
names=()
for t in "$build"/ch*/ch*_tests "$build"/ch*/ch*_kernels; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  for tool in memcheck racecheck initcheck synccheck; do
    extra=()
    [ $tool = memcheck ] && extra=(--leak-check full)
    while [ "$(jobs -rp | wc -l)" -ge "$check_jobs" ]; do sleep 1; done
    printf '== %-28s %s\n' "$tool-$n" "$sanitizer --tool $tool ${extra[*]} --error-exitcode 1 $t"
    sanitize "$tool-$n" "$sanitizer" --tool $tool "${extra[@]}" --error-exitcode 1 "$t" &
    names+=("$tool-$n")
  done
done
wait
for name in "${names[@]}"; do
  if [ "$(cat "$logdir/$name.status" 2>/dev/null)" = 0 ]; then
    passed+=("$name")
  else
    failed+=("$name")
    echo "   FAILED: see $logdir/$name.log"
    tail -n 15 "$logdir/$name.log" | sed 's/^/   | /'
  fi
  rm -f "$logdir/$name.status"
done
fuzz_runs=$(grep -Eo '\[ fuzz     \] [a-z0-9_]+: [0-9]+ shapes' "$logdir/fuzz.log" 2>/dev/null | awk '{s += $5} END {print s + 0}')
# A fuzz step that ran no variant checked nothing: a failure (until 2026-11-27 the fuzz tests lacked
# their label, `ctest -L fuzz` selected none, and this step passed empty).
if [ "${fuzz_runs:-0}" -eq 0 ] && [[ " ${passed[*]} " == *" fuzz "* ]]; then
  failed+=("fuzz-ran-nothing")
  echo "   FAILED: the fuzz step ran no variant (see $logdir/fuzz.log)"
fi

# A GPU test that skipped on a GPU machine did not run: that is a failure here, except the one
# test that can only run where there is no GPU, and the shapes a variant declares it does not
# support (its test prints "N/A: reason"; CTest keeps every test's output in LastTest.log).
not_applicable=$(awk '/^[0-9]+\/[0-9]+ Testing: / {name = $3} /N\/A: / && name != "" {print name; name = ""}' \
  "$build/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u)
unexpected_skips() {
  grep -E '\(Skipped\)' "$logdir/ctest.log" 2>/dev/null | grep -v 'NoDeviceIsThree' |
    awk '{print $3}' | sort -u | comm -23 - <(printf '%s\n' "$not_applicable" | sed '/^$/d')
}
skipped=$(unexpected_skips | wc -l)
na_count=$(printf '%s\n' "$not_applicable" | sed '/^$/d' | wc -l)
if [ "$skipped" -gt 0 ]; then
  failed+=("skipped-gpu-tests($skipped)")
  unexpected_skips | head -5 | sed 's/^/   | /'
fi
tests=$(grep -Eo '[0-9]+% tests passed.* out of [0-9]+' "$logdir/ctest.log" 2>/dev/null)
secs=$(( $(date +%s) - start ))
if [ ${#failed[@]} -eq 0 ]; then
  echo "gpu_check: PASS in ${secs}s (${passed[*]}); ctest: ${tests:-?} (${na_count} N/A by declaration); fuzz: ${fuzz_runs:-0} variant runs; logs in $logdir"
  exit 0
fi
echo "gpu_check: FAIL in ${secs}s: ${failed[*]}; ctest: ${tests:-?}; fuzz: ${fuzz_runs:-0} variant runs; logs in $logdir"
exit 1
