#!/bin/bash
# `ejob console`'s history routes against a real ZooKeeper and a real SQLite
# file: two `ejob run` daemons write their runs (a job that succeeds and
# prints a binary byte and markup, a job that fails with stderr), one is
# killed with -9 in the middle of a run so the other runs its item as
# FAILOVER; the console (store from its settings file, and from --store)
# lists them with every filter, shows one run with its status trail and
# output escaped, lets a guest read and refuses no session, refuses bad
# filters and bad store names, and reads on after the file appears late.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
zkf_start || exit 1

FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
D=$ZKF_DIR
JAR=$D/jar
req() { # req PATH [URL]: body in $BODY, status in $CODE (GET with the cookie jar)
  CODE=$(curl -s -o "$D/body" -w '%{http_code}' -b "$JAR" -c "$JAR" "${2:-$URL}$1"); BODY=$(cat "$D/body")
}
expect_code() { [ "$CODE" = "$1" ] && pass "$2 (HTTP $CODE)" || fail "$2: HTTP $CODE, wanted $1: $BODY"; }
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" <<<"$BODY"; }
expect_json() { local got; got=$(jq_ "$1" 2>&1); [ "$got" = "$2" ] && pass "$3" || fail "$3: $1 is '$got', wanted '$2' in $BODY"; }
wait_json() { # SECS PATH EXPR WANT WHAT
  local end=$((SECONDS + $1)) got=
  while [ $SECONDS -lt $end ]; do
    req "$2"; got=$(jq_ "$3" 2>/dev/null)
    [ "$got" = "$4" ] && { pass "$5"; return 0; }
    sleep 0.3
  done
  fail "$5: $3 is '$got', wanted '$4' (not within $1 s): $BODY"; return 1
}

# ---------------------------------------------------------------- jobs
cat >"$D/ok.sh" <<'EOF'
#!/bin/sh
# Prints markup and a byte that is not UTF-8; on instance .71, while the
# file "slow" exists, stays in the run (so it can be killed mid-run).
item=$(printf '%s' "$1" | sed -n 's/.*"shardingItem":\([0-9]*\).*/\1/p')
printf 'item %s <b>bold</b> \377 done\n' "$item"
if [ "$EJOB_IP" = 127.0.0.71 ]; then
  while [ -f "$(dirname "$0")/slow" ]; do sleep 0.2; done
fi
exit 0
EOF
cat >"$D/fail.sh" <<'EOF'
#!/bin/sh
echo 'boom <img src=x onerror=alert(1)> on stderr' >&2
exit 3
EOF
chmod +x "$D/ok.sh" "$D/fail.sh"
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: chist
  sessionTimeoutMilliseconds: 3000
tracing:
  type: SQLITE
  url: $D/history.db
jobs:
  okJob:
    elasticJobType: SCRIPT
    cron: "0/2 * * * * ?"
    shardingTotalCount: 2
    failover: true
    overwrite: true
    props:
      script.command.line: $D/ok.sh
  failJob:
    elasticJobType: SCRIPT
    cron: "0/2 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: $D/fail.sh
YAML

ADMIN_HASH=$(cenv_hash 'adm1n pass')
GUEST_HASH=$(cenv_hash 'guest-pass')
cat >"$D/console.yaml" <<YAML
listen: 127.0.0.1:0
registries:
  - {name: chist, serverLists: "$ZKF_CONNECT", namespace: chist}
accounts:
  - {name: alice, role: admin, passwordHash: "$ADMIN_HASH"}
  - {name: gus, role: guest, passwordHash: "$GUEST_HASH"}
history:
  store: sqlite:$D/history.db
YAML
chmod 600 "$D/console.yaml"

# ---------------------------------------------------------------- refusals at start-up
out=$("$E" console --no-auth --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/chist" --store 'postgresql://u:secret@127.0.0.1/db' 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'history store: .*password' <<<"$out" && pass "password in --store refused" || fail "password in --store: $rc $out"
out=$("$E" console --no-auth --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/chist" --store 'mysql://x/y' 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'history store' <<<"$out" && pass "unknown store scheme refused" || fail "mysql store: $rc $out"
out=$("$E" console --no-auth --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/chist" --store 'postgresql://u@127.0.0.1/db' --store-password-file "$D/nosuch" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "history store password: .*nosuch" <<<"$out" && pass "missing password file refused, named" || fail "password file: $rc $out"
printf 'registries: []\nhistory: {store: "sqlite:/x", password: p}\n' >"$D/pw.yaml"; chmod 600 "$D/pw.yaml"
out=$("$E" console --no-auth -c "$D/pw.yaml" 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'pw.yaml:2:.*passwordFile' <<<"$out" && pass "password in the settings file refused" || fail "settings password: $rc $out"

# The console starts before any daemon wrote the file: it says so, then reads it.
cenv_console "$D/console.log" -c "$D/console.yaml" || exit 1
URL=$CENV_URL
grep -q "history from sqlite:$D/history.db" "$D/console.log" && pass "start-up line names the store" || fail "start-up: $(cat "$D/console.log")"
req /api/history; expect_code 401 "no session: history"
req /api/history/abc; expect_code 401 "no session: one run"
req /api/registries/chist/jobs/okJob/fires; expect_code 401 "no session: fires"
CODE=$(curl -s -o "$D/body" -w '%{http_code}' -c "$JAR" -H 'Content-Type: application/json' --data '{"user":"gus","password":"guest-pass"}' "$URL/api/login")
BODY=$(cat "$D/body"); expect_code 200 "guest login"
req /api/history; expect_code 503 "no history file yet"
grep -q 'no history in .*history.db yet' <<<"$BODY" && pass "says the file is not there yet" || fail "no file: $BODY"

cenv_daemon 127.0.0.71 "$D/jobs.yaml"; P71=$CENV_PID
cenv_daemon 127.0.0.72 "$D/jobs.yaml"; P72=$CENV_PID

# ---------------------------------------------------------------- lists
wait_json 60 '/api/history?job=failJob&limit=1' 'len(d["executions"])' 1 "a failed run is listed (guest may read)"
expect_json 'd["store"]' "sqlite:$D/history.db" "the reply names the store"
wait_json 60 '/api/history?job=failJob&limit=1' 'd["executions"][0]["completed"]' True "the failed run ended"
expect_json 'd["executions"][0]["success"], d["executions"][0]["exitCode"]' "False 3" "failed run: not a success, exit 3"
FAIL_ID=$(jq_ 'd["executions"][0]["id"]')
wait_json 60 '/api/registries/chist/jobs/okJob/history?failed=false' '"127.0.0.71" in {e["ip"] for e in d["executions"] if e["completed"]} and "127.0.0.72" in {e["ip"] for e in d["executions"] if e["completed"]}' True "runs of both instances under the job's route"
expect_json '{e["job"] for e in d["executions"]}' "{'okJob'}" "the job's route lists only that job"
req '/api/history?failed=true&limit=1000'; expect_code 200 "failed filter"
expect_json '{e["job"] for e in d["executions"]} == {"failJob"} and all(not e["success"] for e in d["executions"])' True "failed=true: only failed runs"
req '/api/history?job=okJob&item=1&limit=1000'; expect_json '{e["item"] for e in d["executions"]}' "{1}" "item filter"
req '/api/history?instance=127.0.0.72@-@'"$P72"'&limit=1000'; expect_json '{e["instance"] for e in d["executions"]}' "{'127.0.0.72@-@$P72'}" "instance filter"
req '/api/history?limit=3'; expect_json 'len(d["executions"]), d["limit"]' "3 3" "limit"
req '/api/history?since=1s&until=1s'; expect_json 'len(d["executions"])' 0 "since/until window with nothing in it"
req '/api/history?since=2000-01-01&job=failJob'; expect_json 'len(d["executions"]) >= 1' True "since as a date"
req '/api/history?until=2000-01-01'; expect_json 'len(d["executions"])' 0 "until a date before every run"
for bad in 'limit=0' 'limit=x' 'item=-1' 'failed=maybe' 'since=yesterday' 'job=a/b' 'job=..'; do
  req "/api/history?$bad"; expect_code 400 "bad filter $bad"
done
req '/api/history?since=yesterday'; expect_json 'd["error"].startswith("since: \"yesterday\" is neither a duration")' True "a bad filter is named"

# ---------------------------------------------------------------- the fire ledger
wait_json 60 '/api/registries/chist/jobs/failJob/fires' 'any(f["ran"] and f["result"] == "failed" and f["item"] == 0 and f["kind"] == "CRON" for f in d["fires"])' True "fires: failJob's fire times, its runs failed"
expect_json 'all(f["fireTimeMs"] % 2000 == 0 for f in d["fires"] if f["kind"] == "CRON") and {f["job"] for f in d["fires"]} == {"failJob"}' True "fires: cron fire times of that job only"
expect_json 'sorted(d["fires"][0].keys())' "['attempts', 'executionId', 'fireTime', 'fireTimeMs', 'instance', 'item', 'job', 'kind', 'ran', 'reason', 'recorded', 'result', 'why']" "fires: the row's fields"
req '/api/registries/chist/jobs/okJob/fires?item=1&since=10m'; expect_json '{f["item"] for f in d["fires"]} <= {1, -1} and len(d["fires"]) > 0' True "fires: item filter"
req '/api/registries/chist/jobs/okJob/fires?gaps=true'; expect_json 'all(not f["ran"] and f["why"] for f in d["fires"])' True "fires: gaps=true, only rows not run, with why"
for bad in 'gaps=maybe' 'item=x' 'limit=0' 'since=yesterday'; do
  req "/api/registries/chist/jobs/okJob/fires?$bad"; expect_code 400 "fires: bad filter $bad"
done

# ---------------------------------------------------------------- one run
req "/api/history/$FAIL_ID"; expect_code 200 "one failed run"
expect_json 'd["stderr"] == "boom <img src=x onerror=alert(1)> on stderr\n", d["stderrBinary"]' "True False" "its stderr, as text"
expect_json '[s["state"] for s in d["statusTrail"]][-1]' TASK_ERROR "its status trail ends in TASK_ERROR"
expect_json 'd["statusTrail"][0]["state"]' TASK_STAGING "its status trail starts at TASK_STAGING"
req "/api/history/${FAIL_ID:0:8}"; expect_json 'd["id"]' "$FAIL_ID" "an id prefix finds the run"
req '/api/history?job=okJob&limit=1'; OK_ID=$(jq_ 'd["executions"][0]["id"]')
req "/api/history/$OK_ID"; expect_code 200 "one successful run"
expect_json 'd["stdoutBinary"], "<b>bold</b> \\xff done" in d["stdout"]' "True True" "stdout with a non-UTF-8 byte comes as text with \\xff"
req /api/history/00000000-no-such-run; expect_code 404 "unknown run"
req /api/history/%25; expect_code 404 "a LIKE wildcard is no prefix"
# 17 ids: two of them share a first hex digit (pigeonhole).
wait_json 60 '/api/history?limit=1000' 'len(d["executions"]) >= 17' True "17 runs on record"
SHARED=$(jq_ '__import__("collections").Counter(e["id"][0] for e in d["executions"]).most_common(1)[0][0]')
req "/api/history/$SHARED"; expect_code 400 "a prefix matching several runs"

# ---------------------------------------------------------------- failover
touch "$D/slow"
wait_json 60 '/api/history?job=okJob&instance=127.0.0.71@-@'"$P71" '[e["completed"] for e in d["executions"]][0]' False "instance .71 is in a run"
kill -KILL "$P71"; wait "$P71" 2>/dev/null
rm -f "$D/slow"
wait_json 60 '/api/history?job=okJob&limit=1000' '"FAILOVER" in [e["source"] for e in d["executions"] if e["ip"] == "127.0.0.72"]' True "the killed instance's item ran again as FAILOVER"
expect_json '[e["completed"] for e in d["executions"] if e["instance"] == "127.0.0.71@-@'"$P71"'"][0]' False "the killed run stays unfinished"

# ---------------------------------------------------------------- --store on the command line
cenv_console "$D/console2.log" --no-auth --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/chist" --store "$D/history.db" || exit 1
req "/api/history/$FAIL_ID" "$CENV_URL"; expect_code 200 "--store PATH reads the same run"
expect_json 'd["exitCode"]' 3 "--store PATH: same row"
kill -TERM "$CENV_CONSOLE_PID"

echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
