#!/bin/bash
# A daemon whose clock is 30 s ahead of ZooKeeper's, its job at
# maxTimeDiffSeconds -1 (no check, ElasticJob's default): it still says so,
# in a warning naming the offset and in ejob_clock_offset_seconds; a daemon
# with a good clock says nothing and shows an offset near 0. The clock is
# shifted by an LD_PRELOAD shim (clockshift.c).
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
SHIM=${EJ_BUILD_DIR:?EJ_BUILD_DIR must name the build directory}/libej_clockshift.so
[ -f "$SHIM" ] || { echo "FAIL: $SHIM not built" >&2; exit 1; }
zkf_start || exit 1
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D/s1" "$D/s2"
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: clock
jobs:
  clockJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 * * ?"
    shardingTotalCount: 1
    maxTimeDiffSeconds: -1
    overwrite: true
    props:
      script.command.line: /bin/true
YAML
P1=$(zkf_free_port)
P2=$(zkf_free_port)
EJOB_STATE_DIR=$D/s1 EJOB_IP=127.0.0.61 LD_PRELOAD=$SHIM EJ_CLOCK_SHIFT_S=30 \
  ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0 \
  "$E" run -c "$D/jobs.yaml" --metrics-listen "127.0.0.1:$P1" 2>"$D/ahead.log" &
zkf_track $!
EJOB_STATE_DIR=$D/s2 EJOB_IP=127.0.0.62 \
  "$E" run -c "$D/jobs.yaml" --metrics-listen "127.0.0.1:$P2" 2>"$D/good.log" &
zkf_track $!
wait_for 30 "the daemon 30 s ahead warns" logged "$D/ahead.log" "this host's clock is +30"
offset() { curl -s "http://127.0.0.1:$1/metrics" | awk '$1 == "ejob_clock_offset_seconds" { print $2 }'; }
near() { awk -v v="$1" -v w="$2" 'BEGIN { exit !(v != "" && v - w < 1.5 && w - v < 1.5) }'; }
wait_for 10 "ejob_clock_offset_seconds about 30 there" near "$(offset "$P1")" 30 \
  || echo "  got: $(offset "$P1")"
wait_for 10 "about 0 on the daemon with a good clock" near "$(offset "$P2")" 0 \
  || echo "  got: $(offset "$P2")"
sleep 1
! logged "$D/good.log" "this host's clock is" && pass "the good clock is not warned about" \
  || fail "warned about a good clock: $(grep "clock is" "$D/good.log")"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
