# Shared by the Nsight recipes (source it; it is not a program): reads "OUTDIR PROGRAM [ARGS...]",
# answers --help from the calling script's header (lines 2 to $HELP_LAST), checks the program and
# the profiler, and sets out, prog, name, tool and the remaining arguments in "$@" via PROGRAM_ARGS.
#   lab_profiler_args SCRIPT_NAME TOOL_PATH_OR_EMPTY "TOOL DESCRIPTION" "$@"
lab_profiler_args() {
  local script=$1 found=$2 what=$3
  shift 3
  if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then sed -n "2,${HELP_LAST}p" "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
  if [ $# -lt 2 ]; then sed -n "2,${HELP_LAST}p" "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; fi
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
