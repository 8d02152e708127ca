#!/bin/bash
# startingDeadlineSeconds with a real `ejob run` daemon and ZooKeeper: the
# daemon is stopped (SIGSTOP) for 5 to 7 s under a 2 s cron, past the 1 s
# deadline of deadlineJob. When it goes on, the fire it owes (misfire on,
# ONCE) is not run for deadlineJob, with reason `deadline` in the log, the
# status trail, the fire ledger (every fire time the stop missed) and
# ejob_fires_not_run_total{reason="deadline"}; onceJob, the same job without
# a deadline, runs it. Both then run their next fire on time.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
# A session that outlives the stop (the server's maximum is 20 ticks).
export ZKF_TICK_MS=1000
zkf_start || exit 1
now_ms() { date +%s%3N; }
export EJOB_REGISTRY="$ZKF_CONNECT/deadline"

D=$ZKF_DIR
DB=$D/history.db
PORT=$(zkf_free_port)
job() { # NAME EXTRA
  cat <<YAML
  $1:
    elasticJobType: SCRIPT
    cron: "0/2 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    misfire: true
    $2
    props:
      script.command.line: sh -c 'date +%s%3N >>$D/$1.marks'
YAML
}
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: deadline
  sessionTimeoutMilliseconds: 30000
tracing:
  type: SQLITE
  url: $DB
metrics:
  listen: 127.0.0.1:$PORT
jobs:
$(job deadlineJob "startingDeadlineSeconds: 1")
$(job onceJob "misfirePolicy: ONCE")
YAML
"$E" run -c "$D/jobs.yaml" --check >/dev/null && pass "ejob run --check reads startingDeadlineSeconds" || fail "--check"
EJOB_IP=127.0.0.93 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" >>"$D/daemon.log" 2>&1 &
P=$!
zkf_track $P
wait_for 30 "daemon started" logged "$D/daemon.log" "running 2 job"
ran_twice() { [ "$(cat "$D/$1.marks" 2>/dev/null | wc -l)" -ge 2 ]; }
wait_for 10 "deadlineJob runs on time" ran_twice deadlineJob
# Stop right after a fire, so that the stop misses two fire times.
last=$(tail -n 1 "$D/deadlineJob.marks")
while [ "$(tail -n 1 "$D/deadlineJob.marks")" = "$last" ]; do sleep 0.05; done
sleep 0.3
STOP=$(now_ms)
kill -STOP $P; sleep 5
# Resume 1.3 to 1.7 s into a period: its fire time is then more than the
# scheduler's 1 s threshold late too (one misfired fire for all the fire
# times missed), and the next on-time fire is not taken for the owed one.
while [ $(($(now_ms) % 2000)) -lt 1300 ] || [ $(($(now_ms) % 2000)) -gt 1700 ]; do sleep 0.02; done
RESUME=$(now_ms); kill -CONT $P
wait_for 10 "the deadline is logged" logged "$D/daemon.log" \
  "job deadlineJob: fire of [0-9]* not run (deadline)"
sleep 3
# Runs that began between the resumption and the first fire time after it
# (the fire owed for the stop, run at once).
owed() { # NAME
  python3 - "$D/$1.marks" "$RESUME" <<'EOF'
import sys
resume = int(sys.argv[2])
next_fire = (resume // 2000 + 1) * 2000
print(sum(1 for l in open(sys.argv[1]) if resume <= int(l) < next_fire - 50))
EOF
}
[ "$(owed onceJob)" = 1 ] && pass "onceJob runs the owed fire at once" || fail "onceJob owed runs: $(owed onceJob) ($(tr '\n' ' ' <"$D/onceJob.marks"), resumed $RESUME)"
[ "$(owed deadlineJob)" = 0 ] && pass "deadlineJob does not run it" || fail "deadlineJob owed runs: $(owed deadlineJob) ($(tr '\n' ' ' <"$D/deadlineJob.marks"), resumed $RESUME)"
after() { [ "$(python3 -c 'import sys; print(sum(1 for l in open(sys.argv[1]) if int(l) > int(sys.argv[2]) + 2000))' "$D/deadlineJob.marks" "$RESUME")" -ge 1 ]; }
wait_for 10 "deadlineJob runs its next fire on time" after
[ "$(sqlite3 "$DB" "SELECT count(*) FROM JOB_STATUS_TRACE_LOG WHERE job_name = 'deadlineJob' AND message LIKE '%fire not run (deadline)%'")" -ge 1 ] &&
  pass "the status trail names the deadline" || fail "no status row with reason deadline"
"$E" fires deadlineJob --gaps --store "sqlite:$DB" --json >"$D/fires.json" 2>/dev/null
python3 - "$D/fires.json" "$STOP" "$RESUME" <<'EOF' && pass "the fire ledger: the fire times the stop missed not run, reason deadline" || fail "ledger rows: $(head -c 3000 "$D/fires.json")"
import json, sys
rows = json.load(open(sys.argv[1]))
stop, resume = int(sys.argv[2]), int(sys.argv[3])
missed = [t for t in range((stop // 2000 + 1) * 2000, resume, 2000)]
got = {r["fireTimeMs"]: r for r in rows}
print("missed", missed, [(got.get(t) or {}).get("reason") for t in missed])
assert len(missed) >= 2
for t in missed:
    r = got.get(t)
    assert r is not None and not r["ran"] and r["reason"] == "deadline", (t, r)
    assert "startingDeadlineSeconds" in r["why"], r["why"]
EOF
curl -s "http://127.0.0.1:$PORT/metrics" >"$D/metrics.txt"
grep -E '^ejob_fires_not_run_total\{.*job="deadlineJob".*reason="deadline".*\} [1-9]' "$D/metrics.txt" >/dev/null &&
  pass "ejob_fires_not_run_total{reason=\"deadline\"} counts it" || fail "metrics: $(grep 'not_run_total.*deadlineJob' "$D/metrics.txt")"
echo "$FAILS failure(s)"
exit $((FAILS > 0))
