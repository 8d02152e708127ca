#!/bin/bash
# dist/prometheus/ejob-alerts.yml: `promtool check rules` accepts it, and
# `promtool test rules` (prometheus_alerts.test.yml) shows each rule firing
# on the series it is about and not before, and a failure counter born at 1
# (no zero series) never firing the failure rule; docs/metrics.md shows the
# shipped expressions and the Prometheus test's queries word for word.
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
# docs/metrics.md shows exactly the shipped expressions and the queries
# prometheus_daemons_test.sh runs (a | in a Markdown table is written \|).
DOC=$(sed 's/\\|/|/g' "$EJ_SOURCE_DIR/docs/metrics.md")
while IFS= read -r e; do
  grep -qF -- "\`$e\`" <<<"$DOC" && pass "docs/metrics.md shows rule expression $e" \
    || fail "docs/metrics.md lacks the shipped expression: $e"
done < <(sed -n 's/^ *expr: //p' "$RULES")
for v in INCREASE LEADERS; do
  q=$(sed -n "s/^$v='\(.*\)'\$/\1/p" "$EJ_SOURCE_DIR/tests/integration/prometheus_daemons_test.sh")
  [ -n "$q" ] && grep -qxF -- "$q" <<<"$DOC" && pass "docs/metrics.md gives the test's query $q" \
    || fail "docs/metrics.md lacks the query the Prometheus test runs: $v='$q'"
done
echo "$FAILS failure(s)"; [ "$FAILS" = 0 ]
