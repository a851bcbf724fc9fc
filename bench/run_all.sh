#!/usr/bin/env bash
# Runs every benchmark and writes the tables for docs/benchmarks.md.
#
# usage: bench/run_all.sh BUILD_DIR OUT_DIR REPORT_MD
#
# Each benchmark in BUILD_DIR/bench/ runs with --json --repeat 5; its JSON
# lines go to OUT_DIR/<name>.jsonl (replaced, not appended across runs).
# kneighbor runs once per variant (queue x bind x alloc, 8 runs), all into
# kneighbor.jsonl; each run measures the core and the objects level side by
# side with the span payload (the default variant with every payload). The objects
# layer's benchmarks (entry_overhead, reduction_latency) follow, then
# mpi_pingpong under mpirun -n 2 (the plain MPI baseline for the
# transports). A missing binary is skipped with a note; a benchmark that
# fails is reported and the others still run; the report is written from
# whatever was collected, and the exit status is 1 if anything failed.
# Then: python3 bench/report.py OUT_DIR > REPORT_MD (`make bench` does all this).
set -uo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 BUILD_DIR OUT_DIR REPORT_MD" >&2
  exit 2
fi
build_dir=$1
out_dir=$2
report_md=$3
bin_dir=$build_dir/bench
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repeat=5

if [[ ! -d $bin_dir ]]; then
  echo "run_all: no $bin_dir (build first: make build-release)" >&2
  exit 2
fi
mkdir -p "$out_dir" "$(dirname "$report_md")" || exit 2

# Fixed order first (cheap micro-benchmarks, then workloads), then any other
# benchmark binary found in bin_dir.
known=(alloc_scaling pe_private wakeup queues pingpong kneighbor entry_overhead reduction_latency
       mpi_pingpong)
names=("${known[@]}")
for f in "$bin_dir"/*; do
  n=$(basename "$f")
  [[ -f $f && -x $f ]] || continue
  [[ " ${known[*]} " == *" $n "* ]] && continue
  names+=("$n")
done

failed=()
total=${#names[@]}
i=0
for name in "${names[@]}"; do
  i=$((i + 1))
  exe=$bin_dir/$name
  out=$out_dir/$name.jsonl
  if [[ ! -x $exe ]]; then
    echo "run_all: [$i/$total] $name: no binary at $exe, skipped" >&2
    rm -f "$out"
    continue
  fi
  : >"$out"
  if [[ $name == kneighbor ]]; then
    echo "run_all: [$i/$total] kneighbor: 8 variants (queue mpsc|spsc-pairs x bind compact|none x alloc mimalloc|system), core and objects levels" >&2
    for queue in mpsc spsc-pairs; do
      for bind in compact none; do
        for alloc in mimalloc system; do
          payload=span
          [[ $queue/$bind/$alloc == mpsc/compact/mimalloc ]] && payload=all
          if ! "$exe" --json --repeat "$repeat" --level=both --payload="$payload" \
               --weft:queue="$queue" --weft:bind="$bind" --weft:alloc="$alloc" >>"$out"; then
            echo "run_all: kneighbor --weft:queue=$queue --weft:bind=$bind --weft:alloc=$alloc failed" >&2
            failed+=("kneighbor($queue,$bind,$alloc)")
          fi
        done
      done
    done
  elif [[ $name == mpi_pingpong ]]; then
    # The plain MPI baseline: two ranks on this host, under the launcher
    # (Open MPI needs to be told it may run as root).
    echo "run_all: [$i/$total] mpi_pingpong: 2 ranks under mpirun" >&2
    if ! OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
         mpirun --oversubscribe -n 2 "$exe" --json --repeat "$repeat" >"$out"; then
      echo "run_all: mpi_pingpong failed" >&2
      failed+=("mpi_pingpong")
    fi
  else
    echo "run_all: [$i/$total] $name" >&2
    if ! "$exe" --json --repeat "$repeat" >"$out"; then
      echo "run_all: $name failed" >&2
      failed+=("$name")
    fi
  fi
done

if python3 "$here/report.py" "$out_dir" >"$report_md.tmp"; then
  mv "$report_md.tmp" "$report_md"
  echo "run_all: report written to $report_md" >&2
else
  rm -f "$report_md.tmp"
  echo "run_all: report.py failed; $report_md left unchanged" >&2
  failed+=("report.py")
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run_all: FAILED: ${failed[*]}" >&2
  exit 1
fi
