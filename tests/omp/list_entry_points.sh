#!/bin/sh
# Lists the GOMP_* and omp_* symbols each OpenMP test program references
# (nm -u on its objects), then their union: the input of ENTRY_POINTS.md.
# Usage: tests/omp/list_entry_points.sh <build dir>   (after building omp_gomp_*)
set -eu
dir="${1:?usage: $0 <build dir>}/tests/omp/CMakeFiles"
all=""
for objdir in "$dir"/omp_gomp_*.dir; do
  name=$(basename "$objdir" .dir)
  syms=$(nm -u "$objdir"/*.o | awk '{print $2}' | grep -E '^(GOMP_|omp_)' | sort -u)
  echo "${name#omp_gomp_}: $(echo "$syms" | tr '\n' ' ')"
  all="$all $syms"
done
union=$(echo "$all" | tr ' ' '\n' | grep . | sort -u)
echo "all ($(echo "$union" | wc -l)): $(echo "$union" | tr '\n' ' ')"
