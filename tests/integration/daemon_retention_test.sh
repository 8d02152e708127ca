#!/bin/bash
# Per-job retention in a daemon: jobs' tracing.retentionDays and
# tracing.failedRetentionDays decide what the daemon's retention pass keeps
# of each job, over the daemon's own tracing.retentionDays (7), and the
# rules are written to the store (EJOB_JOB_RETENTION) for every daemon
# sharing it. Old rows are put into the SQLite store before the daemon
# starts; its first pass runs 5 s after start. A real ZooKeeper.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D/state"
export EJOB_STATE_DIR=$D/state
DPID=""
cleanup() {
  [ -n "$DPID" ] && { kill -KILL "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }
  zkf_cleanup
}
trap cleanup EXIT
ago() { date -d "-$1 days" '+%Y-%m-%d %H:%M:%S.000'; }
# row ID JOB DAYS-AGO IS_SUCCESS
row() {
  echo "INSERT INTO JOB_EXECUTION_LOG VALUES ('$1', '$2', 't', 'h', '127.0.0.1', 0, 'NORMAL_TRIGGER', NULL, $4, '$(ago "$3")', '$(ago "$3")');"
  echo "INSERT INTO EJOB_EXECUTION_DETAIL VALUES ('$1', 'i', '$(ago "$3")', 5, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0);"
}
{
  cat <<'SQL'
CREATE TABLE JOB_EXECUTION_LOG (id VARCHAR(40) NOT NULL, job_name VARCHAR(100) NOT NULL,
  task_id VARCHAR(255) NOT NULL, hostname VARCHAR(255) NOT NULL, ip VARCHAR(50) NOT NULL,
  sharding_item INT NOT NULL, execution_source VARCHAR(20) NOT NULL,
  failure_cause VARCHAR(4000) NULL, is_success INT NOT NULL, start_time TIMESTAMP NULL,
  complete_time TIMESTAMP NULL, PRIMARY KEY (id));
CREATE TABLE EJOB_EXECUTION_DETAIL (id VARCHAR(40) NOT NULL, instance_id VARCHAR(255) NOT NULL,
  start_time TIMESTAMP NULL, duration_ms BIGINT NULL, fencing_token BIGINT NOT NULL,
  exit_code INT NULL, term_signal INT NULL, http_status INT NULL, stdout BLOB NULL,
  stdout_truncated INT NOT NULL, stderr BLOB NULL, stderr_truncated INT NOT NULL,
  failure_cause_truncated INT NOT NULL, PRIMARY KEY (id));
SQL
  row keep-10 keepJob 10 1      # kept: keepJob keeps 30 days
  row keep-40 keepJob 40 1      # purged
  row fail-ok-2 failJob 2 1     # purged: failJob keeps 1 day
  row fail-bad-2 failJob 2 0    # kept: its failed runs 5 days
  row fail-bad-6 failJob 6 0    # purged
  row other-10 otherJob 10 1    # purged: the daemon's 7 days
  row other-3 otherJob 3 1      # kept
} | sqlite3 "$D/history.db"
NS=ret$$
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: $NS
tracing:
  type: SQLITE
  url: $D/history.db
  retentionDays: 7
jobs:
  keepJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 1
    overwrite: true
    tracing:
      retentionDays: 30
    props:
      script.command.line: /bin/true
  failJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 1
    overwrite: true
    tracing: {retentionDays: 1, failedRetentionDays: 5}
    props:
      script.command.line: /bin/true
  otherJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/true
YAML
"$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
DPID=$!
q() { sqlite3 "$D/history.db" "$1" 2>/dev/null; }
rules() { q "SELECT group_concat(job_name || '=' || retention_days || '/' || failed_retention_days, ' ') FROM (SELECT * FROM EJOB_JOB_RETENTION ORDER BY job_name)"; }
has_rules() { [ "$(rules)" = "failJob=1/5 keepJob=30/-1" ]; }
wait_for 60 "the jobs' rules in the store" has_rules
purged() { [ "$(q "SELECT count(*) FROM JOB_EXECUTION_LOG WHERE id = 'other-10'")" = 0 ]; }
wait_for 30 "the first retention pass" purged
left=$(q "SELECT group_concat(id, ' ') FROM (SELECT id FROM JOB_EXECUTION_LOG ORDER BY id)")
[ "$left" = "fail-bad-2 keep-10 other-3" ] && pass "kept by each job's rule: $left" ||
  fail "left after the pass: \"$left\" (want fail-bad-2 keep-10 other-3)"
details=$(q "SELECT group_concat(id, ' ') FROM (SELECT id FROM EJOB_EXECUTION_DETAIL ORDER BY id)")
[ "$details" = "$left" ] && pass "the details went with their runs" || fail "details left: $details"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
