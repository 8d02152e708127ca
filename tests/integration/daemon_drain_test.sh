#!/bin/bash
# `ejob run` and SIGTERM: an item that is running when the signal comes
# finishes, nothing new starts, the daemon leaves ZooKeeper (its instance
# node is gone) and exits 0; with a short --drain-timeout-ms a long item is
# stopped and the daemon still exits 0 in bounded time. Also: the JSON log
# format, and SIGINT.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"
now_ms() { date +%s%3N; }
export EJOB_REGISTRY="$ZKF_CONNECT/drain"

D=$ZKF_DIR/t
mkdir -p "$D"
# Its own state directory (history.db, an embedded registry), never the
# user's default one.
export EJOB_STATE_DIR=$D/state
cat >"$D/item.sh" <<'EOF'
#!/bin/sh
# item.sh MARKS SECONDS CONTEXT: "start ITEM", sleep, "end ITEM".
item=$(printf '%s' "$3" | sed -n 's/.*"shardingItem":\([0-9]*\).*/\1/p')
echo "start $item $(date +%s%3N)" >>"$1"
sleep "$2"
echo "end $item $(date +%s%3N)" >>"$1"
EOF
chmod +x "$D/item.sh"
write_yaml() { # FILE JOB SECONDS
  cat >"$1" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: drain
  sessionTimeoutMilliseconds: 4000
jobs:
  $2:
    elasticJobType: SCRIPT
    cron: "0/5 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: $D/item.sh $D/$2.marks $3
EOF
}

# ---------------------------------------------------------- drain on SIGTERM
write_yaml "$D/slow.yaml" slowJob 3
EJOB_IP=127.0.0.41 setpriv --pdeathsig KILL "$E" run -c "$D/slow.yaml" --log-format json 2>"$D/slow.log" &
P=$!; zkf_track $P
wait_for 30 "daemon started" logged "$D/slow.log" '"msg":"running 1 job'
wait_for 30 "an item started" logged "$D/slowJob.marks" "start 0"
[ -n "$(zkf_cli ls /drain/slowJob/instances | grep '127.0.0.41@-@')" ] && pass "instance node exists" || fail "no instance node"
T0=$(now_ms)
kill -TERM $P
wait $P; RC=$?
T1=$(now_ms)
[ $RC -eq 0 ] && pass "SIGTERM while an item runs: exit 0" || fail "exit $RC"
grep -q "end 0" "$D/slowJob.marks" && pass "the running item finished" || fail "the item did not finish: $(cat "$D/slowJob.marks")"
STARTS=$(awk -v t="$T0" '$1 == "start" && $3 > t' "$D/slowJob.marks" | wc -l)
[ "$STARTS" -eq 0 ] && pass "nothing started after SIGTERM" || fail "$STARTS item(s) started after SIGTERM"
[ $((T1 - T0)) -lt 10000 ] && pass "stopped in $((T1 - T0)) ms" || fail "stopping took $((T1 - T0)) ms"
[ -z "$(zkf_cli ls /drain/slowJob/instances | grep '127.0.0.41@-@')" ] && pass "instance node gone" || fail "instance node still there"
# Every stderr line is one JSON object.
python3 - "$D/slow.log" <<'EOF' && pass "--log-format json: every line is JSON with ts/level/module/msg" || fail "json log lines"
import json, sys
n = 0
for line in open(sys.argv[1]):
    o = json.loads(line)
    assert {"ts", "level", "module", "msg"} <= set(o), o
    n += 1
assert n > 3
EOF
grep -q '"module":"event"' "$D/slow.log" && pass "events are logged one per line" || fail "no event lines"

# ------------------------------------- fire times during the drain: not lost
# A job firing every second beside a 3 s item that drains: the fire times
# that come while the daemon stops are not fires not run (the instance is
# leaving), so nothing warns about them.
cat >"$D/tick.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: drain
  sessionTimeoutMilliseconds: 4000
jobs:
  tickSlow:
    elasticJobType: SCRIPT
    cron: "0/5 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: $D/item.sh $D/tickSlow.marks 3
  tick:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: $D/item.sh $D/tick.marks 0
EOF
EJOB_IP=127.0.0.43 setpriv --pdeathsig KILL "$E" run -c "$D/tick.yaml" 2>"$D/tick.log" &
P=$!; zkf_track $P
wait_for 30 "the slow item started" logged "$D/tickSlow.marks" "start 0"
kill -TERM $P
wait $P; RC=$?
[ $RC -eq 0 ] && pass "SIGTERM during a 3 s item beside a 1 s job: exit 0" || fail "exit $RC"
DRAIN=$(sed -n '/SIGTERM: stopping/,$p' "$D/tick.log")
grep -q "end 0" "$D/tickSlow.marks" && pass "the slow item drained" || fail "the slow item did not finish"
NOTRUN=$(grep -c "fire not run" <<<"$DRAIN")
[ "$NOTRUN" -eq 0 ] && pass "no fire reported not run for the fire times of the drain" \
  || fail "$NOTRUN 'fire not run' line(s) while draining: $(grep -m2 'fire not run' <<<"$DRAIN")"

# ------------------------------------------------------ drain timeout bound
write_yaml "$D/stuck.yaml" stuckJob 60
EJOB_IP=127.0.0.42 setpriv --pdeathsig KILL "$E" run -c "$D/stuck.yaml" --drain-timeout-ms 1000 2>"$D/stuck.log" &
P=$!; zkf_track $P
wait_for 30 "stuck item started" logged "$D/stuckJob.marks" "start 0"
T0=$(now_ms)
kill -INT $P
wait $P; RC=$?
T1=$(now_ms)
[ $RC -eq 0 ] && pass "SIGINT with a stuck item: exit 0" || fail "exit $RC"
[ $((T1 - T0)) -lt 15000 ] && pass "bounded by the drain timeout ($((T1 - T0)) ms)" || fail "took $((T1 - T0)) ms"
grep -q "end 0" "$D/stuckJob.marks" && fail "the 60 s item claims to have finished" || pass "the stuck item was stopped"
[ -z "$(zkf_cli ls /drain/stuckJob/instances | grep '127.0.0.42@-@')" ] && pass "instance node gone" || fail "instance node still there"
grep -q "SIGINT: stopping" "$D/stuck.log" && pass "SIGINT logged" || fail "SIGINT not logged"

echo "$FAILS failure(s)"
exit $((FAILS > 0))
