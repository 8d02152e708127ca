#!/bin/bash
# Live output: `ejob logs JOB -f` and `ejob logs ID -f` print a running
# script's lines while it runs (each within 1 s of the script writing it,
# by the times the script prints), exit when the run ends, and what they
# printed is the run's whole output. A real ZooKeeper and daemon; the
# follower reads only the SQLite history store, as another host would.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D/state"
export EJOB_STATE_DIR=$D/state
DPID=""
FPID=""
cleanup() {
  [ -n "$FPID" ] && { kill -KILL "$FPID" 2>/dev/null; wait "$FPID" 2>/dev/null; }
  [ -n "$DPID" ] && { kill -KILL "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }
  zkf_cleanup
}
trap cleanup EXIT
# 25 lines, one every 200 ms, each with the epoch ms it was written at; a
# line on stderr too.
cat >"$D/ticker.sh" <<'SH'
i=0
while [ $i -lt 25 ]; do
  echo "line $i $(date +%s%3N)"
  i=$((i + 1))
  sleep 0.2
done
echo "done on stderr" >&2
SH
NS=logs$$
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: $NS
tracing:
  type: SQLITE
  url: $D/history.db
jobs:
  tickJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/sh $D/ticker.sh
YAML
"$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
DPID=$!
wait_for 60 "the daemon is up" logged "$D/daemon.log" "history: "
wait_for 30 "the history store exists" test -s "$D/history.db"
STORE=(--store "sqlite:$D/history.db")

# Stamps each line it reads with the epoch ms it arrived at.
stamp() { while IFS= read -r l; do echo "$(date +%s%3N) $l"; done; }

# Checks a follower's stamped output $1 (exit status $2): every line, in
# order, each within 1 s of being written, the first before the run ended.
check_follow() {
  local out=$1 rc=$2 what=$3
  [ "$rc" = 0 ] && pass "$what: exit 0 when the run ended" || fail "$what: exit $rc"
  local n
  n=$(grep -c " line " "$out")
  [ "$n" = 25 ] && pass "$what: all 25 lines" || fail "$what: $n lines: $(head -3 "$out")"
  awk '{ if ($3 != NR - 1) bad = 1 } END { exit bad }' "$out" &&
    pass "$what: in order" || fail "$what: out of order: $(awk '{print $3}' "$out" | tr '\n' ' ')"
  local worst
  worst=$(awk '{ d = $1 - $4; if (d > m) m = d } END { print m + 0 }' "$out")
  [ "$worst" -lt 1000 ] && pass "$what: each line printed within $worst ms of being written" ||
    fail "$what: a line came $worst ms after it was written: $(awk '{print $1 - $4}' "$out" | tr '\n' ' ')"
  local first_seen last_written
  first_seen=$(awk 'NR == 1 {print $1}' "$out")
  last_written=$(awk 'END {print $4}' "$out")
  [ "$first_seen" -lt "$last_written" ] &&
    pass "$what: lines shown while the item ran ($((last_written - first_seen)) ms before its last line)" ||
    fail "$what: the first line came only after the run's last one"
}

# 1. By job: started before the run; it waits for the run and follows it.
( "$E" logs tickJob -f "${STORE[@]}" 2>"$D/follow1.err" | stamp >"$D/follow1.out"; exit "${PIPESTATUS[0]}" ) &
FPID=$!
sleep 0.5
"$E" trigger tickJob -r "$ZKF_CONNECT" -n "$NS" >/dev/null || fail "trigger"
end=$(($(date +%s) + 30))
while kill -0 $FPID 2>/dev/null && [ "$(date +%s)" -lt $end ]; do sleep 0.1; done
kill -0 $FPID 2>/dev/null && fail "logs -f still running 30 s later"
wait $FPID
rc=$?
FPID=""
check_follow "$D/follow1.out" $rc "logs tickJob -f"
grep -q "done on stderr" "$D/follow1.err" && pass "the item's stderr on stderr" ||
  fail "no stderr: $(cat "$D/follow1.err")"
ID=$("$E" history tickJob --json "${STORE[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
"$E" logs "$ID" "${STORE[@]}" >"$D/whole.out" 2>/dev/null
cut -d' ' -f2- "$D/follow1.out" | cmp -s - "$D/whole.out" &&
  pass "what -f printed is the stored output ($(wc -c <"$D/whole.out") bytes)" ||
  fail "-f printed other bytes than the stored output"
"$E" logs "${ID:0:8}" "${STORE[@]}" | cmp -s - "$D/whole.out" && pass "logs ID-PREFIX" ||
  fail "logs ${ID:0:8} differs"

# 2. By id, once the run has started.
"$E" trigger tickJob -r "$ZKF_CONNECT" -n "$NS" >/dev/null || fail "trigger"
running_id() {
  "$E" history tickJob --json "${STORE[@]}" 2>/dev/null |
    python3 -c 'import json,sys; r=[x for x in json.load(sys.stdin) if not x["completed"]]; print(r[0]["id"] if r else "")'
}
has_running() { [ -n "$(running_id)" ]; }
wait_for 20 "the second run started" has_running
ID2=$(running_id)
T0=$(date +%s%3N)
( "$E" logs "$ID2" -f "${STORE[@]}" 2>/dev/null | stamp >"$D/follow2.out"; exit "${PIPESTATUS[0]}" ) &
FPID=$!
end=$(($(date +%s) + 30))
while kill -0 $FPID 2>/dev/null && [ "$(date +%s)" -lt $end ]; do sleep 0.1; done
kill -0 $FPID 2>/dev/null && fail "logs ID -f still running 30 s later"
wait $FPID
rc=$?
FPID=""
[ "$rc" = 0 ] && pass "logs ID -f: exit 0 when the run ended" || fail "logs ID -f: exit $rc"
n=$(grep -c " line " "$D/follow2.out")
[ "$n" = 25 ] && pass "logs ID -f: all 25 lines" || fail "logs ID -f: $n lines"
worst=$(awk -v t0="$T0" '$4 > t0 { d = $1 - $4; if (d > m) m = d } END { print m + 0 }' "$D/follow2.out")
[ "$worst" -lt 1000 ] && pass "logs ID -f: each line written after it started within $worst ms" ||
  fail "logs ID -f: a line $worst ms late"

"$E" logs nosuchJob "${STORE[@]}" 2>"$D/none.err"
[ $? = 1 ] && grep -q "no run of nosuchJob" "$D/none.err" && pass "a job without runs: exit 1, said" ||
  fail "a job without runs: $(cat "$D/none.err")"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
