#!/usr/bin/env bash
# Fault test: kill one process of a running job and require that weft itself
# ends the job. mpirun runs with --enable-recovery (Open MPI 4's
# orte_enable_recovery): it does not end the job when a process dies, so
# every other process must see a loss on its own, say so in weft's words
# ("weft: node N: fatal: lost node M: ...", core's node_lost hook), and exit
# non-zero within 10 s, leaving no process behind; node 1 must be named.
# A survivor may name another survivor instead of node 1: one that saw node
# 1 go first and has ended too by the time it looks (both are gone then, and
# neither a pidfd nor shm's check says which went first).
#   kill_one.sh <mpirun> <net_mp_core> <transport>
#
# With recovery on, Open MPI 4.1 exits 0 whatever its processes return, so
# each process runs under a small sh wrapper that prints its exit code
# ("kill_one: rank N exit C"); those lines, not mpirun's code, are checked.
# (Open MPI's other knob, orte_abort_on_non_zero_status=0, does not end the
# job on a signal either, but mpirun 4.1.4 then never exits once its
# processes are gone.) Without recovery mpirun would kill the survivors
# itself ("... exited on signal 9"), and the test would pass whatever weft
# does; that behaviour is Open MPI's, so it is not tested here.
set -u
mpirun=$1 prog=$2 transport=$3
nprocs=3
out=$(mktemp)
marker="weft-kill-one-$$"
# The marker in argv finds every process of this job, wrappers included (and
# only them).
"$mpirun" --oversubscribe --bind-to none --enable-recovery -n $nprocs \
  /bin/sh -c '"$@"; rc=$?; echo "kill_one: rank ${OMPI_COMM_WORLD_RANK:-?} exit $rc"; exit $rc' \
  kill_one "$prog" --case=hang "--weft:transport=$transport" --weft:threads=1 --weft:quiet \
  "--marker=$marker" >"$out" 2>&1 &
job=$!
cleanup() { pkill -9 -f -- "--marker=$marker" 2>/dev/null; kill -9 "$job" 2>/dev/null; rm -f "$out"; }
trap cleanup EXIT
fail() { echo "kill_one ($transport): FAIL: $*"; echo "---- job output ----"; cat "$out"; exit 1; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}'; }

victim=""
for _ in $(seq 1 300); do
  victim=$(sed -n 's/^mp_core: node 1 pid \([0-9]*\) hangs$/\1/p' "$out")
  [ -n "$victim" ] && break
  kill -0 "$job" 2>/dev/null || fail "the job ended before node 1 was ready"
  sleep 0.1
done
[ -n "$victim" ] || fail "node 1 did not report its pid within 30 s"
sleep 0.3
kill -0 "$job" 2>/dev/null || fail "the job ended before node 1 was killed"
kill -9 "$victim"
start=$(date +%s.%N)
# Every survivor must report a loss in weft's own words, naming node 1 or a
# survivor (never itself).
survivors=$(seq 0 $((nprocs - 1)) | grep -vx 1)
reported() { grep -Eq "^weft: node $1: fatal: lost node ($(echo 1 $survivors | tr ' ' '|')): " "$out"; }
seen="" ended=""
for _ in $(seq 1 200); do
  if [ -z "$seen" ]; then
    all=1
    for n in $survivors; do reported "$n" || all=0; done
    [ $all -eq 1 ] && seen=$(elapsed "$start")
  fi
  if ! kill -0 "$job" 2>/dev/null; then
    ended=$(elapsed "$start")
    break
  fi
  sleep 0.05
done
[ -n "$ended" ] || fail "the job still runs 10 s after node 1 was killed (mpirun leaves it to weft)"
wait "$job"
code=$?
for n in $survivors; do
  reported "$n" || fail "node $n did not report a lost node (the launcher does not end the job: weft must)"
  grep -Eq "^weft: node $n: fatal: lost node $n: " "$out" && fail "node $n says it lost itself"
  c=$(sed -n "s/^kill_one: rank $n exit \([0-9]*\)\$/\1/p" "$out")
  [ -n "$c" ] || fail "node $n's exit code is not known (killed by the launcher?)"
  [ "$c" -ne 0 ] || fail "node $n exited 0 after losing node 1"
done
grep -Eq "^weft: node [0-9]+: fatal: lost node 1: " "$out" || fail "no survivor named node 1"
grep -q "^kill_one: rank 1 exit 137$" "$out" || fail "node 1 was not the process killed"
sleep 0.2
if pgrep -f -- "--marker=$marker" >/dev/null; then
  fail "processes left behind: $(pgrep -af -- "--marker=$marker")"
fi
printf 'kill_one (%s): node 1 killed; every survivor reported it within %s s; job ended after %s s (mpirun exit code %s)\n' \
  "$transport" "$seen" "$ended" "$code"
grep -E "^weft: node [0-9]+: fatal: lost node " "$out"
