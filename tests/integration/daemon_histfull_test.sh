#!/bin/bash
# SIGTERM with the history disk full: the daemon stops within seconds
# instead of waiting the whole drain time (30 s) for a store that cannot
# write; what was queued is counted as not kept. The history is on a small
# tmpfs the test mounts in its own directory and fills (skipped, exit 77,
# where it cannot mount).
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D/state" "$D/hist"
if ! mount -t tmpfs -o size=2m tmpfs "$D/hist" 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs here (needs root)"
  exit 77
fi
DPID=""
cleanup() {
  [ -n "$DPID" ] && { kill -KILL "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }
  umount "$D/hist" 2>/dev/null
  zkf_cleanup
}
trap cleanup EXIT
export EJOB_STATE_DIR=$D/state
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: histfull
tracing:
  type: SQLITE
  url: $D/hist/history.db
jobs:
  busyJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 4
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'head -c 2000 /dev/zero | tr "\\\\0" x'
YAML
"$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
DPID=$!
wait_for 60 "history written" logged "$D/daemon.log" "succeeded in"
sleep 2
dd if=/dev/zero of="$D/hist/fill" bs=64k 2>/dev/null
wait_for 30 "the store sees the full disk" logged "$D/daemon.log" "store unavailable"
t0=$(date +%s%3N)
kill -TERM $DPID
wait $DPID
rc=$?
took=$(($(date +%s%3N) - t0))
DPID=""
[ $rc = 0 ] && pass "SIGTERM: exit 0" || fail "SIGTERM: exit $rc"
[ $took -lt 10000 ] && pass "stopped in $took ms (drain time 30000 ms)" \
  || fail "stopped only after $took ms: waited for a store that cannot write"
logged "$D/daemon.log" "not waiting for its" && pass "says it gave up on the queued history" \
  || fail "no word of the queued history: $(tail -5 "$D/daemon.log")"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
