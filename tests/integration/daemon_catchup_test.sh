#!/bin/bash
# misfirePolicy CATCH_UP with a real `ejob run` daemon and ZooKeeper: the
# daemon is stopped (SIGSTOP) for 6 s under a 1 s cron; when it goes on,
# exactly the missed fire times within catchUpWindowSeconds (3) of its
# resumption run, each once (the fire ledger shows them ran, with their own
# fire times), and the older ones stay not run; misfirePolicy ONCE runs one.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
# A session that outlives the 6 s stop (the server's maximum is 20 ticks).
export ZKF_TICK_MS=1000
zkf_start || exit 1
now_ms() { date +%s%3N; }
export EJOB_REGISTRY="$ZKF_CONNECT/catchup"

D=$ZKF_DIR
DB=$D/history.db
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: catchup
  sessionTimeoutMilliseconds: 30000
tracing:
  type: SQLITE
  url: $DB
jobs:
  catchJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    misfirePolicy: CATCH_UP
    catchUpWindowSeconds: 3
    props:
      script.command.line: /bin/true
  onceJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    misfirePolicy: ONCE
    props:
      script.command.line: /bin/true
YAML
EJOB_IP=127.0.0.91 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" >>"$D/daemon.log" 2>&1 &
P=$!
zkf_track $P
wait_for 30 "daemon started" logged "$D/daemon.log" "running 2 job"
sleep 3
STOP=$(now_ms)
kill -STOP $P; sleep 6; RESUME=$(now_ms); kill -CONT $P
wait_for 10 "the catch-up is logged" logged "$D/daemon.log" "catchJob: catching up [0-9]* missed fire time"
sleep 3
"$E" fires catchJob --store "sqlite:$DB" --json >"$D/fires.json" 2>/dev/null
python3 - "$D/fires.json" "$STOP" "$RESUME" <<'EOF' && pass "CATCH_UP: exactly the missed fire times within 3 s of the resumption ran" || fail "CATCH_UP rows: $(cat "$D/fires.json" | head -c 3000)"
import json, sys
rows = json.load(open(sys.argv[1]))
stop, resume = int(sys.argv[2]), int(sys.argv[3])
# fire times the stop missed (whole seconds after STOP, before RESUME)
missed = [t for t in range((stop // 1000 + 1) * 1000, resume, 1000)]
ran = {r["fireTimeMs"] for r in rows if r["ran"] and r["kind"] == "CRON"}
print("missed", [(t - stop) for t in missed], "ran", sorted(t - stop for t in ran if stop < t < resume))
bad = []
for t in missed:
    # 700 ms either side of the window's edge is left out (the resumption's
    # own start is a few ms after RESUME)
    if abs(t - (resume - 3000)) < 700:
        continue
    want = t >= resume - 3000
    if (t in ran) != want:
        bad.append((t - stop, want))
assert not bad, bad
assert len(missed) >= 5
EOF
N=$(sqlite3 "$DB" "SELECT count(*) FROM JOB_EXECUTION_LOG WHERE job_name = 'catchJob' AND execution_source = 'MISFIRE'")
[ "$N" = 0 ] && pass "CATCH_UP: each missed fire time ran once (no misfire re-run on top)" || fail "$N MISFIRE runs of catchJob"
ONCE=$("$E" fires onceJob --store "sqlite:$DB" --json 2>/dev/null | python3 -c "import json,sys; print(sum(1 for r in json.load(sys.stdin) if r['ran'] and $STOP < r['fireTimeMs'] < $RESUME))")
[ "$ONCE" -le 1 ] && pass "ONCE: at most one of the missed fire times ran ($ONCE)" || fail "ONCE ran $ONCE missed fire times"
echo "$FAILS failure(s)"
exit $((FAILS > 0))
