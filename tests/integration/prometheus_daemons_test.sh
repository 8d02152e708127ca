#!/bin/bash
# Debian's real Prometheus scrapes two ejob daemons (one job, orderSync, on
# both, on a real ZooKeeper) every second and evaluates the shipped rules
# (dist/prometheus/ejob-alerts.yml) every second. Through Prometheus's HTTP
# API, with the queries docs/metrics.md gives:
#   - before anything ran, orderSync's failure counter is there at 0 on
#     both daemons (no series born at its first event);
#   - sum by (ejob_job) (ejob_job_leader) is 1 for orderSync: the label is
#     ejob_job, which Prometheus keeps (it renames a target's "job");
#   - the job's first run fails (the script exits 1): increase() of the
#     failure counter sees it, and the shipped rule EjobItemRunsFailed fires
#     for orderSync (GET /api/v1/alerts).
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
RULES=$EJ_SOURCE_DIR/dist/prometheus/ejob-alerts.yml
command -v prometheus >/dev/null || { echo "FAIL: prometheus not installed (scripts/install-deps)" >&2; exit 1; }
zkf_start || exit 1
D=$ZKF_DIR/t
mkdir -p "$D"
NS=promtest

cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: $NS
  sessionTimeoutMilliseconds: 4000
jobs:
  orderSync:
    elasticJobType: SCRIPT
    # Once a year: in this test it runs only when triggered.
    cron: "0 0 0 1 1 ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'echo sync failed >&2; exit 1'
EOF

# ---------------------------------------------------------- two daemons
PA=$(zkf_free_port); PB=$(zkf_free_port)
for x in a b; do
  port=$PA; ip=127.0.0.21
  [ $x = b ] && { port=$PB; ip=127.0.0.22; }
  EJOB_IP=$ip setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" --state-dir "$D/state-$x" \
    --metrics-listen "127.0.0.1:$port" 2>"$D/$x.log" &
  zkf_track $!
done
ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz")" = 200 ]; }
wait_for 30 "daemon a ready" ready "$PA" || exit 1
wait_for 30 "daemon b ready" ready "$PB" || exit 1

# ---------------------------------------------------------- Prometheus
PP=$(zkf_free_port)
PURL=http://127.0.0.1:$PP
cat >"$D/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $RULES
scrape_configs:
  - job_name: ejob
    static_configs:
      - targets: ['127.0.0.1:$PA', '127.0.0.1:$PB']
EOF
setpriv --pdeathsig KILL prometheus --config.file="$D/prometheus.yml" \
  --storage.tsdb.path="$D/tsdb" --web.listen-address="127.0.0.1:$PP" --log.level=warn \
  >"$D/prometheus.log" 2>&1 &
zkf_track $!
prom_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$PURL/-/ready")" = 200 ]; }
wait_for 30 "Prometheus ready" prom_ready || { cat "$D/prometheus.log" >&2; exit 1; }

query() { curl -s -G --data-urlencode "query=$1" "$PURL/api/v1/query"; }
# The result of an instant query, one line per series: LABEL=VALUE ... then
# the value last ("" when the query failed).
series() {
  query "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
if d.get("status") != "success":
    sys.exit(1)
for r in d["data"]["result"]:
    m = r["metric"]
    print(" ".join("%s=%s" % (k, m[k]) for k in sorted(m)), r["value"][1])'
}
count_is() { [ "$(series "$1" | wc -l)" = "$2" ]; }
# The value of the one series of the query that has LABEL=VALUE.
value_of() { series "$1" | awk -v l="$2" '{ for (i = 1; i < NF; i++) if ($i == l) { print $NF; exit } }'; }
both_up() { [ "$(series 'sum(up{job="ejob"})' | awk '{ print $NF }')" = 2 ]; }
wait_for 20 "Prometheus scrapes both daemons (up 2)" both_up

# Before any run: the failure counter is there at 0 on both instances.
FAILED='ejob_item_runs_total{ejob_job="orderSync",result="failed"}'
zero_on_both() { count_is "$FAILED == 0" 2; }
wait_for 20 "$FAILED is 0 on both daemons before the first run" zero_on_both ||
  echo "  (seen: $(series "{__name__=\"ejob_item_runs_total\"}" | tr '\n' ';'))" >&2

LEADERS='sum by (ejob_job) (ejob_job_leader)'
one_leader() { [ "$(value_of "$LEADERS" ejob_job=orderSync)" = 1 ]; }
wait_for 20 "$LEADERS is 1 for orderSync" one_leader ||
  echo "  (seen: $(series "$LEADERS" | tr '\n' ';') and by job:" \
    "$(series 'sum by (job) (ejob_job_leader)' | tr '\n' ';'))" >&2

# Let both zeros be scraped more than once, then the first run, failing.
sleep 2
EJOB_REGISTRY="$ZKF_CONNECT/$NS" "$E" trigger orderSync >"$D/trigger.out" 2>&1 \
  && pass "ejob trigger orderSync" || fail "ejob trigger: $(cat "$D/trigger.out")"
ran() { grep -q "sync failed" "$D/a.log" "$D/b.log"; }
wait_for 20 "the first run of orderSync failed (its stderr logged)" ran

INCREASE='increase(ejob_item_runs_total{ejob_job="orderSync",result="failed"}[1m])'
seen_rise() {
  series "sum($INCREASE)" | awk '{ v = $NF } END { exit !(NR == 1 && v > 0) }'
}
wait_for 20 "sum($INCREASE) > 0: the first failure is seen" seen_rise ||
  echo "  (seen: $(series "$INCREASE" | tr '\n' ';') and without the job's label:" \
    "$(series 'increase(ejob_item_runs_total{result="failed"}[1m])' | tr '\n' ';'))" >&2
echo "  $INCREASE: $(series "$INCREASE" | tr '\n' ';')"

alerts() { curl -s "$PURL/api/v1/alerts"; }
firing() {
  alerts | python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if any(a["labels"].get("alertname") == "EjobItemRunsFailed"
                  and a["labels"].get("ejob_job") == "orderSync"
                  and a["state"] == "firing" for a in d["data"]["alerts"]) else 1)'
}
wait_for 20 "the shipped rule EjobItemRunsFailed fires for orderSync (/api/v1/alerts)" firing ||
  echo "  (alerts: $(alerts))" >&2
# Its labels and words, as a receiver gets them.
alerts | python3 -c '
import json, sys
for a in json.load(sys.stdin)["data"]["alerts"]:
    print("  %s %s %s: %s" % (a["state"], a["labels"]["alertname"],
          a["labels"].get("instance", ""), a["annotations"].get("summary", "")))'
# Nothing else is firing: one leader, both ready, no fire left unrun.
others() {
  alerts | python3 -c '
import json, sys
print(" ".join(sorted({a["labels"]["alertname"] for a in json.load(sys.stdin)["data"]["alerts"]
                       if a["labels"]["alertname"] != "EjobItemRunsFailed"})))'
}
[ -z "$(others)" ] && pass "no other alert pending or firing" || fail "other alerts: $(others)"

echo "$FAILS failure(s)"; [ "$FAILS" = 0 ]
