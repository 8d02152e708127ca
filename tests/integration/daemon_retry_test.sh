#!/bin/bash
# Retries (retry: in the job) with a real `ejob run` daemon and ZooKeeper:
#   - a script that fails twice then passes, retry {maxAttempts: 3,
#     initialBackoffSeconds: 1, multiplier: 2}: attempt 2 starts 1 s after
#     attempt 1 ended, attempt 3 2 s after attempt 2 (+-10%), and the
#     history holds three rows, attempts 1, 2, 3: failed, failed, success;
#   - without retry: one attempt;
#   - a retry that would start after the next cron fire is not run (the
#     next fire wins), with that reason logged and in the status trail.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
export EJOB_REGISTRY="$ZKF_CONNECT/retry"

D=$ZKF_DIR
DB=$D/history.db
cat >"$D/flaky.sh" <<'EOF'
#!/bin/sh
# flaky.sh MARKS FAILS: the first FAILS runs exit 1, then exit 0.
n=$(($(grep -c '^start' "$1" 2>/dev/null || echo 0) + 1))
echo "start $n $(date +%s%3N)" >>"$1"
echo "end $n $(date +%s%3N)" >>"$1"
[ "$n" -gt "$2" ]
EOF
chmod +x "$D/flaky.sh"
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: retry
tracing:
  type: SQLITE
  url: $DB
jobs:
  flakyJob:
    elasticJobType: SCRIPT
    cron: "0 0 3 * * ?"
    shardingTotalCount: 1
    overwrite: true
    retry: {maxAttempts: 3, initialBackoffSeconds: 1, multiplier: 2}
    props:
      script.command.line: $D/flaky.sh $D/flaky.marks 2
  onceJob:
    elasticJobType: SCRIPT
    cron: "0 0 3 * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: $D/flaky.sh $D/once.marks 2
  busyJob:
    elasticJobType: SCRIPT
    cron: "0/3 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    retry: {maxAttempts: 2, initialBackoffSeconds: 5}
    props:
      script.command.line: $D/flaky.sh $D/busy.marks 1000
YAML
"$E" run -c "$D/jobs.yaml" --check >/dev/null && pass "ejob run --check reads retry:" || fail "--check"
EJOB_IP=127.0.0.61 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" >>"$D/daemon.log" 2>&1 &
zkf_track $!
wait_for 30 "daemon started" logged "$D/daemon.log" "running 3 job"
"$E" trigger flakyJob >/dev/null || fail "trigger flakyJob"
"$E" trigger onceJob >/dev/null || fail "trigger onceJob"
wait_for 20 "attempt 3 ran" logged "$D/flaky.marks" "^end 3"
python3 - "$D/flaky.marks" <<'EOF' && pass "back-off: 1 s then 2 s (+-10%)" || fail "back-off: $(tr '\n' ' ' <"$D/flaky.marks")"
import sys
t = {}
for line in open(sys.argv[1]):
    k, n, ms = line.split()
    t[(k, int(n))] = int(ms)
g1 = t[("start", 2)] - t[("end", 1)]
g2 = t[("start", 3)] - t[("end", 2)]
print("gaps: %d ms, %d ms" % (g1, g2))
assert 900 <= g1 <= 1100 and 1800 <= g2 <= 2200, (g1, g2)
assert ("start", 4) not in t
EOF
hist() { "$E" history "$1" --store "sqlite:$DB" --json 2>/dev/null; }
three() { [ "$(hist flakyJob | python3 -c 'import json,sys; print(sorted((r["attempt"], r["result"]) for r in json.load(sys.stdin)))')" = "[(1, 'failed'), (2, 'failed'), (3, 'success')]" ]; }
wait_for 10 "history: attempts 1, 2, 3 failed, failed, success" three
ledger() { [ "$("$E" fires flakyJob --store "sqlite:$DB" --json 2>/dev/null | python3 -c 'import json,sys; print([(r["result"], r["attempts"]) for r in json.load(sys.stdin) if r["ran"]])')" = "[('succeeded', 3)]" ]; }
wait_for 10 "the fire ledger: one row, final outcome succeeded after 3 attempts" ledger
wait_for 10 "onceJob ran" logged "$D/once.marks" "^end 1"
sleep 2
[ "$(grep -c '^start' "$D/once.marks")" = 1 ] && pass "no retry: one attempt" || fail "onceJob: $(cat "$D/once.marks")"
wait_for 20 "the next fire wins over a retry after it" logged "$D/daemon.log" "busyJob: item 0 attempt 2 not run: the next fire comes first"
grep -q "busyJob: item 0 attempt 2 after" "$D/daemon.log" && fail "busyJob retried" || pass "busyJob: no retry ran"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM JOB_STATUS_TRACE_LOG WHERE job_name = 'busyJob' AND message LIKE '%retry abandoned (attempt 2 not run): the next fire comes first%'")" -ge 1 ] &&
  pass "the abandoned retry is in the status trail" || fail "no status row for the abandoned retry"
echo "$FAILS failure(s)"
exit $((FAILS > 0))
