#!/bin/bash
# The fire ledger (EJOB_FIRE_LEDGER) written by real `ejob run` daemons
# against a real ZooKeeper and a SQLite history file, read by `ejob fires`:
#   - every fire time of a 2-item job shows who ran each item;
#   - a paused trigger (a daemon stopped with SIGSTOP, so its ZooKeeper
#     connection is suspended) reports its fire times under a reason;
#   - every daemon stopped for at least 3 fire times, one started again:
#     exactly those fire times show as "missed", once, also after a second
#     daemon starts (the scan records nothing twice);
#   - an owner killed with -9: the fire times due before its session
#     expired are caught up once by the items' next owner (CATCHUP rows),
#     none left without a row;
#   - --gaps, --item, --json and the usage errors.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

D=$ZKF_DIR
DB=$D/history.db
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: ledger
  sessionTimeoutMilliseconds: 3000
tracing:
  type: SQLITE
  url: $DB
jobs:
  ledgerJob:
    elasticJobType: SCRIPT
    cron: "0/2 * * * * ?"
    shardingTotalCount: 2
    overwrite: true
    props:
      script.command.line: /bin/true
YAML
start_daemon() { # IP: sets PID_<last octet>
  EJOB_IP=$1 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" >>"$D/daemon-$1.log" 2>&1 &
  local pid=$!
  zkf_track "$pid"
  eval "PID_${1##*.}=$pid"
}
stop_daemon() { kill -TERM "$1"; wait "$1" 2>/dev/null; }
fires() { "$E" fires --store "sqlite:$DB" "$@"; }
json_eval() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# ---------------------------------------------------------------- runs
start_daemon 127.0.0.81
ran_rows() { [ "$(fires ledgerJob --json 2>/dev/null | json_eval 'sum(1 for r in d if r["ran"] and r["kind"] == "CRON")')" -ge "$1" ]; }
wait_for 60 "the daemon's runs reach the ledger" ran_rows 6
J=$(fires ledgerJob --json)
got=$(json_eval '{(r["item"], r["instance"].split("@-@")[0], r["result"]) for r in d if r["ran"]} == {(0, "127.0.0.81", "succeeded"), (1, "127.0.0.81", "succeeded")} or sorted({(r["item"], r["instance"].split("@-@")[0], r["result"]) for r in d if r["ran"]})' <<<"$J")
[ "$got" = True ] && pass "both items ran on .81 and succeeded" || fail "ran rows: $got"
got=$(json_eval 'all(r["fireTimeMs"] % 2000 == 0 for r in d if r["kind"] == "CRON")' <<<"$J")
[ "$got" = True ] && pass "ran rows carry the cron fire time (even seconds)" || fail "fire times: $J"
TABLE=$(fires ledgerJob)
grep -q '^FIRE  *ITEM 0  *ITEM 1' <<<"$TABLE" && grep -Eq '^[0-9-]+ [0-9:]+  +127\.0\.0\.81  +127\.0\.0\.81' <<<"$TABLE" &&
  pass "the table: a column per item, the instance in each cell" || fail "table: $TABLE"

# ---------------------------------------------------------------- all down, one back
stop_daemon "$PID_81"
DOWN_MS=$(date +%s%3N)
sleep 7.5   # 3 or 4 fire times of the 2 s cron with no instance alive
UP_MS=$(date +%s%3N)
start_daemon 127.0.0.82
missed() { fires ledgerJob --json 2>/dev/null | json_eval '[r["fireTimeMs"] for r in d if r["reason"] == "missed"]'; }
has_missed() { [ "$(missed)" != "[]" ]; }
wait_for 60 "fire times missed while every daemon was down are recorded" has_missed
sleep 2.5   # and the restarted daemon's own first fires
M=$(missed)
# Fire times strictly between the last one the stopped daemon handled and
# the restart: every one of them missed.
want=$(python3 -c "
import json
down, up = $DOWN_MS, $UP_MS
rows = json.loads('''$(fires ledgerJob --json)''')
last = max(r['fireTimeMs'] for r in rows if r['reason'] != 'missed' and r['fireTimeMs'] <= down + 2000)
print([t for t in range(last + 2000, up, 2000) if t < up - 200])")
python3 -c "
m, w = $M, $want
import sys
sys.exit(0 if len(w) >= 3 and set(w) <= set(m) and all(t in w or t >= $UP_MS - 2000 for t in m) else 1)" &&
  pass "the fire times of the outage are missed ($(python3 -c "print(len($M))") of them)" || fail "missed $M, wanted $want"
python3 -c "m = $M; import sys; sys.exit(0 if len(m) == len(set(m)) else 1)" && pass "each missed once" || fail "duplicates: $M"
TABLE=$(fires ledgerJob)
grep -q -- '-a  missed: no live instance owned the item' <<<"$TABLE" && pass "the reason is spelled out under the table" || fail "legend: $TABLE"
GAPS=$(fires ledgerJob --gaps)
# Every fire line --gaps shows has a cell that did not run (a reason code
# or "?"); the outage's lines are among them.
[ "$(grep -c -- ' -a ' <<<"$GAPS")" -ge 3 ] && ! grep -E '^[0-9]{4}-' <<<"$GAPS" | grep -Evq -- ' (-[a-z]|\?)( |$)' &&
  pass "--gaps: only the fire times that did not run" || fail "--gaps: $GAPS"

echo "$GAPS" | sed "s/^/  /"
# A second daemon starting now records no missed fire times again.
start_daemon 127.0.0.83
sleep 5
[ "$(missed)" = "$M" ] && pass "a second start records nothing twice" || fail "missed after a second start: $(missed), was $M"

# ---------------------------------------------------------------- a paused trigger
# SIGSTOP .83 long enough for its session to be suspended, not expired:
# the fire times it was paused through are reported with a reason.
kill -STOP "$PID_83"; sleep 2.2; kill -CONT "$PID_83"
reasons() { fires ledgerJob --json --since 5m 2>/dev/null | json_eval 'sorted({r["reason"] for r in d if r["reason"] and r["reason"] != "missed"})'; }
has_reason() { [ "$(reasons)" != "[]" ]; }
wait_for 30 "a paused or late instance's fire times are recorded with their reason" has_reason
echo "  reasons: $(reasons)"

# ---------------------------------------------------------------- an owner killed
# kill -9 of .83: the fire times due before its session expires (3 s, the
# cron every 2 s: at least one) are caught up by the items' next owner, one
# MISFIRE run recorded at each of them as CATCHUP; no fire time of either
# item is left without a row.
sleep 3   # both instances own an item again
KILL_MS=$(date +%s%3N)
kill -KILL "$PID_83"; wait "$PID_83" 2>/dev/null
sleep 10
NOW_MS=$(date +%s%3N)
J=$(fires ledgerJob --json --since 2m)
got=$(python3 -c "
import json, sys
rows = json.loads(sys.stdin.read())
cron = sorted({r['fireTimeMs'] for r in rows if r['kind'] in ('CRON', 'CATCHUP') and $KILL_MS < r['fireTimeMs'] < $NOW_MS - 3000})
holes = [(t, i) for t in cron for i in (0, 1)
         if not any(r['fireTimeMs'] == t and r['item'] in (i, -1) for r in rows)]
caught = [(r['fireTimeMs'], r['item']) for r in rows if r['kind'] == 'CATCHUP' and r['ran']]
print('ok' if cron and not holes and caught else 'fire times %s, without a row %s, caught up %s' % (cron, holes, caught))
" <<<"$J")
[ "$got" = ok ] && pass "after a kill -9 every fire time of every item has a row; the lost ones caught up" || fail "after the kill: $got"
TABLE=$(fires ledgerJob --since 30s)
grep -q '\^' <<<"$TABLE" && grep -q -- '^  ^   caught up' <<<"$TABLE" && pass "the table marks the caught-up cells (^) and says why" || fail "table: $TABLE"

# ---------------------------------------------------------------- filters and errors
got=$(fires ledgerJob --item 1 --json | json_eval '{r["item"] for r in d} <= {1, -1}')
[ "$got" = True ] && pass "--item 1: item 1 and job-wide rows" || fail "--item: $got"
out=$(fires ledgerJob --since 'not-a-time' 2>&1); rc=$?
[ $rc = 2 ] && grep -q -- '--since: "not-a-time" is neither' <<<"$out" && pass "bad --since refused" || fail "bad --since: $rc $out"
out=$("$E" fires --store "sqlite:$D/nosuch.db" 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'no history in' <<<"$out" && pass "missing store named" || fail "missing store: $rc $out"
out=$(fires otherJob 2>&1); rc=$?
[ $rc = 0 ] && grep -q 'no fire times recorded' <<<"$out" && pass "a job without rows" || fail "other job: $rc $out"

stop_daemon "$PID_82"
echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
