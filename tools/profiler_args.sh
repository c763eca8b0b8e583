# Shared by the Nsight recipes (source it; it is not a program): reads "OUTDIR PROGRAM [ARGS...]",
# answers --help from the calling script's header (lines 2 to $HELP_LAST), checks the program and
# the profiler, and sets out, prog, name, tool and the remaining arguments in "$@" via PROGRAM_ARGS.
#   lab_profiler_args SCRIPT_NAME TOOL_PATH_OR_EMPTY "TOOL DESCRIPTION" "$@"
lab_profiler_args() {
  local script=$1 found=$2 what=$3
  shift 3
  if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then sed -n "2,${HELP_LAST}p" "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
  if [ $# -lt 2 ]; then sed -n "2,${HELP_LAST}p" "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; fi
  script_name=$script
  out=$1
  prog=$2
  shift 2
  PROGRAM_ARGS=("$@")
  [ -x "$prog" ] || { echo "$script: $prog is not an executable (build it first)" >&2; exit 2; }
  tool=$found
  [ -n "$tool" ] && [ -x "$tool" ] || { echo "$script: $what not found on this machine; set its path in the environment" >&2; exit 2; }
  mkdir -p "$out" || exit 2
  name=$(basename "$prog")
}

# The flags that make a lab program's profiled run short and quiet, in PROGRAM_FLAGS: --no-check and
# one repetition (and EXTRA, Google Benchmark flags the recipe adds) when the program is a lab
# program (its --help names --benchmark_repetitions); none for a demo, which has flags of its own
# (the user's arguments choose its run) and would refuse them.
#   lab_program_flags [EXTRA...]
lab_program_flags() {
  PROGRAM_FLAGS=()
  if "$prog" --help 2>/dev/null | grep -q -- '--benchmark_repetitions'; then
    PROGRAM_FLAGS=(--no-check --benchmark_repetitions=1 "$@")
  else
    echo "$script_name: $name is not a lab program with the benchmark flags (a demo?): its own arguments only" >&2
  fi
}
