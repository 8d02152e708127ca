#!/bin/bash
# `ejob run` and SIGHUP: a changed cron reschedules that job only (the other
# job's config and instance nodes are untouched); a file with errors is
# refused with its errors logged and the running configuration kept; added
# jobs start and removed jobs stop; a churn of add/remove reloads followed
# at once by SIGTERM stops cleanly; SIGTERM while a reload drains a removed
# job is acted on within 100 ms.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"
now_ms() { date +%s%3N; }
# stat_of PATH FIELD: a field of zkCli's stat output (mZxid, ctime, ...).
stat_of() { zkf_cli stat "$1" | sed -n "s/^$2 = //p"; }
export EJOB_REGISTRY="$ZKF_CONNECT/reload"

D=$ZKF_DIR/t
mkdir -p "$D"
# Its own state directory (history.db, an embedded registry), never the
# user's default one.
export EJOB_STATE_DIR=$D/state
cat >"$D/item.sh" <<'EOF'
#!/bin/sh
# item.sh RUNS JOB CONTEXT: appends "epoch_ms JOB".
echo "$(date +%s%3N) $2" >>"$1"
EOF
chmod +x "$D/item.sh"
job_yaml() { # NAME CRON
  cat <<EOF
  $1:
    elasticJobType: SCRIPT
    cron: "$2"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: $D/item.sh $D/runs $1
EOF
}
head_yaml() {
  cat <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: reload
  sessionTimeoutMilliseconds: 4000
jobs:
EOF
}
{ head_yaml; job_yaml jobA "0/2 * * * * ?"; job_yaml jobB "0/3 * * * * ?"; } >"$D/jobs.yaml"
touch "$D/runs"
EJOB_IP=127.0.0.51 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
P=$!; zkf_track $P
wait_for 30 "daemon started with 2 jobs" logged "$D/daemon.log" "running 2 job"
wait_for 10 "jobA ran" grep -q jobA "$D/runs"
B_CFG_MZXID=$(stat_of /reload/jobB/config mZxid)
B_INST=$(zkf_cli ls /reload/jobB/instances | tr -d '[]')
B_INST_CTIME=$(stat_of "/reload/jobB/instances/$B_INST" ctime)
[ -n "$B_INST" ] && [ -n "$B_CFG_MZXID" ] && pass "jobB registered as $B_INST" || fail "jobB not registered"

# ------------------------------------------------------ cron change of jobA
{ head_yaml; job_yaml jobA "0/5 * * * * ?"; job_yaml jobB "0/3 * * * * ?"; } >"$D/jobs.yaml"
kill -HUP $P
wait_for 15 "reload applied" logged "$D/daemon.log" "reload done: 0 added, 0 removed, 1 changed, 1 unchanged"
T_RELOAD=$(now_ms)
grep -q 'job jobA: config updated (cron "0/5 \* \* \* \* ?"' "$D/daemon.log" && pass "jobA's new cron logged" || fail "jobA update not logged"
grep -q '"cron":"0/5 \* \* \* \* ?"' <<<"$(zkf_cli get /reload/jobA/config)" && pass "jobA's config node has the new cron" || fail "jobA config: $(zkf_cli get /reload/jobA/config)"
[ "$(stat_of /reload/jobB/config mZxid)" = "$B_CFG_MZXID" ] && pass "jobB's config node untouched" || fail "jobB's config was rewritten"
[ "$(stat_of "/reload/jobB/instances/$B_INST" ctime)" = "$B_INST_CTIME" ] && pass "jobB's instance untouched" || fail "jobB was restarted"
sleep 11
# After the reload jobA fires only on multiples of 5 s, jobB still every 3 s.
A_BAD=$(awk -v t="$T_RELOAD" '$2 == "jobA" && $1 > t + 500 && (int(($1 % 60000) / 1000) % 5) != 0' "$D/runs" | wc -l)
A_RUNS=$(awk -v t="$T_RELOAD" '$2 == "jobA" && $1 > t + 500' "$D/runs" | wc -l)
B_RUNS=$(awk -v t="$T_RELOAD" '$2 == "jobB" && $1 > t + 500' "$D/runs" | wc -l)
[ "$A_RUNS" -ge 1 ] && [ "$A_BAD" -eq 0 ] && pass "jobA rescheduled: $A_RUNS runs, all on a 5 s boundary" || fail "jobA: $A_RUNS runs, $A_BAD off the 5 s schedule"
[ "$B_RUNS" -ge 3 ] && pass "jobB kept firing every 3 s ($B_RUNS runs)" || fail "jobB ran $B_RUNS times"

# ------------------------------------------------------ a bad file is refused
cp "$D/jobs.yaml" "$D/good.yaml"
{ head_yaml; job_yaml jobA "0/5 * * * * ?"; job_yaml jobB "every three seconds"; echo "  jobC:"; echo "    shardingTotalCont: 2"; } >"$D/jobs.yaml"
kill -HUP $P
wait_for 15 "bad reload reported" logged "$D/daemon.log" "has errors; the running configuration is kept"
grep -qE "reload: $D/jobs.yaml:[0-9]+:[0-9]+: jobs.jobB.cron: " "$D/daemon.log" && pass "cron error logged as file:line:col" || fail "cron error not logged"
grep -qE "reload: $D/jobs.yaml:[0-9]+:[0-9]+: jobs.jobC: unknown key \"shardingTotalCont\"" "$D/daemon.log" && pass "unknown key logged as file:line:col" || fail "unknown key not logged"
grep -q '"cron":"0/3 \* \* \* \* ?"' <<<"$(zkf_cli get /reload/jobB/config)" && pass "jobB keeps its cron" || fail "jobB config changed by a bad file"
kill -0 $P && pass "daemon still running" || fail "daemon died on a bad file"

# ------------------------------------------------------ add and remove jobs
{ head_yaml; job_yaml jobA "0/5 * * * * ?"; job_yaml jobC "0/2 * * * * ?"; } >"$D/jobs.yaml"
kill -HUP $P
wait_for 20 "add/remove applied" logged "$D/daemon.log" "reload done: 1 added, 1 removed, 0 changed, 1 unchanged"
[ -z "$(zkf_cli ls /reload/jobB/instances | tr -d '[]')" ] && pass "removed jobB left ZooKeeper" || fail "jobB instance still there"
[ -n "$(zkf_cli ls /reload/jobC/instances | tr -d '[]')" ] && pass "added jobC registered" || fail "jobC not registered"
kill -0 $P && pass "daemon still running" || fail "daemon died"

# ------------------------------------------------------ churn, then SIGTERM at once
# Several reloads that each add a job and remove the one added before (their
# items still running and their next misfire check armed), then SIGTERM
# straight after the last one: stopping removed, added and kept jobs must
# not race with shutdown (the ASan build aborts on a use after free).
slow_job_yaml() { # NAME
  cat <<EOF
  $1:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 3
    failover: true
    overwrite: true
    props:
      script.command.line: $D/slow.sh $D/runs $1
EOF
}
printf '#!/bin/sh\nsleep 0.4\necho "$(date +%%s%%3N) $2" >>"$1"\n' >"$D/slow.sh"
chmod +x "$D/slow.sh"
add_removes_done() { [ "$(grep -c 'reload done: 1 added, 1 removed' "$D/daemon.log")" -ge "$1" ]; }
for r in 1 2 3 4 5; do
  { head_yaml; job_yaml jobA "0/5 * * * * ?"; slow_job_yaml churn$r; } >"$D/jobs.yaml"
  kill -HUP $P
  wait_for 20 "churn reload $r applied" add_removes_done $((r + 1))
  sleep 1.2 # churn$r fires and its items run
done
kill -TERM $P; wait $P; RC=$?
[ $RC -eq 0 ] && pass "SIGTERM right after the churn: exit 0" || fail "exit $RC"
grep -E "AddressSanitizer|LeakSanitizer|runtime error" "$D/daemon.log" | head -5 | grep . && fail "sanitizer report in the log" || pass "no sanitizer report"

# ------------------------------------------- SIGTERM while a reload drains a job
# jobL's item runs 4 s. A reload removes jobL (its item drains, up to the
# drain timeout) and adds jobN; SIGTERM comes during that drain. Within
# 100 ms the daemon says it stops, having paused every job (jobK, firing
# every second, starts nothing more); the reload stops at its next step, so
# jobN never starts.
printf '#!/bin/sh\necho "$(date +%%s%%3N) $2" >>"$1"\nsleep 4\n' >"$D/long.sh"
chmod +x "$D/long.sh"
long_job_yaml() { job_yaml "$1" "* * * * * ?" | sed "s|$D/item.sh|$D/long.sh|"; }
{ head_yaml; job_yaml jobK "* * * * * ?"; long_job_yaml jobL; } >"$D/jobs.yaml"
: >"$D/runs"
EJOB_IP=127.0.0.52 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" --drain-timeout-ms 8000 \
  2>"$D/daemon2.log" &
P=$!; zkf_track $P
wait_for 30 "second daemon started with 2 jobs" logged "$D/daemon2.log" "running 2 job"
wait_for 10 "jobL's long item runs" grep -q jobL "$D/runs"
{ head_yaml; job_yaml jobK "* * * * * ?"; job_yaml jobN "* * * * * ?"; } >"$D/jobs.yaml"
kill -HUP $P
wait_for 10 "the reload drains removed jobL" logged "$D/daemon2.log" "job jobL: stopping"
sleep 0.3
T0=$(now_ms); kill -TERM $P
wait_for 5 "SIGTERM acted on during the drain" logged "$D/daemon2.log" "SIGTERM: stopping"
TS=$(grep -m1 "SIGTERM: stopping" "$D/daemon2.log" | cut -d' ' -f1)
ACT=$(($(date -d "$TS" +%s%3N) - T0))
# Sanitizer builds run several times slower.
BOUND=$([ -n "${EJ_SANITIZE:-}" ] && echo 300 || echo 100)
[ "$ACT" -le "$BOUND" ] && pass "every job paused and SIGTERM logged $ACT ms after it was sent" ||
  fail "SIGTERM acted on $ACT ms after it was sent (bound $BOUND ms)"
wait $P; RC=$?; T1=$(now_ms)
[ $RC -eq 0 ] && pass "exit 0, $((T1 - T0)) ms after SIGTERM (jobL's item drained)" || fail "exit $RC"
LATE=$(awk -v t=$((T0 + 1000)) '$2 == "jobK" && $1 > t' "$D/runs" | wc -l)
[ "$LATE" = 0 ] && pass "jobK started nothing after SIGTERM" || fail "jobK started $LATE run(s) after SIGTERM"
grep -q jobN "$D/runs" && fail "jobN started although the daemon was stopping" || pass "jobN never started"
grep -q "reload: stopped after 0 of 2 job(s): the daemon is stopping" "$D/daemon2.log" &&
  pass "the reload stopped at its next step" || fail "reload: $(grep reload "$D/daemon2.log" | tail -3)"
grep -E "AddressSanitizer|LeakSanitizer|runtime error" "$D/daemon2.log" | head -5 | grep . && fail "sanitizer report in the log" || pass "no sanitizer report"

echo "$FAILS failure(s)"
exit $((FAILS > 0))
