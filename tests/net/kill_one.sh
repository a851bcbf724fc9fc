#!/usr/bin/env bash
# Fault test: kill one process of a running job; every other process must be
# gone within 10 s, the job must fail, the output must name the lost node,
# and no process of the job may be left behind.
#   kill_one.sh <mpirun> <net_mp_core> <transport>
set -u
mpirun=$1 prog=$2 transport=$3
out=$(mktemp)
marker="weft-kill-one-$$"
# The marker in argv finds every process of this job (and only them).
"$mpirun" --oversubscribe --bind-to none -n 3 "$prog" --case=hang "--weft:transport=$transport" \
  --weft:threads=1 --weft:quiet "--marker=$marker" >"$out" 2>&1 &
job=$!
cleanup() { pkill -9 -f -- "--marker=$marker" 2>/dev/null; kill -9 "$job" 2>/dev/null; rm -f "$out"; }
trap cleanup EXIT
fail() { echo "kill_one ($transport): FAIL: $*"; echo "---- job output ----"; cat "$out"; exit 1; }

victim=""
for _ in $(seq 1 300); do
  victim=$(sed -n 's/^mp_core: node 1 pid \([0-9]*\) hangs$/\1/p' "$out")
  [ -n "$victim" ] && break
  kill -0 "$job" 2>/dev/null || fail "the job ended before node 1 was ready"
  sleep 0.1
done
[ -n "$victim" ] || fail "node 1 did not report its pid within 30 s"
sleep 0.3
kill -9 "$victim"
start=$(date +%s.%N)
code=""
for _ in $(seq 1 100); do
  if ! kill -0 "$job" 2>/dev/null; then wait "$job"; code=$?; break; fi
  sleep 0.1
done
end=$(date +%s.%N)
[ -n "$code" ] || fail "the job still runs 10 s after node 1 was killed"
[ "$code" -ne 0 ] || fail "the job exited 0 after losing node 1"
grep -Eq "lost node 1|rank 1 with PID [0-9]+ on node [^ ]+ exited on signal 9" "$out" || fail "the output does not name node 1"
sleep 0.2
if pgrep -f -- "--marker=$marker" >/dev/null; then
  fail "processes left behind: $(pgrep -af -- "--marker=$marker")"
fi
printf 'kill_one (%s): job ended %.1f s after node 1 was killed, exit code %s\n' \
  "$transport" "$(awk -v a="$start" -v b="$end" 'BEGIN{print b-a}')" "$code"
