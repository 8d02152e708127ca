#!/bin/bash
# `ejob run` with an HTTP job: every item calls the URL; a 2xx is a success,
# anything else a failure, both logged as events.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D/www"
# Its own state directory (history.db, an embedded registry), never the
# user's default one.
export EJOB_STATE_DIR=$D/state
echo ok >"$D/www/ok"
HPORT=$(zkf_free_port)
python3 -m http.server "$HPORT" --bind 127.0.0.1 --directory "$D/www" 2>"$D/http.log" >/dev/null &
zkf_track $!
up() { (echo >"/dev/tcp/127.0.0.1/$HPORT") 2>/dev/null; }
wait_for 20 "http server up" up

cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: http
  sessionTimeoutMilliseconds: 4000
jobs:
  pingJob:
    elasticJobType: HTTP
    cron: "0/1 * * * * ?"
    shardingTotalCount: 2
    overwrite: true
    props:
      http.uri: http://127.0.0.1:$HPORT/ok
      http.method: GET
  missingJob:
    elasticJobType: HTTP
    cron: "0/1 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      http.uri: http://127.0.0.1:$HPORT/missing
EOF
EJOB_IP=127.0.0.61 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
P=$!; zkf_track $P
wait_for 30 "daemon started with 2 jobs" logged "$D/daemon.log" "running 2 job"
wait_for 15 "both items of pingJob called the URL" logged "$D/http.log" '"GET /ok HTTP/1.1" 200'
requests() { [ "$(grep -c '"GET /ok HTTP/1.1" 200' "$D/http.log")" -ge 4 ]; }
wait_for 15 "pingJob keeps calling every second" requests
wait_for 15 "a 404 is a failed item" grep -qE 'job=missingJob item=0 .*(fail|404)' "$D/daemon.log"
grep -qE 'job=pingJob item=[01] .*succeeded' "$D/daemon.log" && pass "a 200 is a successful item" || fail "no success event for pingJob"
"$E" status pingJob --registry "$ZKF_CONNECT/http" | grep -q '^Type: *HTTP  GET http://127.0.0.1' && pass "status shows the HTTP job" || fail "status of the HTTP job"
kill -TERM $P; wait $P; RC=$?
[ $RC -eq 0 ] && pass "SIGTERM: exit 0" || fail "exit $RC"
echo "$FAILS failure(s)"
exit $((FAILS > 0))
