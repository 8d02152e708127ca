#!/bin/bash
# `ejob run` checks the open-file limit against its jobs at start-up: 10
# jobs of 10 items under `ulimit -n 64` warn that items will fail with "Too
# many open files" (naming the limit and the estimate); a soft limit below
# a sufficient hard limit is raised instead; a limit that holds them says
# nothing. No ZooKeeper is needed: the check comes before the connection.
set -u
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
D=$(mktemp -d "${TMPDIR:-/tmp}/ejob-nofile-XXXXXX")
PID=""
cleanup() {
  [ -n "$PID" ] && { kill -KILL "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
  rm -rf "$D"
}
trap cleanup EXIT
export EJOB_STATE_DIR=$D/state
{
  echo "regCenter:"
  echo "  serverLists: 127.0.0.1:1"
  echo "  namespace: nofile"
  echo "jobs:"
  for i in $(seq 1 10); do
    echo "  job$i:"
    echo "    elasticJobType: SCRIPT"
    echo "    cron: \"0 0 0 * * ?\""
    echo "    shardingTotalCount: 10"
    echo "    props:"
    echo "      script.command.line: /bin/true"
  done
} >"$D/jobs.yaml"

# run_with ULIMITS LOG: the daemon under the limits ULIMITS sets, stopped once it
# tries to connect (the check is done by then).
run_with() {
  (eval "$1" && exec "$E" run -c "$D/jobs.yaml") 2>"$2" &
  PID=$!
  local i
  for i in $(seq 1 100); do grep -q "ZOO_\|open-file" "$2" && break; sleep 0.1; done
  kill -KILL "$PID" 2>/dev/null
  wait "$PID" 2>/dev/null
  PID=""
}

run_with "ulimit -n 64" "$D/low.log"
if grep -q "open-file limit is 64 (hard limit 64), but 10 job(s) of 100 item(s) may need about 864 descriptors" "$D/low.log"; then
  pass "ulimit -n 64: warned at start-up"
else
  fail "ulimit -n 64: no warning: $(head -5 "$D/low.log")"
fi
run_with "ulimit -Sn 64 && ulimit -Hn 4096" "$D/soft.log"
grep -q "open-file limit raised from 64 to 864" "$D/soft.log" && ! grep -q "open-file limit is" "$D/soft.log" \
  && pass "soft limit 64, hard 4096: raised, no warning" || fail "soft limit: $(head -5 "$D/soft.log")"
run_with "ulimit -n 4096" "$D/ok.log"
! grep -q "open-file limit" "$D/ok.log" && pass "ulimit -n 4096: nothing said" \
  || fail "ulimit -n 4096: $(grep "open-file" "$D/ok.log")"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
