#!/bin/bash
# The MPI layer's figures side by side (docs/mpi.md "Figures"), in ROUNDS
# interleaved rounds so that drift of the machine hits both sides alike:
#   bench/mpi/compare.sh [BUILD_DIR] [ROUNDS]      (default build/dev, 3)
#  - kNeighbor (k=3, 16 B): MPI ranks (one per PE) against bench/kneighbor's
#    objects level on the same PEs: what the MPI layer costs over objects;
#  - allreduce (8 doubles, 64 KiB) and barrier: 8 ranks on 2 PEs against
#    Open MPI's 8 processes (oversubscribed), when both are built;
#  - the virtualization factor: the same stencil at 1, 2, 4, 8, 16 ranks per
#    PE (one process);
#  - a rank's cost: memory and start-up time, from 16 and 4096 ranks.
# Each line is one measurement; the ratios are per round.
set -euo pipefail
build=${1:-build/dev}
rounds=${2:-3}
pes=${PES:-2}
bench=$build/bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
weft=(--weft:threads=$pes --weft:quiet)
field() { sed -n "s/.*$1=\([0-9.e+-]*\).*/\1/p" | head -1; }

for ((r = 1; r <= rounds; ++r)); do
  echo "## round $r"
  mpi=$("$bench/mpi_ranks_kneighbor_weft" "${weft[@]}" --weft:vp=$pes --iters 5000 | field us_per_iteration)
  obj=$("$bench/kneighbor" "${weft[@]}" --level=objects --bytes=16 --touch=false --iters=5000 --repeat 5 |
        awk '$1 == "mode" {for (i = 1; i <= NF; i++) if ($i == "value") v = i; next}
             v && /objects/ {print $v; exit}')
  echo "kneighbor k=3 16B us/iter: mpi $mpi objects ${obj:-?} ratio $(awk -v a="$mpi" -v b="${obj:-0}" 'BEGIN{if (b>0) printf "%.2f", a/b; else print "?"}')"
  if [[ -x $bench/mpi_ranks_allreduce_weft ]]; then
    "$bench/mpi_ranks_allreduce_weft" "${weft[@]}" --weft:vp=8 | sed 's/^/weft    /'
    if [[ -x $bench/mpi_ranks_allreduce_openmpi ]]; then
      mpiexec --oversubscribe --bind-to none -n 8 "$bench/mpi_ranks_allreduce_openmpi" | sed 's/^/openmpi /'
    fi
  fi
  for f in 1 2 4 8 16; do
    "$bench/mpi_ranks_vp_stencil_weft" "${weft[@]}" --weft:vp=$((pes * f)) --cells 4194304 --sweeps 100 |
      sed "s/^/ranks_per_pe=$f /"
  done
  for vp in 16 4096; do
    t0=$(date +%s.%N)
    line=$("$bench/mpi_ranks_rank_cost_weft" "${weft[@]}" --weft:vp=$vp)
    t1=$(date +%s.%N)
    echo "$line wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}')"
  done
done
