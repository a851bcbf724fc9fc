#!/usr/bin/env bash
# Issue 25's figures on a lent 16-core machine, in one call of the device
# tool (about 5 minutes): at 2, 4, 8 and 16 PEs or threads, each line of
# the issue's table side by side with its baseline in the same round --
#   weft::parallel_for's empty loop beside libgomp and oneTBB (tasks_overhead,
#     with its op counts), and the default scheme's imbalance figures;
#   libweft-omp against libgomp: empty `parallel for`, `parallel`, barrier
#     (omp_empty_loop), explicit tasks (omp_tasks), one libgomp-linked
#     program each, run plain and with libweft-omp preloaded;
#   kNeighbor at the core level on each queue kind (what queue=auto picks);
#   chare creation + destruction beside a core send (entry_overhead);
#   ping-pong 16 B beside the cache-line floor.
# Rounds interleave the programs, so that ratios are formed within a round.
#
# Here, after `make build-release`:
#   echo /.device/ >> .git/info/exclude
#   r=build/release
#   ../shared/device/bundle.sh .device $r/bench/{tasks_overhead,tasks_imbalance} \
#     $r/bench/{omp_empty_loop_gomp,omp_tasks_gomp,kneighbor,entry_overhead,pingpong} \
#     $r/lib/libweft-omp.so bench/device/issue25.sh
# then the device tool's run: command "bash .device/issue25.sh",
# carry [".device"], timeout_s 560; the JSON lines come back in
# $OUT/issue25.jsonl (each tagged with its round and P), and
# bench/device/summarize25.py turns them into the tables of
# docs/benchmarks-16core.md.
set -u
source "$(dirname "$0")/env.sh"
O=${OUT:-./device-out}
mkdir -p "$O"
J=$O/issue25.jsonl
ROUNDS=${ROUNDS:-2}
PES=${PES:-"2 4 8 16"}
nproc
lscpu | grep -E 'Model name|^CPU\(s\)|Core|Socket|NUMA node\(s\)'

# Appends the JSON lines of stdin to $J with a tag (round, P, and what).
tag() { sed -e '/^{.*}$/!d' -e "s/}\$/,\"round\":$1,\"p\":$2,\"what\":\"$3\"}/" >> "$J"; }
# libweft-omp in place of libgomp for a libgomp-linked program: a command
# prefix, not a function (timeout runs programs only).
if [ -n "$RUN" ]; then
  OMP_WEFT="$RUN --preload $B/lib/libweft-omp.so"
else
  OMP_WEFT="env LD_PRELOAD=$B/lib/libweft-omp.so"
fi

for r in $(seq "$ROUNDS"); do
  for t in $PES; do
    timeout 60 $RUN "$B/bin/tasks_overhead" --weft:threads=$t --weft:quiet --loops=2000 --json \
      --repeat 3 | tag $r $t tasks_overhead
    for k in for parallel barrier; do
      OMP_NUM_THREADS=$t timeout 30 $RUN "$B/bin/omp_empty_loop_gomp" --construct=$k --loops=3000 \
        --json --repeat 3 | tag $r $t "omp_$k.libgomp"
      OMP_NUM_THREADS=$t timeout 30 $OMP_WEFT "$B/bin/omp_empty_loop_gomp" --construct=$k \
        --loops=3000 --json --repeat 3 | tag $r $t "omp_$k.weft"
    done
    OMP_NUM_THREADS=$t timeout 60 $RUN "$B/bin/omp_tasks_gomp" --tasks=20000 --grid=100 --json \
      --repeat 3 | tag $r $t omp_tasks.libgomp
    OMP_NUM_THREADS=$t timeout 60 $OMP_WEFT "$B/bin/omp_tasks_gomp" --tasks=20000 --grid=100 \
      --json --repeat 3 | tag $r $t omp_tasks.weft
    for q in mpsc spsc-pairs; do
      timeout 30 $RUN "$B/bin/kneighbor" --weft:threads=$t --weft:quiet --weft:queue=$q \
        --level=core --bytes=16 --touch=false --iters=10000 --json --repeat 3 | tag $r $t "kneighbor.$q"
    done
    timeout 30 $RUN "$B/bin/entry_overhead" --weft:threads=$t --weft:quiet --cases=create \
      --json --repeat 3 | tag $r $t entry_overhead
  done
  timeout 30 $RUN "$B/bin/pingpong" --weft:threads=2 --weft:quiet --bytes=16 --json --repeat 5 |
    tag $r 2 pingpong
  timeout 60 $RUN "$B/bin/tasks_imbalance" --weft:threads=16 --weft:quiet \
    --variants=no-tasks,adaptive-idle --json --repeat 3 | tag $r 16 tasks_imbalance
  echo "round $r done"
done
wc -l "$J"
