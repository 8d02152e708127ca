#!/bin/bash
# dist/prometheus/ejob-alerts.yml: `promtool check rules` accepts it, and
# `promtool test rules` (prometheus_alerts.test.yml) shows each rule firing
# on the series it is about and not before, and a failure counter born at 1
# (no zero series) never firing the failure rule.
set -u
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
RULES=$EJ_SOURCE_DIR/dist/prometheus/ejob-alerts.yml
command -v promtool >/dev/null || { echo "FAIL: promtool not installed (scripts/install-deps)" >&2; exit 1; }
OUT=$(promtool check rules "$RULES" 2>&1) && grep -q "SUCCESS: 7 rules found" <<<"$OUT" \
  && pass "promtool check rules: $(grep SUCCESS <<<"$OUT" | sed 's/^ *//')" || fail "promtool check rules: $OUT"
for a in EjobJobNoLeader EjobItemRunsFailed EjobFiresNotRun EjobDaemonNotReady EjobDaemonDown \
         EjobHistoryStoreDown EjobHistoryEventsLost; do
  grep -q "alertname: $a\$" "$EJ_SOURCE_DIR/tests/integration/prometheus_alerts.test.yml" \
    && pass "rule $a has a unit test" || fail "rule $a is not tested"
done
OUT=$(cd "$EJ_SOURCE_DIR/tests/integration" && promtool test rules prometheus_alerts.test.yml 2>&1) \
  && pass "promtool test rules: every rule fires when it should" || fail "promtool test rules: $OUT"
echo "$FAILS failure(s)"; [ "$FAILS" = 0 ]
