#!/bin/bash
# A retry never overlaps the failover run of its item (docs/execution.md
# "Retries"): two `ejob run` daemons, failover on, a one-item script job
# whose runs fail and write "start|end HOST PID MS" to a file, retry
# {maxAttempts: 2, initialBackoffSeconds: 8}. After the first attempt ends
# the owner is, during its back-off,
#   1. frozen (SIGSTOP) past its session and woken (SIGCONT) once its retry
#      is due while the failover run of the item on the other daemon still
#      runs: the retry is not run (its session is gone), and that is
#      recorded in the log and the status trail;
#   2. killed with -9: the item runs on the other daemon.
# Both times the item did run elsewhere, no two runs of the item overlap,
# and the failover run's own retry (attempt 2 on the new owner) runs.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
export EJOB_REGISTRY="$ZKF_CONNECT/rfo"

D=$ZKF_DIR
DB=$D/history.db
cat >"$D/item.sh" <<'EOF'
#!/bin/sh
# item.sh MARKS SECONDS CONTEXT: "start HOST PID MS", sleep, "end ...", exit 1.
host=$(printf '%s' "$3" | sed -n 's/.*"taskId":"[^"]*@-@\([0-9.]*\)@-@[0-9]*".*/\1/p')
echo "start $host $$ $(date +%s%3N)" >>"$1"
sleep "$2"
echo "end $host $$ $(date +%s%3N)" >>"$1"
exit 1
EOF
chmod +x "$D/item.sh"
job() { # NAME
  cat <<YAML
  $1:
    elasticJobType: SCRIPT
    cron: "0 0 3 * * ?"
    shardingTotalCount: 1
    failover: true
    misfire: false
    overwrite: true
    retry: {maxAttempts: 2, initialBackoffSeconds: 8}
    props:
      script.command.line: $D/item.sh $D/$1.marks 6
YAML
}
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: rfo
  sessionTimeoutMilliseconds: 3000
tracing:
  type: SQLITE
  url: $DB
jobs:
$(job stopJob)
$(job killJob)
YAML
declare -A PID
for ip in 127.0.0.81 127.0.0.82; do
  EJOB_IP=$ip setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" >>"$D/daemon-$ip.log" 2>&1 &
  PID[$ip]=$!
  zkf_track $!
done
for ip in 127.0.0.81 127.0.0.82; do
  wait_for 30 "daemon $ip started" logged "$D/daemon-$ip.log" "running 2 job"
done
sleep 1

# No two runs overlap (a run without its end line lasts until now), one ran
# on a host other than the first run's, and ATTEMPTS runs began in all.
check_runs() { # MARKS ATTEMPTS
  python3 - "$1" "$2" <<'PY'
import sys, time
runs = {}
for line in open(sys.argv[1]):
    k, host, pid, ms = line.split()
    r = runs.setdefault(pid, {"host": host, "start": None, "end": None})
    r[k] = int(ms)
now = int(time.time() * 1000)
iv = sorted((r["start"], r["end"] or now, r["host"]) for r in runs.values())
print(" ".join("%s %d..%d" % (h, s - iv[0][0], e - iv[0][0]) for s, e, h in iv))
for a, b in zip(iv, iv[1:]):
    assert b[0] >= a[1], "overlap: %s and %s" % (a, b)
assert any(h != iv[0][2] for _, _, h in iv), "the item never ran elsewhere"
assert len(iv) == int(sys.argv[2]), "%d runs, expected %s" % (len(iv), sys.argv[2])
PY
}
first_end() { grep -q '^end' "$D/$1.marks" 2>/dev/null; }
owner_of() { awk '$1 == "start" { print $2; exit }' "$D/$1.marks"; }
ran_elsewhere() { awk -v o="$2" '$1 == "start" && $2 != o { f = 1 } END { exit !f }' "$D/$1.marks"; }

# 1. Frozen during the back-off, woken while the failover run still runs.
"$E" trigger stopJob >/dev/null || fail "trigger stopJob"
wait_for 20 "stopJob: attempt 1 ended" first_end stopJob
OWNER=$(owner_of stopJob)
kill -STOP "${PID[$OWNER]}"
END1=$(awk '$1 == "end" { print $4; exit }' "$D/stopJob.marks")
wait_for 20 "stopJob: the failover run started on the other daemon" ran_elsewhere stopJob "$OWNER"
# Wake the owner once its retry is due (8 s after attempt 1), while the
# failover run (6 s) still runs.
while [ "$(date +%s%3N)" -lt $((END1 + 8500)) ]; do sleep 0.1; done
kill -CONT "${PID[$OWNER]}"
wait_for 10 "stopJob: the owner's retry abandoned" logged "$D/daemon-$OWNER.log" \
  "stopJob: item 0 attempt 2 not run: "
grep -q "stopJob: item 0 attempt 2 after" "$D/daemon-$OWNER.log" &&
  fail "stopJob: the woken owner ran its retry" || pass "stopJob: the woken owner ran no retry"
three_ended() { [ "$(grep -c '^end' "$D/stopJob.marks")" -ge 3 ]; }
wait_for 30 "stopJob: the new owner's attempt 2 ended" three_ended
check_runs "$D/stopJob.marks" 3 && pass "stopJob: no overlap, the item ran elsewhere" ||
  fail "stopJob runs: $(tr '\n' ' ' <"$D/stopJob.marks")"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM JOB_STATUS_TRACE_LOG WHERE job_name = 'stopJob' AND message LIKE '%item 0 retry abandoned (attempt 2 not run): %'")" -ge 1 ] &&
  pass "stopJob: the abandoned retry is in the status trail" || fail "no status row for the abandoned retry"

# 2. Killed with -9 during the back-off (the owner may be either daemon
# again: the woken one registers anew).
two_instances() { [ "$(zkf_cli ls /rfo/killJob/instances 2>/dev/null | grep -o '@-@' | wc -l)" -ge 2 ]; }
wait_for 30 "killJob: both daemons' instances registered" two_instances
"$E" trigger killJob >/dev/null || fail "trigger killJob"
wait_for 20 "killJob: attempt 1 ended" first_end killJob
OWNER=$(owner_of killJob)
kill -KILL "${PID[$OWNER]}"
wait_for 20 "killJob: the failover run started on the other daemon" ran_elsewhere killJob "$OWNER"
killed_three() { [ "$(grep -c '^end' "$D/killJob.marks")" -ge 3 ]; }
wait_for 30 "killJob: the new owner's attempt 2 ended" killed_three
check_runs "$D/killJob.marks" 3 && pass "killJob: no overlap, the item ran elsewhere" ||
  fail "killJob runs: $(tr '\n' ' ' <"$D/killJob.marks")"
echo "$FAILS failure(s)"
exit $((FAILS > 0))
