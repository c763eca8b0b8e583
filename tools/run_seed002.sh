#!/usr/bin/env bash
# The users' torch.compile benchmark (seed 002) in the lab: one entry point per part, as its
# run_part_a.sh, run_part_b.sh and run_all.sh are.
#
#   tools/run_seed002.sh a       part (a), attention: demo_attention_report at the users' grid (batch 8,
#                                one head, d 16, 32, 64, 128, seq 256 to 16384; 10 warm-up runs, 100
#                                timed), every implementation, forward and backward
#   tools/run_seed002.sh b       part (b), the Transformer: demo_gpt2_report at the users' grid (small,
#                                medium, large, xl, 2.7B by contexts 128, 256, 512, 1024; batch 4; 5
#                                warm-up steps, 10 timed), every variant, the three phases
#   tools/run_seed002.sh all     both, (a) first
#
# Options, before the part: --build DIR (the build folder, default build), --out DIR (where the
# results go, default results/seed002), --dry-run (print the commands, run nothing). Arguments after
# the part go to the report (for example --variants vanilla,compiled, or --reps 10). Each part writes
# the users' file names into --out: compiled_attention_benchmark.csv and .md (a),
# compiled_transformer_benchmark.csv and .md (b). The reports print their progress as they go; part
# (b)'s full grid is long (its largest models' fp32 steps are the long ones): the report rewrites its CSV
# after every configuration, and `tools/run_seed002.sh b --resume` goes on from the rows it holds.
# Exit status: the first failing report's (1: a wrong result; 2: bad usage), or 2 here for bad
# usage of this script.
set -u
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }  # the comment above
die() { echo "run_seed002: $1" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=$root/results/seed002
dry=0
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --build) [ $# -ge 2 ] || die "--build needs a folder"; build=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "which part: a, b or all (see --help)"
part=$1
shift
case $part in
  a) parts=(a) ;;
  b) parts=(b) ;;
  all) parts=(a b) ;;
  *) die "no part '$part': a (attention), b (the Transformer) or all" ;;
esac

# The report of part P and its arguments, one per line.
command_of() {
  case $1 in
    a) printf '%s\n' "$build/ch04_compile_vs_fused/demo_attention_report" --batch 8 --heads 1 --d 16,32,64,128 \
         --seq 256,1024,4096,8192,16384 --warmup 10 --reps 100 \
         --csv "$out/compiled_attention_benchmark.csv" --markdown "$out/compiled_attention_benchmark.md" ;;
    b) printf '%s\n' "$build/ch04_compile_vs_fused/demo_gpt2_report" --sizes small,medium,large,xl,2.7B \
         --contexts 128,256,512,1024 --batch 4 --warmup 5 --reps 10 \
         --csv "$out/compiled_transformer_benchmark.csv" --markdown "$out/compiled_transformer_benchmark.md" ;;
  esac
}

if [ $dry -eq 0 ]; then
  for p in "${parts[@]}"; do
    program=$(command_of "$p" | head -1)
    [ -x "$program" ] || die "part $p needs $program: build it first (cmake --build $build --target ch04)"
  done
  mkdir -p "$out" || die "cannot create $out"
fi
for p in "${parts[@]}"; do
  mapfile -t cmd < <(command_of "$p")
  cmd+=("$@")
  echo "== part $p: ${cmd[*]}"
  [ $dry -eq 1 ] && continue
  "${cmd[@]}" || exit $?
done
