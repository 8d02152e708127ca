#!/bin/bash
# Two `ejob run` daemons (two instances of one job) writing one PostgreSQL
# (Debian's server, initdb'd here as an unprivileged user, password from a
# passwordFile), then `ejob history` reading it back: both instances' runs,
# exit codes, stdout with a binary byte, stderr cut at outputMaxBytes, the
# status trail, and every run finished after SIGTERM (buffered history is
# written before the daemon exits); the filters --failed, --instance,
# --since and --until against the full listing.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/postgres" ]; then
  echo "SKIP: no PostgreSQL server in /usr/lib/postgresql (apt-get install postgresql)"
  exit 77
fi

FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }

PGD=$(mktemp -d "${TMPDIR:-/tmp}/ejob-pgsh-XXXXXX")
PG_PID=""
as_pg() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi; }
cleanup_all() {
  [ -n "$PG_PID" ] && { kill -KILL "$PG_PID" 2>/dev/null; wait "$PG_PID" 2>/dev/null; }
  zkf_cleanup
  rm -rf "$PGD"
}
trap cleanup_all EXIT

[ "$(id -u)" = 0 ] && chown 65534:65534 "$PGD"
echo "pg-$$-secret" >"$PGD/pw"
chmod 600 "$PGD/pw"
[ "$(id -u)" = 0 ] && chown 65534:65534 "$PGD/pw"
as_pg "$PGBIN/initdb" -D "$PGD/data" -U ejob -A scram-sha-256 --pwfile "$PGD/pw" -E UTF8 \
  --no-sync >"$PGD/initdb.log" 2>&1 || { cat "$PGD/initdb.log"; exit 1; }
PGPORT=$(zkf_free_port)
as_pg setpriv --pdeathsig KILL "$PGBIN/postgres" -D "$PGD/data" -p "$PGPORT" -k "$PGD" \
  -c listen_addresses=127.0.0.1 -c fsync=off >"$PGD/server.log" 2>&1 &
PG_PID=$!
for _ in $(seq 1 200); do
  "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" && break
  sleep 0.1
done
"$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" || { cat "$PGD/server.log"; exit 1; }
URL="postgresql://ejob@127.0.0.1:$PGPORT/postgres"
psql_1() { PGPASSWORD=$(cat "$PGD/pw") "$PGBIN/psql" -X -q -t -A -d "$URL" -c "$1"; }

zkf_start || exit 1
D=$ZKF_DIR/t
mkdir -p "$D"
cat >"$D/item.sh" <<'EOF'
#!/bin/sh
# item.sh CONTEXT: prints a binary byte on stdout, 500 bytes on stderr;
# item 1 fails with exit code 3.
item=$(printf '%s' "$1" | sed -n 's/.*"shardingItem":\([0-9]*\).*/\1/p')
printf 'item %s \001 done\n' "$item"
head -c 500 /dev/zero | tr '\000' e >&2
[ "$item" = 1 ] && exit 3
exit 0
EOF
chmod +x "$D/item.sh"
cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: tracepg
  sessionTimeoutMilliseconds: 4000
tracing:
  type: POSTGRESQL
  url: $URL
  passwordFile: $PGD/pw
  outputMaxBytes: 100
jobs:
  pgJob:
    elasticJobType: SCRIPT
    cron: "0/1 * * * * ?"
    shardingTotalCount: 4
    overwrite: true
    props:
      script.command.line: "$D/item.sh"
EOF

declare -A PID
for n in 1 2; do
  # In its own directory with core dumps on: a crash leaves a core there
  # (core_pattern "core") for the backtrace below.
  mkdir -p "$D/cwd$n"
  (cd "$D/cwd$n" && ulimit -c unlimited 2>/dev/null
   EJOB_IP=127.0.0.2$n EJOB_STATE_DIR=$D/state$n exec "$E" run -c "$D/jobs.yaml" \
     --drain-timeout-ms 5000 2>"$D/daemon$n.log") &
  PID[$n]=$!
  zkf_track "${PID[$n]}"
done
# Until both instances have finished runs on record (bounded; the machine
# may be loaded), then a couple more fires.
for _ in $(seq 1 600); do
  [ "$(psql_1 "SELECT count(DISTINCT ip) FROM job_execution_log WHERE complete_time IS NOT NULL" 2>/dev/null)" = 2 ] && break
  sleep 0.1
done
sleep 3
for n in 1 2; do kill -TERM "${PID[$n]}"; done
for n in 1 2; do
  rc=0; wait "${PID[$n]}" || rc=$?
  # The daemon's own words are the only clue to a failed exit: show them.
  if ! check "daemon $n exits 0 after SIGTERM (exit $rc)" [ "$rc" = 0 ]; then
    tail -n 60 "$D/daemon$n.log" >&2
    for core in "$D/cwd$n"/core*; do
      [ -f "$core" ] && command -v gdb >/dev/null &&
        gdb -q -batch -ex 'thread apply all bt' "$E" "$core" 2>&1 | tail -n 80 >&2
    done
  fi
  check "daemon $n wrote its history to PostgreSQL" grep -q "history: PostgreSQL" "$D/daemon$n.log"
  check "daemon $n closed the store with nothing lost" grep -q "PostgreSQL store closed: [0-9]* event(s) written$" "$D/daemon$n.log"
done

export EJOB_TRACING_PASSWORD
EJOB_TRACING_PASSWORD=$(cat "$PGD/pw")
J=$("$E" history --store "$URL" --json --limit 1000 pgJob)
instances=$(printf '%s' "$J" | python3 -c 'import json,sys; print(len({r["instance"] for r in json.load(sys.stdin)}))')
check "runs of both instances are in the history ($instances)" [ "$instances" = 2 ]
total=$(psql_1 "SELECT count(*) FROM job_execution_log WHERE job_name = 'pgJob'")
check "history lists every row ($total)" [ "$(printf '%s' "$J" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = "$total" ]
check "at least 8 runs recorded ($total)" [ "$total" -ge 8 ] || tail -n 15 "$D"/daemon*.log
unfinished=$(psql_1 "SELECT count(*) FROM job_execution_log WHERE complete_time IS NULL")
check "every run has its end written ($unfinished unfinished)" [ "$unfinished" = 0 ]
bad=$(printf '%s' "$J" | python3 -c '
import json, sys
bad = 0
for r in json.load(sys.stdin):
    want_ok = r["item"] != 1
    if r["success"] != want_ok or r["exitCode"] != (0 if want_ok else 3):
        bad += 1
print(bad)')
check "item 1 failed with exit 3, the others succeeded" [ "$bad" = 0 ]
check "status trail rows written" [ "$(psql_1 "SELECT count(*) FROM job_status_trace_log WHERE state = 'TASK_STAGING'")" -ge 4 ]

ID=$("$E" history --store "$URL" --item 0 --limit 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
"$E" history --store "$URL" show "$ID" >"$D/show.txt"
cat "$D/show.txt"
check "show: stdout with its binary byte escaped" grep -q '^  item 0 \\x01 done$' "$D/show.txt"
check "show: stderr cut at outputMaxBytes" grep -q '^stderr (100 bytes, cut at the cap):$' "$D/show.txt"
check "show: the fire's status trail" grep -q 'TASK_STAGING' "$D/show.txt"
SHOWJ=$(env -u EJOB_TRACING_PASSWORD "$E" history -c "$D/jobs.yaml" show "$ID" --json 2>"$D/c.err") || cat "$D/c.err"
check "history -c FILE reads the same store (passwordFile)" [ "$(printf '%s' "$SHOWJ" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["stdout"] == "item 0 \x01 done\n", len(d["stderr"]), d["stderrTruncated"])')" = "True 100 True" ]
"$E" history --store "$URL" --limit 6

# The filters of the command line, against what the full listing holds.
count_where() { printf '%s' "$J" | python3 -c "import json,sys; print(sum(1 for r in json.load(sys.stdin) if $1))"; }
rows() { "$E" history --store "$URL" --json --limit 1000 "$@" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
all_rows() { "$E" history --store "$URL" --json --limit 1000 "$@" | python3 -c "import json,sys; print(all($1 for r in json.load(sys.stdin)))"; }
want=$(count_where 'not r["success"]')
check "--failed lists the failed runs only ($want)" [ "$(rows --failed)" = "$want" ]
check "  ... of which there are some" [ "$want" -ge 1 ]
check "  ... each of them item 1" [ "$(all_rows 'r["item"] == 1 and not r["success"]' --failed)" = True ]
ONE=$(printf '%s' "$J" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["instance"])')
want=$(count_where "r['instance'] == '$ONE'")
check "--instance $ONE lists that instance's runs ($want)" [ "$(rows --instance "$ONE")" = "$want" ]
check "  ... and no other's" [ "$(all_rows "r['instance'] == '$ONE'" --instance "$ONE")" = True ]
# A whole second between the oldest and the newest run: --since keeps the
# runs started at or after it, --until those started before it.
MID=$(printf '%s' "$J" | python3 -c '
import json, sys
starts = sorted(r["start"][:19] for r in json.load(sys.stdin))
print(starts[len(starts) // 2])')
after=$(count_where "r['start'][:19] >= '$MID'")
before=$(count_where "r['start'][:19] < '$MID'")
check "--since $MID ($after runs)" [ "$(rows --since "$MID")" = "$after" ]
check "--until $MID ($before runs)" [ "$(rows --until "$MID")" = "$before" ]
check "  ... runs on both sides of $MID" [ "$before" -ge 1 -a "$after" -ge 1 ]
check "--since 1h holds every run" [ "$(rows --since 1h)" = "$total" ]
check "--since with a bad time is a usage error" bash -c '! "$0" history --store "$1" --since yesterday-ish >/dev/null 2>&1' "$E" "$URL"
# libpq's keyword form names the same database: PostgreSQL, not a SQLite
# file of that name.
KW="host=127.0.0.1 port=$PGPORT user=ejob dbname=postgres"
kw_rows=$(cd "$D" && "$E" history --store "$KW" --json --limit 1000 2>"$D/err" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
check "--store in keyword form reads the same history ($kw_rows rows)" [ "$kw_rows" = "$total" ]
# The console shows the store without a secret, in whatever form it was given.
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
cenv_console "$D/console.log" --no-auth --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/tracepg" \
  --store "postgresql://ejob@127.0.0.1:$PGPORT/postgres?sslmode=disable" || exit 1
STORE=$(curl -s --max-time 10 "$CENV_URL/api/history?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["store"])')
check "the console's /api/history names the store as \"$STORE\"" \
  [ "$STORE" = "postgresql: host=127.0.0.1 port=$PGPORT dbname=postgres user=ejob sslmode=disable" ]
kill -TERM "$CENV_CONSOLE_PID"; wait "$CENV_CONSOLE_PID"
unset EJOB_TRACING_PASSWORD
rc=0; "$E" history --store "postgresql://ejob:x@127.0.0.1:$PGPORT/postgres" >/dev/null 2>"$D/err" || rc=$?
check "a password in --store is refused (exit $rc)" [ "$rc" = 2 ]
check "  ... saying where passwords go" grep -q "EJOB_TRACING_PASSWORD" "$D/err"
rc=0; "$E" history --store "$KW password=s3cret" >/dev/null 2>"$D/kwerr" || rc=$?
check "a password in a keyword --store is refused (exit $rc)" [ "$rc" = 2 ]
check "  ... with the URI's words" cmp -s "$D/err" "$D/kwerr"
check "  ... and not echoed" bash -c '! grep -q s3cret "$0"' "$D/kwerr"
rc=0; "$E" console --no-auth --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/tracepg" --store "$KW password=s3cret" >"$D/kwcon" 2>&1 &
KWC=$!; zkf_track $KWC
for _ in $(seq 1 100); do kill -0 $KWC 2>/dev/null || break; sleep 0.1; done
kill -0 $KWC 2>/dev/null && { kill -TERM $KWC; fail "the console started with a password in a keyword --store"; }
wait $KWC; rc=$?
check "the console refuses a password in a keyword --store (exit $rc)" [ "$rc" = 1 ]
check "  ... saying where passwords go, not echoing it" bash -c 'grep -q "history store: .*EJOB_TRACING_PASSWORD" "$0" && ! grep -q s3cret "$0"' "$D/kwcon"
mkdir -p "$D/nohistory"
rc=0; "$E" history --state-dir "$D/nohistory" >/dev/null 2>"$D/err" || rc=$?
check "no history file: exit 1 (exit $rc)" [ "$rc" = 1 ]
check "  ... naming the file it looked for" grep -q "no history in $D/nohistory/history.db " "$D/err"

echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
