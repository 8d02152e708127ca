#!/bin/bash
# `ejob run` does not give up on jobs whose start meets a transient:
# ZooKeeper is frozen (SIGSTOP) past the jobs' start bound (2 x session +
# 2 s) while they register, as under the start-up load of a large fleet.
# The daemon keeps running, says which jobs will be tried again, tries them
# again with back-off after the thaw, and becomes ready (/readyz 200) with
# every job firing. An error a retry cannot fix still stops it: a job whose
# servers node its digest may not write (an ACL) makes it exit 1, at once.
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
SESSION=2000
jobs_yaml() { # NAMESPACE JOBS...
  local ns=$1 j
  shift
  echo "regCenter:"
  echo "  serverLists: $ZKF_CONNECT"
  echo "  namespace: $ns"
  echo "  sessionTimeoutMilliseconds: $SESSION"
  echo "jobs:"
  for j in "$@"; do
    echo "  $j:"
    echo "    elasticJobType: SCRIPT"
    echo "    cron: \"* * * * * ?\""
    echo "    shardingTotalCount: 1"
    echo "    overwrite: true"
    echo "    props:"
    echo "      script.command.line: /bin/sh -c 'echo $j >> $D/$j.out'"
  done
}

# -------------------------------------------------- a frozen server
# Enough jobs that registering them outlasts the poll below, even on a
# loaded machine where this script wakes late (10 were done before the
# freeze under CI load).
JOBS=$(seq -f "job%g" 1 100)
jobs_yaml retry $JOBS >"$D/jobs.yaml"
"$E" run -c "$D/jobs.yaml" --metrics-listen "127.0.0.1:$PORT" --drain-timeout-ms 1000 \
  2>"$D/daemon.log" &
DPID=$!
zkf_track $DPID
# The history store is opened right before the jobs register.
for _ in $(seq 1 3000); do grep -q "history: " "$D/daemon.log" && break; sleep 0.005; done
kill -STOP "$ZKF_PID"
sleep $((2 * SESSION / 1000 + 2 + 1))
kill -CONT "$ZKF_PID"
wait_for 30 "job starts that timed out are queued for another start" logged "$D/daemon.log" \
  "not started (attempt 1); trying again"
kill -0 $DPID 2>/dev/null && pass "the daemon keeps running" || fail "the daemon exited: $(tail -5 "$D/daemon.log")"
status_of() { curl -s -o "$D/body" -w '%{http_code}' "$URL$1"; }
is_status() { [ "$(status_of "$1")" = "$2" ]; }
wait_for 90 "readyz 200 once the retries started every job" is_status /readyz 200
logged "$D/daemon.log" "started after a retry" && pass "said so" || fail "no 'started after a retry'"
all_fired() { local j; for j in $JOBS; do [ -s "$D/$j.out" ] || return 1; done; }
wait_for 30 "every job fires" all_fired
kill -TERM $DPID
wait $DPID
rc=$?
[ $rc = 0 ] && pass "SIGTERM: exit 0" || fail "SIGTERM: exit $rc"

# -------------------------------------------------- what a retry cannot fix
# The job's servers node: anyone may read it (and change its ACL), nobody
# may create under it (this instance's server node).
zkf_cli create /denied "" >/dev/null
zkf_cli create /denied/slowJob "" >/dev/null
zkf_cli create /denied/slowJob/servers "" world:anyone:ra >/dev/null
jobs_yaml denied okJob slowJob >"$D/denied.yaml"
timeout 60 "$E" run -c "$D/denied.yaml" 2>"$D/denied.log"
rc=$?
if [ $rc = 1 ] && logged "$D/denied.log" "job slowJob: cannot start" && ! logged "$D/denied.log" "trying again"; then
  pass "a node the daemon may not write: exit 1, not retried"
else
  fail "read-only servers node: exit $rc ($(grep -m2 "slowJob" "$D/denied.log"))"
fi
# A bad config: the file is refused (exit 2, as for every error in it).
jobs_yaml retry job1 | sed -e 's/shardingTotalCount: 1/shardingTotalCount: 0/' >"$D/bad.yaml"
timeout 60 "$E" run -c "$D/bad.yaml" 2>"$D/bad.log"
rc=$?
[ $rc = 2 ] && pass "a bad config: exit 2" || fail "a bad config: exit $rc ($(tail -3 "$D/bad.log"))"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
