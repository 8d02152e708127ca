#!/bin/bash
# A daemon stopped (SIGSTOP) across two fire times and resumed a few
# hundred ms after a third runs the job once for all three (misfire ONCE:
# the newest is less than the scheduler's 1 s threshold late, and is
# collapsed with the older ones), not once and then again as a misfire of
# the newest fire time while that run went on.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
# A session that outlives the stop (the server's maximum is 20 ticks).
export ZKF_TICK_MS=1000
zkf_start || exit 1
now_ms() { date +%s%3N; }
D=$ZKF_DIR
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: resume
  sessionTimeoutMilliseconds: 30000
jobs:
  onceJob:
    elasticJobType: SCRIPT
    cron: "0/2 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    misfire: true
    props:
      script.command.line: sh -c 'date +%s%3N >>$D/onceJob.marks; sleep 0.2'
YAML
EJOB_STATE_DIR=$D/state EJOB_IP=127.0.0.94 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" >>"$D/daemon.log" 2>&1 &
P=$!
zkf_track $P
wait_for 30 "daemon started" logged "$D/daemon.log" "running 1 job"
ran_twice() { [ "$(cat "$D/onceJob.marks" 2>/dev/null | wc -l)" -ge 2 ]; }
wait_for 10 "onceJob runs on time" ran_twice
# Stop right after a fire; resume 0.3 to 0.5 s after the third fire time.
last=$(tail -n 1 "$D/onceJob.marks")
while [ "$(tail -n 1 "$D/onceJob.marks")" = "$last" ]; do sleep 0.05; done
sleep 0.5
kill -STOP $P
sleep 4
while [ $(($(now_ms) % 2000)) -lt 300 ] || [ $(($(now_ms) % 2000)) -gt 500 ]; do sleep 0.02; done
RESUME=$(now_ms)
kill -CONT $P
sleep 3
owed=$(python3 - "$D/onceJob.marks" "$RESUME" <<'PY'
import sys
resume = int(sys.argv[2])
next_fire = (resume // 2000 + 1) * 2000
print(sum(1 for l in open(sys.argv[1]) if resume <= int(l) < next_fire - 50))
PY
)
[ "$owed" = 1 ] && pass "one run for the fire times of the stop" ||
  fail "$owed runs before the next fire ($(tr '\n' ' ' <"$D/onceJob.marks"), resumed $RESUME)"
after() { [ "$(python3 -c 'import sys; print(sum(1 for l in open(sys.argv[1]) if int(l) > int(sys.argv[2]) + 2000))' "$D/onceJob.marks" "$RESUME")" -ge 1 ]; }
wait_for 10 "the next fire runs on time" after
kill -TERM $P
wait $P
echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
