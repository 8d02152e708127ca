#!/bin/bash
# `ejob history` lists runs newest first, as its --help says: the table in
# the order of --json, and --limit N keeps the newest N. The store is a
# SQLite file made here with the tables the daemon writes (no ZooKeeper:
# the command only reads the store).
set -u
E=${EJOB:?EJOB must name the ejob binary}
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$(mktemp -d "${TMPDIR:-/tmp}/ejob-history-test-XXXXXX")
trap 'rm -rf "$D"' EXIT

# Three runs of one job, inserted out of time order: ids aaa (10:00:05),
# bbb (10:00:00), ccc (10:00:10).
sqlite3 "$D/history.db" <<'SQL'
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
INSERT INTO JOB_EXECUTION_LOG VALUES
  ('aaaaaaaa-0001', 'orderJob', 't', 'h', '127.0.0.1', 0, 'NORMAL_TRIGGER', NULL, 1,
   '2026-01-01 10:00:05.000', '2026-01-01 10:00:06.000'),
  ('bbbbbbbb-0002', 'orderJob', 't', 'h', '127.0.0.1', 1, 'NORMAL_TRIGGER', NULL, 1,
   '2026-01-01 10:00:00.000', '2026-01-01 10:00:01.000'),
  ('cccccccc-0003', 'orderJob', 't', 'h', '127.0.0.1', 2, 'FAILOVER', NULL, 1,
   '2026-01-01 10:00:10.000', '2026-01-01 10:00:11.000');
SQL

ids_text() { "$E" history --store "sqlite:$D/history.db" "$@" | awk 'NR > 1 {print $NF}' | tr '\n' ' '; }
ids_json() {
  "$E" history --store "sqlite:$D/history.db" --json "$@" |
    python3 -c 'import json,sys; print(" ".join(r["id"][:8] for r in json.load(sys.stdin)), end=" ")'
}

"$E" history --store "sqlite:$D/history.db"
"$E" history --help | grep -q "newest first" && pass "--help says newest first" || fail "--help no longer says newest first"
T=$(ids_text)
[ "$T" = "cccccccc aaaaaaaa bbbbbbbb " ] && pass "the table lists newest first ($T)" ||
  fail "the table is not newest first: $T"
J=$(ids_json)
[ "$T" = "$J" ] && pass "the table and --json list the same order" || fail "table \"$T\", --json \"$J\""
T=$(ids_text --limit 2)
[ "$T" = "cccccccc aaaaaaaa " ] && pass "--limit 2: the newest two, newest first ($T)" ||
  fail "--limit 2 shows $T"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
