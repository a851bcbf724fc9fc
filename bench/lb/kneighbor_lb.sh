#!/usr/bin/env bash
# The cost of --weft:lb on a program that never calls at_sync(): with a
# strategy named, every entry method is timed for the element's load
# (src/objects/sync.cpp). kNeighbor at the objects level, 16 B, runs with
# --weft:lb=greedy and --weft:lb=off interleaved (drift of the machine falls
# on both), PAIRS pairs (first of each pair alternating); prints each pair's
# iter_us and the median ratio greedy/off with its min-max over the pairs.
# ON and OFF replace the two runs' weft flags (default --weft:lb=greedy and
# --weft:lb=off): e.g. ON="--weft:lb=greedy --weft:lb-comm=element" for the
# cost of communication records, with --migratable=true among the extra
# flags so that the elements are measured (kNeighbor's own are not).
# Usage: [THREADS=2] [ON=...] [OFF=...] bench/lb/kneighbor_lb.sh [BUILD_DIR (build/dev)] [PAIRS (9)] [extra kneighbor flags]
set -euo pipefail
build=${1:-build/dev}
pairs=${2:-9}
shift $(( $# < 2 ? $# : 2 ))
extra=("$@")
prog=$build/bench/kneighbor
if [[ ! -x $prog ]]; then
  echo "error: $prog not built (cmake --build $build --target kneighbor)" >&2
  exit 2
fi
if ! [[ $pairs =~ ^[1-9][0-9]*$ ]]; then
  echo "error: PAIRS must be a positive integer (got '$pairs')" >&2
  exit 2
fi
read -r -a on_flags <<<"${ON:---weft:lb=greedy}"
read -r -a off_flags <<<"${OFF:---weft:lb=off}"
one() {  # $@ = weft flags; prints the median and the min iter_us of the run
  "$prog" --weft:threads="${THREADS:-2}" --weft:quiet --level=objects --bytes=16 --touch=false --iters=10000 \
    --repeat 5 --json "$@" ${extra[@]+"${extra[@]}"} |
    python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); print(d["value"], d["min"])'
}
ratios=() min_ratios=()
for ((i = 0; i < pairs; i++)); do
  if ((i % 2 == 0)); then off=($(one "${off_flags[@]}")); on=($(one "${on_flags[@]}")); else
    on=($(one "${on_flags[@]}")); off=($(one "${off_flags[@]}")); fi
  ratios+=("$(python3 -c "print(${on[0]} / ${off[0]})")")
  min_ratios+=("$(python3 -c "print(${on[1]} / ${off[1]})")")
  printf 'pair %d: off %s us (min %s), on %s us (min %s), ratio %.3f (of mins %.3f)\n' "$i" \
    "${off[0]}" "${off[1]}" "${on[0]}" "${on[1]}" "${ratios[-1]}" "${min_ratios[-1]}"
done
# The ratio of the runs' minimums beside that of their medians: on a shared
# machine the least disturbed repeat of each run says most about the code.
echo "on: ${on_flags[*]}; off: ${off_flags[*]}; extra: ${extra[*]+${extra[*]}}"
python3 - "${ratios[*]}" "${min_ratios[*]}" <<'PY'
import statistics, sys
for name, arg in (("medians", sys.argv[1]), ("minimums", sys.argv[2])):
    r = sorted(float(x) for x in arg.split())
    print(f"on/off of the runs' {name}: median {statistics.median(r):.3f} "
          f"(min {r[0]:.3f}, max {r[-1]:.3f}, {len(r)} pairs)")
PY
