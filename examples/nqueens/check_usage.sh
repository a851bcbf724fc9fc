#!/usr/bin/env bash
# example.nqueens.usage: bad arguments give the usage line alone (no startup
# line before it) and exit status 2.
nqueens=$1
out=$("$nqueens" 9 --weft:threads=2 2>&1)
rc=$?
printf '%s\n' "$out"
want='usage: nqueens N THRESHOLD [--weft:options]: expected 2 arguments, got 1'
if [ "$rc" -ne 2 ]; then echo "FAIL: exit status $rc, want 2"; exit 1; fi
if [ "$out" != "$want" ]; then echo "FAIL: the output is not the usage line alone"; exit 1; fi
echo passed
