#!/usr/bin/env bash
# Nsight Systems recipe: a timeline of a lab program (CUDA API calls, kernels, copies, NVTX ranges,
# OS runtime), and its summary tables.
#
#   tools/nsight_systems.sh OUTDIR PROGRAM [PROGRAM ARGS...]
#   tools/nsight_systems.sh results/nsys build/ch01_basics/baseline_cuda_graphs --shape 1000x1024
#
# Environment: NSYS=path. Writes OUTDIR/<program>.nsys-rep (open it in the Nsight Systems GUI)
# and OUTDIR/<program>.txt (nsys stats: kernel, memcpy and API summaries). A lab program runs with
# --no-check and one repetition; a demo (demo_sweep_report, say) with its own arguments only.
# Not every machine has a working nsys (the lab's GPU machines did not have one on the PATH): the
# script says so and exits 2.
set -u
HELP_LAST=12
source "$(dirname "$0")/profiler_args.sh"
lab_profiler_args nsight_systems "${NSYS:-$(command -v nsys || true)}" "nsys (Nsight Systems; NSYS=path)" "$@"
set -- "${PROGRAM_ARGS[@]}"
lab_program_flags
"$tool" profile -t cuda,nvtx,osrt --force-overwrite true -o "$out/$name" "$prog" "${PROGRAM_FLAGS[@]}" \
  "$@" > "$out/$name.log" 2>&1 || { echo "nsight_systems: nsys failed; see $out/$name.log" >&2; exit 1; }
"$tool" stats "$out/$name.nsys-rep" > "$out/$name.txt" 2>&1 || { echo "nsight_systems: nsys stats failed; see $out/$name.txt" >&2; exit 1; }
echo "nsight_systems: $out/$name.nsys-rep and $out/$name.txt"
