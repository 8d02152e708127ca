#!/bin/bash
# overlapPolicy with a real `ejob run` daemon and ZooKeeper (items that run
# longer than the cron period):
#   - REPLACE: at the next fire time the running item is killed (recorded as
#     killed by "overlapPolicy REPLACE") and the new run starts only after
#     the old one ended;
#   - SKIP: the fire times that come while the item runs are not run, with
#     reason "overlap"; no misfire re-run;
#   - QUEUE (default): ElasticJob's misfire re-run.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
export EJOB_REGISTRY="$ZKF_CONNECT/overlap"

D=$ZKF_DIR
DB=$D/history.db
cat >"$D/long.sh" <<'EOF'
#!/bin/sh
# long.sh MARKS SECONDS
echo "start $$ $(date +%s%3N)" >>"$1"
sleep "$2"
echo "end $$ $(date +%s%3N)" >>"$1"
EOF
chmod +x "$D/long.sh"
job() { # NAME POLICY SECONDS
  cat <<YAML
  $1:
    elasticJobType: SCRIPT
    cron: "0/3 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    overlapPolicy: $2
    props:
      script.command.line: $D/long.sh $D/$1.marks $3
YAML
}
{ cat <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: overlap
tracing:
  type: SQLITE
  url: $DB
jobs:
YAML
  job replaceJob REPLACE 20; job skipJob SKIP 4; job queueJob QUEUE 4; } >"$D/jobs.yaml"
EJOB_IP=127.0.0.71 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" >>"$D/daemon.log" 2>&1 &
zkf_track $!
wait_for 30 "daemon started" logged "$D/daemon.log" "running 3 job"
two_starts() { [ "$(grep -c '^start' "$D/$1.marks" 2>/dev/null)" -ge 2 ]; }
wait_for 20 "REPLACE: a second run started" two_starts replaceJob
hist() { "$E" history "$1" --store "sqlite:$DB" --json 2>/dev/null; }
replaced() {
  hist replaceJob | python3 -c '
import json, sys
from datetime import datetime
rows = sorted(json.load(sys.stdin), key=lambda r: r["start"])
assert len(rows) >= 2 and rows[0]["completed"], rows
a, b = rows[0], rows[1]
assert a["result"] == "killed" and a["killedBy"] == "overlapPolicy REPLACE", a
assert b["source"] == "MISFIRE", b
assert b["start"] >= a["complete"], (a["complete"], b["start"])
'
}
wait_for 10 "REPLACE: the old run was killed before the new one started (new one a MISFIRE run)" replaced
read -r _ P1 T1 < <(grep '^start' "$D/replaceJob.marks" | head -1)
read -r _ P2 T2 < <(grep '^start' "$D/replaceJob.marks" | sed -n 2p)
[ $((T2 - T1)) -lt 4500 ] && pass "REPLACE: the new run started $((T2 - T1)) ms after the old one (period 3 s)" || fail "REPLACE gap $((T2 - T1)) ms"
[ -z "$(ps -eo pgid=,stat= | awk -v g="$P1" '$1 == g && $2 !~ /^Z/')" ] && pass "REPLACE: the old run's group is gone" || fail "old group alive"

overlap_rows() { [ "$(sqlite3 "$DB" "SELECT count(*) FROM JOB_STATUS_TRACE_LOG WHERE job_name = 'skipJob' AND message LIKE '%fire not run (overlap)%'")" -ge 1 ]; }
wait_for 20 "SKIP: a fire time that came while the item ran is not run (overlap)" overlap_rows
sleep 3
N=$(hist skipJob | python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if r["source"] == "MISFIRE"))')
[ "$N" = 0 ] && pass "SKIP: no misfire re-run" || fail "SKIP: $N misfire runs"
Q=$(hist queueJob | python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if r["source"] == "MISFIRE"))')
[ "$Q" -ge 1 ] && pass "QUEUE: the overlapping fire ran as a misfire re-run" || fail "QUEUE: no misfire run"
echo "$FAILS failure(s)"
exit $((FAILS > 0))
