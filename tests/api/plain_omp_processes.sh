#!/usr/bin/env bash
# api.plain_omp.processes: a plain OpenMP program on libweft-omp.so started
# as 2 processes by mpirun, 6 times by default (each process its own node:
# no warning, no wait on the other) and 6 times joined into one weft job
# (WEFT_TRANSPORT=shm: a process whose program ended must not stop the
# other's PEs in the middle of its region). Every run exits 0 with both
# processes' "ok" line; weft's watchdog ends a hung run (exit 124).
mpirun=$1 program=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0
export OMP_NUM_THREADS=2 WEFT_THREADS=2 WEFT_TIMEOUT=40
fail=0
for mode in default shm; do
  for i in 1 2 3 4 5 6; do
    if [ "$mode" = shm ]; then
      out=$(WEFT_TRANSPORT=shm "$mpirun" --oversubscribe --bind-to none -n 2 "$program" 2>&1)
    else
      out=$(env -u WEFT_TRANSPORT "$mpirun" --oversubscribe --bind-to none -n 2 "$program" 2>&1)
    fi
    rc=$?
    oks=$(printf '%s\n' "$out" | grep -c '^plain_omp ok: team of 2$')
    if [ "$rc" -ne 0 ] || [ "$oks" -ne 2 ]; then
      echo "FAIL ($mode, run $i): exit $rc, $oks ok lines of 2"; printf '%s\n' "$out"; fail=1
    elif [ "$mode" = default ] && printf '%s\n' "$out" | grep -q 'job of its own'; then
      echo "FAIL ($mode, run $i): a warning about the local transport"; printf '%s\n' "$out"; fail=1
    fi
  done
done
[ "$fail" -eq 0 ] && echo passed
exit "$fail"
