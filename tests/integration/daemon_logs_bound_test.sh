#!/bin/bash
# Live output stays bounded: a script writes 40 MB on stdout and 8 MB on
# stderr, then waits 3 s. While it waits, the store holds exactly the cap
# (tracing.outputMaxBytes 65536) of each stream in live pieces, `ejob logs`
# prints those bytes, and the daemon's peak memory has grown by far less
# than the output; at its end the run's detail holds the cap, marked cut,
# and no piece is left.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D/state"
export EJOB_STATE_DIR=$D/state
DPID=""
cleanup() {
  [ -n "$DPID" ] && { kill -KILL "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }
  zkf_cleanup
}
trap cleanup EXIT
cat >"$D/flood.sh" <<'SH'
head -c 40000000 /dev/zero | tr '\0' o
head -c 8000000 /dev/zero | tr '\0' e >&2
touch "$1.flooded"
sleep 3
SH
NS=bound$$
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: $NS
tracing:
  type: SQLITE
  url: $D/history.db
  outputMaxBytes: 65536
jobs:
  floodJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/sh $D/flood.sh $D/mark
YAML
"$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
DPID=$!
wait_for 60 "the daemon is up" logged "$D/daemon.log" "history: "
wait_for 30 "the history store exists" test -s "$D/history.db"
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$DPID/status"; }
before=$(hwm)
"$E" trigger floodJob -r "$ZKF_CONNECT" -n "$NS" >/dev/null || fail "trigger"
wait_for 60 "the script wrote its 48 MB" test -e "$D/mark.flooded"
sleep 1 # the last piece: at most 250 ms, then the store's writer
q() { sqlite3 "$D/history.db" "$1"; }
pieces=$(q "SELECT stream || ':' || SUM(LENGTH(data)) FROM EJOB_EXECUTION_OUTPUT GROUP BY stream ORDER BY stream" | tr '\n' ' ')
[ "$pieces" = "1:65536 2:65536 " ] && pass "while it runs the store holds the cap of each stream ($pieces)" ||
  fail "live pieces while running: \"$pieces\" (want 1:65536 2:65536)"
running=$(q "SELECT COUNT(*) FROM JOB_EXECUTION_LOG WHERE job_name = 'floodJob' AND complete_time IS NULL")
[ "$running" = 1 ] && pass "the run is still going" || fail "the run is not running any more ($running)"
n=$("$E" logs floodJob --store "sqlite:$D/history.db" 2>/dev/null | wc -c)
[ "$n" = 65536 ] && pass "ejob logs prints the cap while it runs ($n bytes)" || fail "ejob logs printed $n bytes"
after=$(hwm)
grow=$(((after - before) / 1024))
[ "$grow" -lt 16 ] && pass "the daemon's peak memory grew by $grow MB for 48 MB of output" ||
  fail "the daemon's peak memory grew by $grow MB ($before kB -> $after kB)"
has_ended() { [ "$(q "SELECT COUNT(*) FROM JOB_EXECUTION_LOG WHERE job_name = 'floodJob' AND complete_time IS NOT NULL")" = 1 ]; }
wait_for 30 "the run ended" has_ended
sleep 0.5
d=$(q "SELECT LENGTH(stdout) || ' ' || stdout_truncated || ' ' || LENGTH(stderr) || ' ' || stderr_truncated FROM EJOB_EXECUTION_DETAIL")
[ "$d" = "65536 1 65536 1" ] && pass "the detail holds the cap of each stream, marked cut ($d)" || fail "detail: $d"
left=$(q "SELECT COUNT(*) FROM EJOB_EXECUTION_OUTPUT")
[ "$left" = 0 ] && pass "no live piece left after the end" || fail "$left live pieces left after the end"
n=$("$E" logs floodJob --store "sqlite:$D/history.db" 2>/dev/null | wc -c)
[ "$n" = 65536 ] && pass "ejob logs prints the stored cap after the end" || fail "ejob logs printed $n bytes after the end"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
