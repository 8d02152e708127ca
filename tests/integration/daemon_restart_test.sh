#!/bin/bash
# Shut down and bring back: an operator's shutdown (`ejob shutdown`, the
# console) makes an `ejob run` instance leave the job while the daemon runs
# on (/readyz 503, the console's job shows the instance "shut down" and
# restartable, its server not just ENABLED); `ejob start JOB --instance ID`
# and the console's restart (through the ejob-only marker in ZooKeeper)
# start the job again in the daemon: it runs again and /readyz is 200.
# A SIGHUP does the same for every job of the file.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
export EJOB_REGISTRY="$ZKF_CONNECT/rst"

D=$ZKF_DIR/t
mkdir -p "$D"
export EJOB_STATE_DIR=$D/state
PORT=$(zkf_free_port)
URL=http://127.0.0.1:$PORT
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: rst
  sessionTimeoutMilliseconds: 4000
jobs:
  okJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 2
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'date +%s%N >> $D/okJob.runs'
  otherJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/true
YAML
EJOB_IP=127.0.0.61 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" \
  --metrics-listen "127.0.0.1:$PORT" --drain-timeout-ms 2000 2>"$D/daemon.log" &
P=$!
zkf_track $P
status_of() { curl -s -o "$D/body" -w '%{http_code}' "$URL$1"; }
is_status() { [ "$(status_of "$1")" = "$2" ]; }
runs() { wc -l <"$D/okJob.runs" 2>/dev/null || echo 0; }
runs_grow() { local n; n=$(runs); sleep 2.2; [ "$(runs)" -gt "$n" ]; }
wait_for 30 "the daemon is ready" is_status /readyz 200
wait_for 10 "okJob runs" test -s "$D/okJob.runs"
ID=$(zkf_cli ls /rst/okJob/instances | tr -d '[] ')
[ -n "$ID" ] && pass "okJob's instance is $ID" || fail "no instance of okJob"
MARKER=/rst/okJob/ejob/instances/$ID

# -------------------------------------------------------- shut down (CLI)
"$E" shutdown okJob --instance "$ID" >"$D/out" 2>&1 && pass "ejob shutdown" || fail "ejob shutdown: $(cat "$D/out")"
wait_for 10 "readyz 503 naming okJob" eval 'is_status /readyz 503 && grep -q "job okJob: stopped" "$D/body"'
wait_for 10 "the daemon marks its marker SHUTDOWN" eval '[ "$(zkf_cli get "$MARKER" | tail -1)" = SHUTDOWN ]'
logged "$D/daemon.log" "ejob start okJob --instance $ID" && pass "the log says how to start it again" || fail "no hint in the log"
runs_grow && fail "okJob still runs after its shutdown" || pass "okJob no longer runs"

"$E" status okJob >"$D/status" 2>&1
grep -q "^Shut down:  $ID: restart needed (ejob start okJob --instance $ID)$" "$D/status" \
  && pass "ejob status names the way back" || fail "ejob status: $(cat "$D/status")"
grep -q "^127.0.0.61 *SHUT DOWN *0$" "$D/status" && pass "ejob status: its server SHUT DOWN" || fail "no SHUT DOWN server row"

# The console shows the instance shut down and restartable.
cenv_console "$D/console.log" --no-auth --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/rst" || exit 1
REG=$(curl -s "$CENV_URL/api/registries" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["name"])')
JOB_URL=$CENV_URL/api/registries/$REG/jobs/okJob
curl -s "$JOB_URL" >"$D/job.json"
py() { python3 -c "import json,sys; d=json.load(open('$D/job.json')); print($1)"; }
[ "$(py 'len(d["instances"])')" = 0 ] && pass "no live instance" || fail "instances: $(py 'd["instances"]')"
[ "$(py '[(s["instanceId"], s["restartable"]) for s in d["shutDown"]]')" = "[('$ID', True)]" ] \
  && pass "the API names the shut-down instance, restartable" || fail "shutDown: $(py 'd.get("shutDown")')"
[ "$(py '[(s["ip"], s["instanceCount"], s["shutDownCount"]) for s in d["servers"]]')" = "[('127.0.0.61', 0, 1)]" ] \
  && pass "its server: 0 instances, 1 shut down" || fail "servers: $(py 'd["servers"]')"

# ------------------------------------------------------- bring back (CLI)
"$E" start okJob --instance "$ID" >"$D/out" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "^started okJob instance $ID$" "$D/out" && pass "ejob start: $(cat "$D/out")" || fail "ejob start: rc $rc $(cat "$D/out")"
wait_for 10 "readyz 200 again" is_status /readyz 200
wait_for 10 "okJob runs again" runs_grow
[ "$(zkf_cli get "$MARKER" | tail -1)" != SHUTDOWN ] && pass "the new marker is not SHUTDOWN" || fail "marker still SHUTDOWN"
"$E" start okJob --instance "$ID" >"$D/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "does not wait for a restart" "$D/out" && pass "start of a running instance: refused" || fail "start again: rc $rc $(cat "$D/out")"
"$E" start otherJob --instance 10.9.9.9@-@1 >"$D/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "restart its process" "$D/out" && pass "an unknown instance: named" || fail "unknown: rc $rc $(cat "$D/out")"

# -------------------------------------- shut down and restart (console API)
SESSION=$(curl -s -c "$D/cookies" "$CENV_URL/api/session")
CSRF=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("csrfToken",""))' "$SESSION")
post() { curl -s -b "$D/cookies" -o "$D/body" -w '%{http_code}' -H 'Content-Type: application/json' \
  -H "X-CSRF-Token: $CSRF" --data "$2" "$JOB_URL/$1"; }
[ "$(post shutdown "{\"instance\":\"$ID\"}")" = 200 ] && pass "console shutdown" || fail "console shutdown: $(cat "$D/body")"
wait_for 10 "readyz 503 again" is_status /readyz 503
wait_for 10 "the API shows it shut down" eval "curl -s '$JOB_URL' | grep -q '\"restartable\": *true'"
[ "$(post restart "{\"instance\":\"$ID\"}")" = 200 ] && pass "console restart" || fail "console restart: $(cat "$D/body")"
wait_for 15 "readyz 200 after the console's restart" is_status /readyz 200
wait_for 10 "okJob runs after the console's restart" runs_grow
[ "$(post restart "{\"instance\":\"$ID\"}")" = 404 ] && pass "restart of a running instance: 404" || fail "restart again: $(cat "$D/body")"

# ------------------------------------------------------- SIGHUP brings back
"$E" shutdown okJob --instance "$ID" >/dev/null 2>&1
wait_for 10 "readyz 503 before the SIGHUP" is_status /readyz 503
kill -HUP $P
wait_for 15 "the reload restarts okJob" logged "$D/daemon.log" "0 changed, 1 unchanged, 1 restarted"
wait_for 15 "readyz 200 after the SIGHUP" is_status /readyz 200
wait_for 10 "okJob runs after the SIGHUP" runs_grow

kill -TERM $P
wait $P 2>/dev/null; rc=$?
[ $rc = 0 ] && pass "the daemon stops cleanly" || fail "daemon exit $rc: $(tail -5 "$D/daemon.log")"
echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
