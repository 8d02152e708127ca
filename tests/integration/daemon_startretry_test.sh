#!/bin/bash
# `ejob run` does not give up on a job whose start meets a transient: a
# job whose servers node ZooKeeper refuses to let this instance write (an
# ACL: read only) fails its start; the daemon keeps running the other job,
# says the refused one will be tried again, /readyz is 503 naming it, and
# once the ACL is opened the retry starts it, /readyz turns 200 and it
# fires. A bad config still stops the daemon at once.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D/state"
export EJOB_STATE_DIR=$D/state
PORT=$(zkf_free_port)
URL=http://127.0.0.1:$PORT

# The refused job's servers node: anyone may read it (and change its ACL),
# nobody may create under it (this instance's server node).
zkf_cli create /retry "" >/dev/null
zkf_cli create /retry/slowJob "" >/dev/null
zkf_cli create /retry/slowJob/servers "" world:anyone:ra >/dev/null
zkf_cli getAcl /retry/slowJob/servers | grep -q ": ra$" && pass "servers node made read-only" ||
  fail "ACL not set: $(zkf_cli getAcl /retry/slowJob/servers)"

cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: retry
  sessionTimeoutMilliseconds: 4000
jobs:
  okJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'echo ok >> $D/ok.out'
  slowJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'echo slow >> $D/slow.out'
YAML
"$E" run -c "$D/jobs.yaml" --metrics-listen "127.0.0.1:$PORT" --drain-timeout-ms 1000 \
  2>"$D/daemon.log" &
DPID=$!
zkf_track $DPID
status_of() { curl -s -o "$D/body" -w '%{http_code}' "$URL$1"; }
is_status() { [ "$(status_of "$1")" = "$2" ]; }
wait_for 60 "the refused job is queued for another start" logged "$D/daemon.log" \
  "job slowJob: not started (attempt 1); trying again"
wait_for 30 "the other job runs meanwhile" test -s "$D/ok.out"
kill -0 $DPID 2>/dev/null && pass "the daemon keeps running" || fail "the daemon exited: $(tail -5 "$D/daemon.log")"
if is_status /readyz 503 && grep -q "slowJob" "$D/body"; then
  pass "readyz 503 names the job: $(cat "$D/body")"
else
  fail "readyz while slowJob waits: $(cat "$D/body")"
fi
wait_for 30 "a second attempt, with back-off" logged "$D/daemon.log" "job slowJob: not started (attempt 2)"
zkf_cli setAcl /retry/slowJob/servers world:anyone:cdrwa >/dev/null
wait_for 60 "the retry starts the job once the ACL is open" logged "$D/daemon.log" \
  "job slowJob: started after a retry"
wait_for 30 "readyz 200" is_status /readyz 200
wait_for 30 "the job fires" test -s "$D/slow.out"
kill -0 $DPID 2>/dev/null && pass "still running" || fail "the daemon exited"
kill -TERM $DPID
wait $DPID
rc=$?
[ $rc = 0 ] && pass "SIGTERM: exit 0" || fail "SIGTERM: exit $rc"

# A bad config is no transient: the daemon stops at once (exit 2, as for
# every error in the file).
sed -e 's/shardingTotalCount: 1/shardingTotalCount: 0/' "$D/jobs.yaml" >"$D/bad.yaml"
timeout 60 "$E" run -c "$D/bad.yaml" 2>"$D/bad.log"
rc=$?
[ $rc = 2 ] && pass "a bad config: exit 2" || fail "a bad config: exit $rc ($(tail -3 "$D/bad.log"))"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
