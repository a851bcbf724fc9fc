#!/usr/bin/env bash
# examples/md's steps per second with balancing off and on, in one process of
# 2 PEs and in 2 processes of 1 PE over shm; REPEAT rounds, the strategies
# interleaved within each round (so a change in the machine's load hits them
# alike). Prints a Markdown table: steps/s median [min, max], and the median
# over runs of the PEs' mean busy max/avg after the first balancing step
# (CPU time of cells and computes per PE, as md measures it).
#
# usage: bench/lb/md.sh [MD_BINARY] [REPEAT] [-- md options...]
#   defaults: build/release/examples/md, 3, --md:steps=200
#   STRATEGIES="off greedy-refine ..." overrides the strategies compared.
set -euo pipefail
md=${1:-build/release/examples/md}
repeat=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
md_args=("$@")
[ ${#md_args[@]} -eq 0 ] && md_args=(--md:steps=200)
strategies=${STRATEGIES:-"off greedy-refine node-aware md-greedy-refine"}
if [ ! -x "$md" ]; then
  echo "md.sh: no executable $md (build it: cmake --build <dir> --target md)" >&2
  exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # layout strategy round
  local out="$tmp/$1.$2.$3"
  if [ "$1" = "1x2" ]; then
    "$md" "${md_args[@]}" --weft:threads=2 --weft:lb="$2" >"$out" 2>&1
  else
    mpiexec --oversubscribe --bind-to none -n 2 "$md" "${md_args[@]}" --weft:transport=shm \
      --weft:threads=1 --weft:lb="$2" >"$out" 2>&1
  fi || { echo "md.sh: $1 $2 round $3 failed:" >&2; tail -5 "$out" >&2; exit 1; }
}

for r in $(seq 1 "$repeat"); do
  for layout in 1x2 2x1; do
    for s in $strategies; do run "$layout" "$s" "$r"; done
  done
done

echo "| layout | strategy | steps/s median | [min, max] | PE busy max/avg after 1st balancing |"
echo "|---|---|---|---|---|"
for layout in 1x2 2x1; do
  for s in $strategies; do
    rates=() imb=()
    for r in $(seq 1 "$repeat"); do
      f="$tmp/$layout.$s.$r"
      rates+=("$(sed -n 's/^md: [0-9]* steps in [0-9.]* s: \([0-9.]*\) steps\/s.*/\1/p' "$f")")
      # Mean of the intervals after the first one (those follow a balancing step).
      imb+=("$(awk '/^md: steps [0-9]+-[0-9]+:/ { n++; if (n > 1) { for (i = 1; i <= NF; i++)
              if ($i == "max/avg") { s += $(i + 1); k++ } } }
              END { if (k) printf "%.3f", s / k; else print "n/a" }' "$f")")
    done
    printf '%s\n' "${rates[@]}" | sort -g >"$tmp/r"
    printf '%s\n' "${imb[@]}" | sort -g >"$tmp/i"
    mid=$(( (repeat + 1) / 2 ))
    printf '| %s | %s | %s | [%s, %s] | %s |\n' "$layout" "$s" "$(sed -n "${mid}p" "$tmp/r")" \
      "$(head -1 "$tmp/r")" "$(tail -1 "$tmp/r")" "$(sed -n "${mid}p" "$tmp/i")"
  done
done
