#!/usr/bin/env bash
# Nsight Compute recipe: profile a lab program's kernels with a curated set of sections and keep
# the report.
#
#   tools/nsight_compute.sh OUTDIR PROGRAM [PROGRAM ARGS...]
#   tools/nsight_compute.sh results/ncu build/ch02_profiling/optimized_reduction --shape 268435456
#
# Environment: KERNEL=regex (only matching kernels; default all), LAUNCHES=N (kernels profiled,
# default 5), NCU=path. Sections: SpeedOfLight (how close to the memory and compute ceilings),
# MemoryWorkloadAnalysis (bytes moved per level, sectors per request), Occupancy (achieved vs
# theoretical), WarpStateStats and SchedulerStats (why warps stall). Clocks are left as the card
# runs them (--clock-control none), as the lab's own timings are.
# Writes OUTDIR/<program>.ncu-rep (open it in the Nsight Compute GUI) and OUTDIR/<program>.txt.
# A lab program runs with --no-check and one short repetition; a demo with its own arguments only.
set -u
HELP_LAST=14
source "$(dirname "$0")/profiler_args.sh"
lab_profiler_args nsight_compute "${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)}" \
  "ncu (Nsight Compute; NCU=path)" "$@"
set -- "${PROGRAM_ARGS[@]}"
lab_program_flags --benchmark_min_time=0.01
filter=()
[ -n "${KERNEL:-}" ] && filter=(-k "regex:$KERNEL")
"$tool" --clock-control none --launch-count "${LAUNCHES:-5}" "${filter[@]}" \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
  --section WarpStateStats --section SchedulerStats \
  -f -o "$out/$name" "$prog" "${PROGRAM_FLAGS[@]}" "$@" \
  > "$out/$name.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  echo "nsight_compute: ncu exited $rc; see $out/$name.log" >&2
  tail -5 "$out/$name.log" >&2
  exit 1
fi
"$tool" --import "$out/$name.ncu-rep" --page details > "$out/$name.txt" 2>&1
echo "nsight_compute: $out/$name.ncu-rep and $out/$name.txt ($(grep -c '^  [^ ].*Context' "$out/$name.txt") kernels)"
