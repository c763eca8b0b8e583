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
# results go, default results/seed002), --gpus N (below), --dry-run (print the commands, run
# nothing). Arguments after the part go to the report (for example --variants vanilla,compiled, or
# --reps 10). Each part writes the users' file names into --out: compiled_attention_benchmark.csv
# and .md (a), compiled_transformer_benchmark.csv and .md (b). The reports print their progress as
# they go; part (b)'s full grid is long (its largest models' fp32 steps are the long ones): the
# report rewrites its CSV after every configuration, and `tools/run_seed002.sh b --resume` goes on
# from the rows it holds.
# --gpus N shares part (b) among N GPUs of one machine: its 20 configurations dealt out by their
# cost (parameters x context, the largest first, each to the least loaded GPU), one report a GPU
# (CUDA_VISIBLE_DEVICES) writing compiled_transformer_benchmark.gpuI.csv, side by side; then their
# rows are put in one compiled_transformer_benchmark.csv, and the report, given all 20 with
# --resume, writes the tables from it without measuring anything. --resume after --gpus resumes
# each GPU's file.
# Exit status: the first failing report's (1: a wrong result; 2: bad usage), or 2 here for bad
# usage of this script.
set -u
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }  # the comment above
die() { echo "run_seed002: $1" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=$root/results/seed002
dry=0
gpus=1
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --build) [ $# -ge 2 ] || die "--build needs a folder"; build=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --gpus) [ $# -ge 2 ] || die "--gpus needs a count"
            [[ $2 =~ ^[1-9][0-9]?$ ]] || die "--gpus $2: a count of GPUs from 1 to 99"
            gpus=$2; shift 2 ;;
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
# Part (b) over several GPUs: the configurations dealt out by cost (parameters in millions at
# vocabulary 10000, times the context), largest first, each to the GPU with the least so far.
share_b() {
  local -a load=() lists=()
  local i best entry size ctx
  for ((i = 0; i < gpus; ++i)); do load[i]=0; lists[i]=""; done
  while read -r cost entry; do
    best=0
    for ((i = 1; i < gpus; ++i)); do ((load[i] < load[best])) && best=$i; done
    load[best]=$((load[best] + cost))
    lists[best]+="${lists[best]:+,}$entry"
  done < <(for size in small:101 medium:324 large:735 xl:1509 2.7B:2572; do
             for ctx in 128 256 512 1024; do echo "$((${size#*:} * ctx)) ${size%%:*}:$ctx"; done
           done | sort -rn)
  for ((i = 0; i < gpus; ++i)); do echo "${lists[i]}"; done
}

status=0
for p in "${parts[@]}"; do
  mapfile -t cmd < <(command_of "$p")
  if [ "$p" = b ] && [ "$gpus" -gt 1 ]; then
    # The report's flags without --csv, --markdown and the grid (the shares name their own).
    base=("${cmd[0]}" --batch 4 --warmup 5 --reps 10)
    mapfile -t shares < <(share_b)
    pids=()
    for ((i = 0; i < gpus; ++i)); do
      part_cmd=("${base[@]}" --configs "${shares[i]}" --csv "$out/compiled_transformer_benchmark.gpu$i.csv"
                --markdown "$out/compiled_transformer_benchmark.gpu$i.md" "$@")
      echo "== part b, GPU $i: CUDA_VISIBLE_DEVICES=$i ${part_cmd[*]}"
      [ $dry -eq 1 ] && continue
      CUDA_VISIBLE_DEVICES=$i "${part_cmd[@]}" > "$out/compiled_transformer_benchmark.gpu$i.log" 2>&1 &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do
      wait "$pid" || { rc=$?; [ $status -eq 0 ] && status=$rc; }
    done
    [ $status -eq 0 ] || { echo "run_seed002: a share of part b failed (exit $status): see $out/*.gpu*.log" >&2; exit $status; }
    merged="$out/compiled_transformer_benchmark.csv"
    echo "== part b: the shares' rows into $merged"
    if [ $dry -eq 0 ]; then
      # One header, then every share's rows in the grid's order (size, then context).
      head -n 1 "$out/compiled_transformer_benchmark.gpu0.csv" > "$merged" &&
        for ((i = 0; i < gpus; ++i)); do tail -n +2 "$out/compiled_transformer_benchmark.gpu$i.csv"; done |
        awk -F, 'BEGIN { split("small medium large xl 2.7B", n, " "); for (i in n) rank[n[i]] = i }
                 NF { print rank[$1] "," $2 "," $0 }' | sort -t, -k1,1n -k2,2n | cut -d, -f3- >> "$merged" ||
        die "cannot merge the shares' CSVs into $merged"
    fi
    extra=()
    for a in "$@"; do [ "$a" = --resume ] || extra+=("$a"); done
    cmd+=(--resume "${extra[@]}")
  else
    cmd+=("$@")
  fi
  echo "== part $p: ${cmd[*]}"
  [ $dry -eq 1 ] && continue
  "${cmd[@]}" || exit $?
done
