#!/bin/bash
# Chaos suite: chaos.sh FAULT[,FAULT...], each FAULT one of
#   kill9      kill -9 of a daemon while its items run (restarted after)
#   sigstop    SIGSTOP of a daemon past the session timeout, then SIGCONT
#   zkrestart  the (standalone) ZooKeeper server killed and restarted
#   leaderkill kill -9 of the leader of a 3-server ensemble (restarted after)
#   partition  one daemon in its own network namespace, its veth link cut
#   spawnerkill kill -9 of a daemon's zygote (the process that starts its
#              script items) while its items, longer than the period, run
#   spawnerpartition the same, then 1 s later that daemon's link cut (as
#              partition)
#   starved    as partition, but the cut-off daemon (its zygote and items
#              with it) is starved first: a cgroup v1 cpu group with a 1 s
#              CFS period and 5% of a core, and a busy loop in the group
#              (skipped, exit 77, without /sys/fs/cgroup/cpu)
#
# Three `ejob run` daemons share one job (6 script items of 2..PERIOD-2 s,
# cron every PERIOD s, failover on) on a real ZooKeeper. The partition fault
# runs the case that overlapped before self-fencing: one item of
# PERIOD-2..PERIOD-1 s owned by the cut-off daemon while the others idle
# (EJ_CHAOS_ITEMS overrides the item count). tests/chaos/item.sh
# logs every run to one O_APPEND file; chaos_check.py watches every item
# pid and then fails the test on two runs of one item at overlapping times,
# a fire lost outside a fault's detection window (fault start .. fault end +
# session timeout + EJ_CHAOS_MARGIN_MS), or a process left behind.
#
# Short by default (one round: CI). EJ_CHAOS_ROUNDS=20 (or
# `scripts/chaos --rounds 20`) runs 20 rounds of every fault named; EJ_CHAOS_PERIOD (s, default 6, or 10 with rounds), EJ_CHAOS_SESSION_MS
# (default 3000), EJ_CHAOS_MARGIN_MS (default 4000), EJ_CHAOS_KEEP=1 keeps
# the work directory of a failed run. EJ_CHAOS_RETRY=PCT makes PCT % of the
# item runs fail (exit 1 at their end) and gives the job retry
# {maxAttempts: 3, initialBackoffSeconds: 1}: the attempts are runs like any
# other to the checker (no two of one item may overlap), and an instance in
# a back-off (1 s, then 2 s) is busy with the job: a fire it folds into the
# misfire re-run after its retry is not lost.
# Exit 77 (ctest skip) when network namespaces are not available.
set -u
FAULTS_ARG=${1:?usage: chaos.sh kill9|sigstop|zkrestart|leaderkill|partition[,...]}
E=${EJOB:?EJOB must name the ejob binary}
SRC=${EJ_SOURCE_DIR:?EJ_SOURCE_DIR must name the source tree}
HERE=$SRC/tests/chaos
ROUNDS=${EJ_CHAOS_ROUNDS:-1}
# Short mode: 6 s fires (items of 2..4 s); long mode: 10 s (items of 2..8 s).
PERIOD=${EJ_CHAOS_PERIOD:-$([ "$ROUNDS" -gt 1 ] && echo 10 || echo 6)}
SESSION=${EJ_CHAOS_SESSION_MS:-3000}
MARGIN=${EJ_CHAOS_MARGIN_MS:-4000}
NDAEMONS=3
SKIP=77
IFS=, read -r -a FAULT_LIST <<<"$FAULTS_ARG"
ENSEMBLE="" PARTITION="" LONG_ITEMS="" STARVE=""
for f in "${FAULT_LIST[@]}"; do
  case "$f" in
  kill9 | sigstop | zkrestart) ;;
  spawnerkill) LONG_ITEMS=1 ;;
  leaderkill) ENSEMBLE=1 ;;
  partition | spawnerpartition) PARTITION=1 ;;
  starved) PARTITION=1 STARVE=1 ;;
  *)
    echo "unknown fault '$f'" >&2
    exit 2
    ;;
  esac
done
if [ -n "$ENSEMBLE" ] && [[ " ${FAULT_LIST[*]} " == *" zkrestart "* ]]; then
  echo "zkrestart needs the standalone server, leaderkill the ensemble: run them apart" >&2
  exit 2
fi
if [ -n "$PARTITION" ] && [ -n "$LONG_ITEMS" ]; then
  echo "spawnerkill runs items longer than the period, partition faults shorter: run them apart" >&2
  exit 2
elif [ -n "$STARVE" ]; then
  # The item outlives the earliest takeover (about a session after the cut).
  ITEMS=${EJ_CHAOS_ITEMS:-1} ITEM_MIN=$((PERIOD - 1)) ITEM_MAX=$((PERIOD - 1))
elif [ -n "$PARTITION" ]; then
  ITEMS=${EJ_CHAOS_ITEMS:-1} ITEM_MIN=$((PERIOD - 2)) ITEM_MAX=$((PERIOD - 1))
elif [ -n "$LONG_ITEMS" ]; then
  # Each item outlives its period: a fire that comes while it runs is
  # folded into a misfire re-run that starts as soon as it ends.
  ITEMS=${EJ_CHAOS_ITEMS:-3} ITEM_MIN=$((PERIOD + 2)) ITEM_MAX=$((PERIOD + 4))
else
  ITEMS=${EJ_CHAOS_ITEMS:-6} ITEM_MIN=2 ITEM_MAX=$((PERIOD - 2))
fi

# Every address a partition run uses lives in namespaces it makes: the run
# starts again inside a namespace of its own (ZooKeeper, daemons 2..3 and
# the checker there, on its loopback and one end of a veth link), and
# daemon 1 gets a second namespace holding the link's other end.
if [ -n "$PARTITION" ] && [ -z "${EJ_CHAOS_NETNS:-}" ]; then
  outer=ejcz$$
  if ! ip netns add "$outer" 2>/dev/null; then
    echo "SKIP: network namespaces are not available here (need root and iproute2); the partition fault was not run"
    exit $SKIP
  fi
  ip netns exec "$outer" ip link set lo up
  EJ_CHAOS_NETNS=$outer ip netns exec "$outer" bash "$0" "$@"
  rc=$?
  ip netns del "$outer" 2>/dev/null
  exit $rc
fi

now_ms() { date +%s%3N; }
say() { echo "[$(date +%T.%3N)] $*"; }
sleep_ms() { [ "$1" -gt 0 ] && sleep "$(awk -v ms="$1" 'BEGIN { printf "%.3f", ms / 1000 }')"; return 0; }

# --------------------------------------------------------------- network
NS="" VH="" HOST_ADDR="" NS_ADDR=""
netns_setup() {
  NS=ejchaos$$
  VH=ejh$$
  local vn=ejn$$ oct=$(($$ % 250)) quad=$(($$ / 250 % 63 * 4))
  HOST_ADDR=10.201.$oct.$((quad + 1))
  NS_ADDR=10.201.$oct.$((quad + 2))
  ip netns add "$NS" 2>/dev/null || {
    NS=""
    return 1
  }
  ip link add "$VH" type veth peer name "$vn" &&
    ip link set "$vn" netns "$NS" &&
    ip addr add "$HOST_ADDR/30" dev "$VH" &&
    ip link set "$VH" up &&
    ip netns exec "$NS" ip addr add "$NS_ADDR/30" dev "$vn" &&
    ip netns exec "$NS" ip link set "$vn" up &&
    ip netns exec "$NS" ip link set lo up || return 1
  NS_LINK=$vn
}
netns_cleanup() {
  [ -n "$VH" ] && ip link del "$VH" 2>/dev/null
  [ -n "$NS" ] && ip netns del "$NS" 2>/dev/null
  return 0
}

if [ -n "$PARTITION" ]; then
  if ! netns_setup; then
    netns_cleanup
    echo "SKIP: network namespaces or veth links are not available here (need root and iproute2); the partition fault was not run"
    exit $SKIP
  fi
fi

# The starved fault's cpu group (cgroup v1), made once: daemon 1 starts in
# it, unlimited until the fault sets the quota and starts the busy loop.
CG="" CGMNT="" BUSY_PID=""
if [ -n "$STARVE" ]; then
  # `ip netns exec` mounts a sysfs of its own, without the host's cgroups:
  # the cpu hierarchy is mounted again (the same one) in a directory here.
  CGROOT=/sys/fs/cgroup/cpu CGMNT=""
  if [ ! -e "$CGROOT/cgroup.procs" ]; then
    CGMNT=$(mktemp -d "${TMPDIR:-/tmp}/ejchaos-cg-XXXXXX")
    mount -t cgroup -o cpu cgroup "$CGMNT" 2>/dev/null && CGROOT=$CGMNT
  fi
  CG=$CGROOT/ejchaos$$
  if ! mkdir "$CG" 2>/dev/null || ! echo 1000000 >"$CG/cpu.cfs_period_us"; then
    rmdir "$CG" 2>/dev/null
    [ -n "$CGMNT" ] && { umount "$CGMNT" 2>/dev/null; rmdir "$CGMNT"; }
    netns_cleanup
    echo "SKIP: no cgroup v1 cpu controller at /sys/fs/cgroup/cpu (need root); the starved fault was not run"
    exit $SKIP
  fi
fi
cg_cleanup() {
  [ -n "$BUSY_PID" ] && { kill -KILL "$BUSY_PID" 2>/dev/null; wait "$BUSY_PID" 2>/dev/null; }
  BUSY_PID=""
  [ -z "$CG" ] && return 0
  local p
  for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do echo "$p" >"$CGROOT/cgroup.procs" 2>/dev/null; done
  rmdir "$CG" 2>/dev/null
  [ -n "$CGMNT" ] && { umount "$CGMNT" 2>/dev/null; rmdir "$CGMNT" 2>/dev/null; }
  return 0
}

source "$SRC/tests/support/zkfixture.sh"
WATCH_PID=""
chaos_cleanup() {
  local p
  for p in "${DPID[@]}"; do kill -KILL "$p" 2>/dev/null; done
  [ -n "$WATCH_PID" ] && { kill -KILL "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null; }
  cg_cleanup
  netns_cleanup
  zkf_cleanup
}
trap chaos_cleanup EXIT
DPID=()

if [ -n "$ENSEMBLE" ]; then
  # A quorum is enough to start; the third server is waited for before
  # the first fault.
  zkf_ensemble_start 3 2 || exit 1
else
  ZKF_ADDR=${HOST_ADDR:-127.0.0.1}
  zkf_start || exit 1
fi
D=$ZKF_DIR/chaos
mkdir -p "$D"
LOG=$D/exec.log GONE=$D/gone.log FAULTS=$D/faults.log
: >"$LOG"
: >"$FAULTS"
say "ZooKeeper at $ZKF_CONNECT; work dir $D"

cat >"$D/chaos.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: chaos
  sessionTimeoutMilliseconds: $SESSION
  connectionTimeoutMilliseconds: 15000
jobs:
  chaosJob:
    elasticJobType: SCRIPT
    cron: "0/$PERIOD * * * * ?"
    shardingTotalCount: $ITEMS
    failover: true
    monitorExecution: true
    overwrite: true
$([ -n "${EJ_CHAOS_RETRY:-}" ] && echo "    retry: {maxAttempts: 3, initialBackoffSeconds: 1}")
    props:
      script.command.line: $HERE/item.sh $LOG $ITEM_MIN $ITEM_MAX ${EJ_CHAOS_RETRY:-}
EOF

# Daemon I (1..3) has IP 127.0.0.(90-I); daemon 1 runs in the namespace
# when there is one. The highest IP sorts first, so daemon 1, the target of
# every fault, owns item 0 (and the only item of a partition run).
ip_of() { echo "127.0.0.$((90 - $1))"; }
start_daemon() {
  local i=$1
  if [ "$i" = 1 ] && [ -n "$NS" ] && [ -n "$CG" ]; then
    bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" ip netns exec "$NS" env EJOB_IP="$(ip_of "$i")" \
      setpriv --pdeathsig KILL "$E" run -c "$D/chaos.yaml" --state-dir "$D/state$i" --drain-timeout-ms 1000 2>>"$D/daemon$i.log" &
  elif [ "$i" = 1 ] && [ -n "$NS" ]; then
    ip netns exec "$NS" env EJOB_IP="$(ip_of "$i")" setpriv --pdeathsig KILL \
      "$E" run -c "$D/chaos.yaml" --state-dir "$D/state$i" --drain-timeout-ms 1000 2>>"$D/daemon$i.log" &
  else
    EJOB_IP=$(ip_of "$i") setpriv --pdeathsig KILL \
      "$E" run -c "$D/chaos.yaml" --state-dir "$D/state$i" --drain-timeout-ms 1000 2>>"$D/daemon$i.log" &
  fi
  DPID[$i]=$!
}
inst_of() { echo "$(ip_of "$1")@-@${DPID[$1]}"; }

# Waits until the next fire's items have started (with ~1 s to spare
# before the shortest of them ends), then returns.
wait_items_running() {
  local t=$(now_ms)
  local next=$(((t / 1000 / PERIOD + 1) * PERIOD * 1000))
  sleep_ms $((next - t + 700))
}
# Daemon I has an item running now.
has_running() {
  python3 - "$LOG" "$(inst_of "$1")" <<'PY'
import sys
runs = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) >= 7 and p[3] == sys.argv[2]:
        runs[p[4]] = p[0] == "START"
sys.exit(0 if any(runs.values()) else 1)
PY
}

# The zygote of daemon I: the parent of one of its running items.
zygote_of() {
  local pid pp
  pid=$(python3 - "$LOG" "$(inst_of "$1")" <<'PY'
import sys
runs = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) >= 7 and p[3] == sys.argv[2]:
        runs[p[4]] = p[0] == "START"
print(" ".join(pid for pid, on in runs.items() if on))
PY
)
  for p in $pid; do
    pp=$(awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$p/stat" 2>/dev/null)
    [ -n "$pp" ] && [ "$pp" != 1 ] && [ "$pp" != "${DPID[$1]}" ] && { echo "$pp"; return 0; }
  done
  return 1
}

for i in $(seq 1 $NDAEMONS); do start_daemon "$i"; done
python3 "$HERE/chaos_check.py" watch "$LOG" "$GONE" "$D/stop-watch" &
WATCH_PID=$!
say "daemons: $(for i in $(seq 1 $NDAEMONS); do printf '%s ' "$(inst_of "$i")"; done)"

# Warm-up: every daemon that has an item has run one.
WARM=$((ITEMS < NDAEMONS ? ITEMS : NDAEMONS))
warm_end=$((SECONDS + 90))
while [ $SECONDS -lt $warm_end ]; do
  n=0
  for i in $(seq 1 $NDAEMONS); do grep -q "START chaosJob [0-9]* $(inst_of "$i") " "$LOG" && n=$((n + 1)); done
  [ $n -ge $WARM ] && grep -q "START chaosJob [0-9]* $(inst_of 1) " "$LOG" && break
  sleep 0.5
done
if [ $n -lt $WARM ] || ! grep -q "START chaosJob [0-9]* $(inst_of 1) " "$LOG"; then
  echo "FAIL: only $n of $NDAEMONS daemons (daemon 1 among them: target) ran an item within 90 s" >&2
  tail -n 5 "$D"/daemon*.log >&2
  [ -n "${EJ_CHAOS_KEEP:-}" ] && { ZKF_KEEP_DATA=1; echo "kept $ZKF_DIR" >&2; }
  exit 1
fi
FROM=$(now_ms)
say "warm: all daemons run items; checking fires from $FROM"

fault() { # KIND INSTANCE START END
  echo "FAULT $1 $2 $3 $4" >>"$FAULTS"
  say "fault $1 on $2: $(($4 - $3)) ms"
}

# One fault; daemon 1 (or the ZooKeeper leader) is the target.
inject() {
  local FAULT=$1 target=1 t0 t1 inst
  wait_items_running
  for _ in 1 2 3; do has_running $target && break; wait_items_running; done
  inst=$(inst_of $target)
  case "$FAULT" in
  kill9)
    t0=$(now_ms)
    kill -KILL "${DPID[$target]}"
    wait "${DPID[$target]}" 2>/dev/null
    fault kill9 "$inst" "$t0" "$t0"
    t1=$t0
    sleep_ms $((SESSION + 1000))
    start_daemon $target
    say "restarted daemon $target as $(inst_of $target)"
    ;;
  sigstop)
    t0=$(now_ms)
    kill -STOP "${DPID[$target]}"
    sleep_ms $((SESSION + 3000))
    kill -CONT "${DPID[$target]}"
    t1=$(now_ms)
    fault sigstop "$inst" "$t0" "$t1"
    ;;
  zkrestart)
    t0=$(now_ms)
    zkf_stop
    sleep 4
    zkf_restart || return 1
    t1=$(now_ms)
    fault zkrestart zookeeper "$t0" "$t1"
    ;;
  leaderkill)
    local l
    zkf_ensemble_wait 3 || return 1
    l=$(zkf_ensemble_leader) || { echo "FAIL: no ensemble leader" >&2; return 1; }
    t0=$(now_ms)
    zkf_ensemble_kill "$l"
    zkf_ensemble_wait 2 || return 1
    t1=$(now_ms)
    say "ensemble re-elected in $((t1 - t0)) ms"
    sleep 4
    zkf_ensemble_restart "$l"
    zkf_ensemble_wait 3 || return 1
    t1=$(now_ms)
    fault leaderkill "zk$l" "$t0" "$t1"
    ;;
  spawnerkill | spawnerpartition)
    local z
    z=$(zygote_of $target) || { echo "FAIL: no zygote found for daemon $target" >&2; return 1; }
    t0=$(now_ms)
    kill -KILL "$z"
    say "killed daemon $target's zygote (pid $z)"
    t1=$t0
    if [ "$FAULT" = spawnerpartition ]; then
      sleep 1
      ip netns exec "$NS" ip link set "$NS_LINK" down
      sleep 10
      ip netns exec "$NS" ip link set "$NS_LINK" up
      t1=$(now_ms)
    fi
    fault "$FAULT" "$inst" "$t0" "$t1"
    ;;
  starved)
    echo 50000 >"$CG/cpu.cfs_quota_us"
    bash -c 'echo $$ >"$0/cgroup.procs" && while :; do :; done' "$CG" &
    BUSY_PID=$!
    t0=$(now_ms)
    ip netns exec "$NS" ip link set "$NS_LINK" down
    sleep 10
    ip netns exec "$NS" ip link set "$NS_LINK" up
    kill -KILL "$BUSY_PID" 2>/dev/null
    wait "$BUSY_PID" 2>/dev/null
    BUSY_PID=""
    echo -1 >"$CG/cpu.cfs_quota_us"
    t1=$(now_ms)
    fault starved "$inst" "$t0" "$t1"
    ;;
  partition)
    t0=$(now_ms)
    ip netns exec "$NS" ip link set "$NS_LINK" down
    sleep 10
    ip netns exec "$NS" ip link set "$NS_LINK" up
    t1=$(now_ms)
    fault partition "$inst" "$t0" "$t1"
    ;;
  esac
  # Past the detection window, then one whole fire that must run in full.
  local clean=$(((t1 + SESSION + MARGIN + PERIOD * 1000 - 1) / (PERIOD * 1000) * PERIOD * 1000))
  sleep_ms $((clean + PERIOD * 1000 + 300 - $(now_ms)))
}

for r in $(seq 1 "$ROUNDS"); do
  for f in "${FAULT_LIST[@]}"; do
    say "round $r of $ROUNDS: $f"
    inject "$f" || { echo "FAIL: round $r could not inject $f" >&2; exit 1; }
  done
done
TO=$(now_ms)

# Stop the daemons (SIGTERM: items stopped after the 1 s drain timeout),
# then let the watcher see the last pids go.
for i in $(seq 1 $NDAEMONS); do kill -TERM "${DPID[$i]}" 2>/dev/null; done
for i in $(seq 1 $NDAEMONS); do wait "${DPID[$i]}" 2>/dev/null; done
DPID=()
sleep 2
touch "$D/stop-watch"
wait "$WATCH_PID"
WATCH_PID=""
python3 "$HERE/chaos_check.py" check "$LOG" "$GONE" "$FAULTS" --from "$FROM" --to "$TO" \
  --period "$PERIOD" --items $ITEMS --session-ms "$SESSION" --margin-ms "$MARGIN" \
  --busy-gap-ms $([ -n "${EJ_CHAOS_RETRY:-}" ] && echo 3000 || echo 1000)
rc=$?
if [ -n "${EJ_CHAOS_RETRY:-}" ]; then
  say "retries: $(cat "$D"/daemon*.log | grep -c ': item [0-9]* attempt [0-9]* after ') attempts run," \
    "$(cat "$D"/daemon*.log | grep -c ': item [0-9]* attempt [0-9]* not run: ') abandoned"
fi
if [ $rc -ne 0 ]; then
  echo "FAIL: chaos $FAULTS_ARG: invariants violated; daemon logs:" >&2
  grep -h -E "warn|error" "$D"/daemon*.log | tail -40 >&2
  [ -n "${EJ_CHAOS_KEEP:-}" ] && { ZKF_KEEP_DATA=1; echo "kept $ZKF_DIR" >&2; }
fi
exit $rc
