#!/usr/bin/env bash
# Nsight Systems recipe: a timeline of a lab program (CUDA API calls, kernels, copies, NVTX ranges,
# OS runtime), and its summary tables.
#
#   tools/nsight_systems.sh OUTDIR PROGRAM [PROGRAM ARGS...]
#   tools/nsight_systems.sh results/nsys build/ch01_basics/baseline_cuda_graphs --shape 1000x1024
#
# Environment: NSYS=path. Writes OUTDIR/<program>.nsys-rep (open it in the Nsight Systems GUI)
# and OUTDIR/<program>.txt (nsys stats: kernel, memcpy and API summaries).
# Not every machine has a working nsys (the lab's GPU machines did not have one on the PATH): the
# script says so and exits 2.
set -u
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
if [ $# -lt 2 ]; then usage >&2; exit 2; fi
out=$1
shift
prog=$1
shift
[ -x "$prog" ] || { echo "nsight_systems: $prog is not an executable (build it first)" >&2; exit 2; }
nsys=${NSYS:-$(command -v nsys || true)}
[ -n "$nsys" ] && [ -x "$nsys" ] || { echo "nsight_systems: nsys (Nsight Systems) not found on this machine; set NSYS=path" >&2; exit 2; }
mkdir -p "$out" || exit 2
name=$(basename "$prog")
"$nsys" profile -t cuda,nvtx,osrt --force-overwrite true -o "$out/$name" "$prog" --no-check \
  --benchmark_repetitions=1 "$@" > "$out/$name.log" 2>&1 || { echo "nsight_systems: nsys failed; see $out/$name.log" >&2; exit 1; }
"$nsys" stats "$out/$name.nsys-rep" > "$out/$name.txt" 2>&1 || { echo "nsight_systems: nsys stats failed; see $out/$name.txt" >&2; exit 1; }
echo "nsight_systems: $out/$name.nsys-rep and $out/$name.txt"
