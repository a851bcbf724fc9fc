#!/usr/bin/env bash
# Two hosts: two network namespaces joined by a veth pair, made by this test.
# mpirun runs in the first; Open MPI's rsh launcher starts its orted in the
# second through an agent script (ip netns exec), so the two processes of the
# job talk through the kernel's real TCP/IP stack and the veth pair: MPI over
# the tcp BTL, or UCX over its tcp transport, both bound to the veth.
# Each "host" also gets its own UTS namespace (hostname): Open MPI and PMIx
# tell hosts apart by name, and with one shared name the second orted takes
# itself for the first host (PMIx then reports wrong local peers).
# The veth counters must grow by at least the payload each case sends each
# way, beyond what a job running `true` moves (the launch traffic).
# The composites (shm+mpi, shm+ucx) run 4 processes, 2 per host, 1 PE each:
# mp_core's cases as above, then net_mp_composite, whose counters must show
# that the messages between the processes of one host went through shm and
# the others through the network (at least their bytes cross the veth), and
# a job with the default transport, which must choose shm+mpi.
#   two_hosts.sh <mpirun> <net_mp_core> <transport: mpi|ucx|shm+mpi|shm+ucx> [<net_mp_composite>]
# Exit 0: passed; 1: failed; 77: skipped (no namespaces here).
set -u
if [ $# -ne 3 ] && [ $# -ne 4 ]; then
  echo "usage: two_hosts.sh <mpirun> <net_mp_core> <mpi|ucx|shm+mpi|shm+ucx> [<net_mp_composite>]" >&2
  exit 2
fi
mpirun=$1 prog=$2 transport=$3 composite_prog=${4:-}
case $transport in
  mpi | ucx) per_host=1 threads=2 ;;
  shm+mpi | shm+ucx) per_host=2 threads=1 ;;
  *) echo "two_hosts: unknown transport '$transport'" >&2; exit 2 ;;
esac
inter=${transport#shm+}  # what runs between the hosts
nprocs=$((2 * per_host))
here=$(cd "$(dirname "$0")" && pwd)
tag="two_hosts ($transport)"

skip() { echo "SKIP: $*"; exit 77; }
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
command -v unshare >/dev/null 2>&1 || skip "no 'unshare' command (util-linux)"

# The cases' sizes, from the test program's source.
count() {
  local v
  v=$(sed -n "s/^constexpr int $1 = \([0-9]*\);.*/\1/p" "$here/mp_core.cpp")
  [ -n "$v" ] || { echo "$tag: FAIL: no '$1' in $here/mp_core.cpp"; exit 1; }
  echo "$v"
}
pingpong_rounds=$(count pingpong_rounds) || exit 1
alltoall_count=$(count alltoall_count) || exit 1
broadcast_count=$(count broadcast_count) || exit 1

ns1="weft-h1-$$" ns2="weft-h2-$$"  # network namespaces, also the hostnames
addr1=10.213.0.1 addr2=10.213.0.2   # private: only inside the two namespaces
dev=weft0                           # the veth end's name in each namespace
work=$(mktemp -d /tmp/weft-2h.XXXXXX)
out="$work/out" agentlog="$work/agent.log"
job=""
made=()

kill_ns_procs() {  # every process inside namespace $1 (all started by this test)
  local pids i
  for i in $(seq 1 50); do
    pids=$(ip netns pids "$1" 2>/dev/null)
    [ -z "$pids" ] && return 0
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null
    sleep 0.1
  done
}
cleanup() {
  [ -n "$job" ] && kill -9 "$job" 2>/dev/null
  for ns in "${made[@]}"; do
    kill_ns_procs "$ns"
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# ---- the two hosts ------------------------------------------------------------
for ns in "$ns1" "$ns2"; do
  err=$(ip netns add "$ns" 2>&1) || skip "cannot create network namespace $ns: $err"
  made+=("$ns")
done
err=$(ip link add "$dev" netns "$ns1" type veth peer name "$dev" netns "$ns2" 2>&1) ||
  skip "cannot create a veth pair between $ns1 and $ns2: $err"
for h in "$ns1 $addr1" "$ns2 $addr2"; do
  set -- $h
  ip -n "$1" addr add "$2/24" dev "$dev" && ip -n "$1" link set lo up && ip -n "$1" link set "$dev" up ||
    { echo "$tag: FAIL: cannot configure $dev in $1"; exit 1; }
done
# The kernel reports the carrier (operstate up, IFF_RUNNING) of a new veth up
# to a second or so later; UCX ignores a device until then.
for ns in "$ns1" "$ns2"; do
  for _ in $(seq 1 100); do
    [ "$(ip netns exec "$ns" cat "/sys/class/net/$dev/operstate" 2>/dev/null)" = up ] && break
    sleep 0.1
  done
  [ "$(ip netns exec "$ns" cat "/sys/class/net/$dev/operstate" 2>/dev/null)" = up ] ||
    { echo "$tag: FAIL: $dev in $ns is not up after 10 s"; ip -n "$ns" link show "$dev"; exit 1; }
done
echo "$tag: hosts $ns1 ($addr1) and $ns2 ($addr2), joined by veth $dev"

# Open MPI's rsh launcher runs `agent [options] <host> <command...>` to start
# orted on <host>; the command comes as words that make one shell string.
agent="$work/netns-agent"
cat >"$agent" <<EOF
#!/bin/bash
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case \$host in
  $addr1) ns=$ns1 ;;
  $addr2) ns=$ns2 ;;
  *) echo "netns-agent: unknown host '\$host'" >&2; exit 1 ;;
esac
echo "\$host -> netns \$ns: \$*" >>"$agentlog"
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$ns && \$*"
EOF
chmod +x "$agent"
# Filled by slot: nodes 0 .. per_host-1 on host 1, the others on host 2.
printf '%s slots=%d\n%s slots=%d\n' "$addr1" "$per_host" "$addr2" "$per_host" >"$work/hosts"

# Open MPI and PMIx keep their session files under TMPDIR: ours goes with us.
mpirun_args=(-n "$nprocs" --hostfile "$work/hosts" --bind-to none
  --mca plm_rsh_agent "$agent" --mca oob_tcp_if_include "$dev")
if [ "$inter" = mpi ]; then
  mpirun_args+=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$dev")
else
  mpirun_args+=(-x UCX_TLS=tcp -x "UCX_NET_DEVICES=$dev")
fi
[ -n "${ASAN_OPTIONS:-}" ] && mpirun_args+=(-x ASAN_OPTIONS)

counters() {  # tx_bytes rx_bytes tx_packets rx_packets of host 1's veth end
  local s
  for s in tx_bytes rx_bytes tx_packets rx_packets; do
    ip netns exec "$ns1" cat "/sys/class/net/$dev/statistics/$s" || echo x
  done | tr '\n' ' '
}
fail() {
  echo "$tag: FAIL: $*"
  echo "---- job output ----"; cat "$out" 2>/dev/null
  echo "---- launch agent log ----"; cat "$agentlog" 2>/dev/null
  exit 1
}

# run <what> <command...>: one job across the two hosts; sets d_tx d_rx
# (bytes host 1 -> 2 and 2 -> 1 on the veth) and d_txp d_rxp (packets).
run() {
  local what=$1 code b a ns
  shift
  : >"$agentlog"
  read -r -a b <<<"$(counters)"
  TMPDIR="$work" timeout -k 5 110 ip netns exec "$ns1" unshare --uts \
    /bin/sh -c 'hostname "$0" && exec "$@"' "$ns1" "$mpirun" "${mpirun_args[@]}" "$@" >"$out" 2>&1 &
  job=$!
  wait "$job"
  code=$?
  job=""
  read -r -a a <<<"$(counters)"
  [ "$code" -eq 0 ] || fail "$what: the job exited with code $code"
  grep -q "^$addr2 -> netns $ns2: " "$agentlog" || fail "$what: mpirun did not start orted on $addr2"
  # Nothing may outlive the job, on either host.
  for ns in "$ns1" "$ns2"; do
    for _ in $(seq 1 50); do [ -z "$(ip netns pids "$ns")" ] && break; sleep 0.1; done
    [ -z "$(ip netns pids "$ns")" ] ||
      fail "$what: processes left in $ns: $(ip netns pids "$ns" | xargs -r ps -o pid=,args= -p)"
  done
  case "${a[*]} ${b[*]}" in *x*) fail "$what: cannot read the counters of $dev in $ns1" ;; esac
  d_tx=$((a[0] - b[0])) d_rx=$((a[1] - b[1])) d_txp=$((a[2] - b[2])) d_rxp=$((a[3] - b[3]))
}

# ---- launch traffic alone ------------------------------------------------------
run "baseline (true)" true
base_tx=$d_tx base_rx=$d_rx
echo "$tag: launch only (a job running true): veth $base_tx B host1->host2, $base_rx B host2->host1"

# ---- the cases -------------------------------------------------------------------
# want_<case>: payload bytes that must cross each way (2 processes x 2 PEs,
# or 4 x 1; either way PEs 0,1 on host 1, PEs 2,3 on host 2).
#  pingpong: PE 0 <-> PE 3, pingpong_rounds messages of an int each way, one
#    at a time (so also at least that many packets each way);
#  alltoall: each PE sends alltoall_count 8-byte messages to each PE: 2 PEs x
#    2 remote PEs x count each way;
#  broadcast: broadcast_count 8-byte broadcasts from PE 0 (host 1) and as
#    many from PE 3 (host 2): each reaches the other host at least once.
want_pingpong=$((pingpong_rounds * 4))
want_alltoall=$((2 * 2 * alltoall_count * 8))
want_broadcast=$((broadcast_count * 8))
for c in pingpong alltoall broadcast; do
  start=$(date +%s.%N)
  run "$c" "$prog" "--case=$c" "--weft:transport=$transport" "--weft:threads=$threads" \
    --weft:quiet --weft:timeout=90
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  grep -q "^mp_core: $c passed .*$nprocs processes" "$out" || fail "$c: no 'mp_core: $c passed' line"
  want_var="want_$c"
  want=${!want_var}
  x_tx=$((d_tx - base_tx)) x_rx=$((d_rx - base_rx))
  echo "$tag: $c passed in $secs s; veth: $d_tx B ($d_txp pkts) host1->host2, $d_rx B ($d_rxp pkts)" \
    "host2->host1; beyond launch: $x_tx / $x_rx B, payload needs >= $want B each way"
  [ "$x_tx" -ge "$want" ] || fail "$c: only $x_tx B beyond launch went host1->host2 over $dev (< $want)"
  [ "$x_rx" -ge "$want" ] || fail "$c: only $x_rx B beyond launch went host2->host1 over $dev (< $want)"
  if [ "$c" = pingpong ]; then
    [ "$d_txp" -ge "$pingpong_rounds" ] && [ "$d_rxp" -ge "$pingpong_rounds" ] ||
      fail "pingpong: fewer than $pingpong_rounds packets each way over $dev ($d_txp / $d_rxp)"
  fi
done

# ---- the composites: which path each message took ---------------------------------
if [ "$per_host" -eq 2 ]; then
  if [ -n "$composite_prog" ]; then
    # Each node prints "mp_composite: node N host-group G shm-sent M msgs X B
    # inter-sent K msgs Y B"; it has already checked that exactly its messages
    # to G went through shm and the others through the inter backend.
    run "composite counters" "$composite_prog" "--inter=$inter" --expect-group=2
    grep -q "^mp_composite: passed, 4 processes over $transport" "$out" ||
      fail "composite counters: no 'mp_composite: passed' line"
    want_tx=0 want_rx=0
    for n in 0 1 2 3; do
      line=$(grep "^mp_composite: node $n host-group " "$out") ||
        fail "composite counters: no counters line of node $n"
      read -r -a f <<<"$line"
      group=${f[4]} shm_msgs=${f[6]} shm_bytes=${f[8]} net_msgs=${f[11]} net_bytes=${f[13]}
      if [ "$n" -lt 2 ]; then want_group=0,1; else want_group=2,3; fi
      [ "$group" = "$want_group" ] || fail "composite counters: node $n's host group is $group, not $want_group"
      [ "$shm_msgs" -gt 0 ] && [ "$net_msgs" -gt 0 ] ||
        fail "composite counters: node $n sent $shm_msgs messages through shm and $net_msgs between hosts"
      if [ "$n" -lt 2 ]; then want_tx=$((want_tx + net_bytes)); else want_rx=$((want_rx + net_bytes)); fi
      echo "$tag: node $n (host $((n / 2 + 1))): $shm_msgs messages ($shm_bytes B) through shm," \
        "$net_msgs ($net_bytes B) through $inter"
    done
    x_tx=$((d_tx - base_tx)) x_rx=$((d_rx - base_rx))
    echo "$tag: composite counters: veth beyond launch: $x_tx / $x_rx B; $inter sent $want_tx / $want_rx B"
    [ "$x_tx" -ge "$want_tx" ] || fail "composite counters: only $x_tx B beyond launch went host1->host2 (< $want_tx)"
    [ "$x_rx" -ge "$want_rx" ] || fail "composite counters: only $x_rx B beyond launch went host2->host1 (< $want_rx)"
  fi
  if [ "$inter" = mpi ]; then
    # The default across hosts: every node's startup line names the composite.
    run "auto" "$prog" --case=pingpong --weft:threads=1 --weft:timeout=90
    lines=$(grep -c "of 4 nodes (transport=shm+mpi," "$out")
    [ "$lines" -eq 4 ] || fail "auto: $lines of 4 nodes chose transport=shm+mpi"
    echo "$tag: auto chose shm+mpi on every node"
  fi
fi
echo "$tag: passed"
