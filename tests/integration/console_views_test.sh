#!/bin/bash
# The console's views for time and scale, against a real ZooKeeper and a
# real SQLite file: a daemon under TZ=Asia/Shanghai writes runs that the
# console (TZ=UTC) lists as the right UTC instants; the job list pages,
# sorts and filters on the server and answers an unchanged poll with 304;
# history pages by cursor (older / newer) and searches captured output; a
# job shows its zone, next 5 fires and last fire, and its items waiting
# for failover.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
zkf_start || exit 1

FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
D=$ZKF_DIR
req() { # req PATH [curl args]: body in $BODY, status in $CODE, headers in $D/headers
  local p=$1; shift; rm -f "$D/body"
  CODE=$(curl -s -D "$D/headers" -o "$D/body" -w '%{http_code}' "$@" "$URL$p"); BODY=$(cat "$D/body")
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

cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: cviews
  sessionTimeoutMilliseconds: 3000
tracing:
  type: SQLITE
  url: $D/history.db
jobs:
  tickJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    timeZone: Asia/Shanghai
    overwrite: true
    props:
      script.command.line: "echo needle-\$RANDOM-in-output"
  dailyJob:
    elasticJobType: SCRIPT
    cron: "0 0 3 * * ?"
    shardingTotalCount: 2
    timeZone: America/New_York
    description: runs at three
    overwrite: true
    props:
      script.command.line: /bin/true
YAML
# The daemon's local time is Shanghai's (UTC+8): its instants must still be right.
TZ=Asia/Shanghai cenv_daemon 127.0.0.81 "$D/jobs.yaml"
TZ=UTC cenv_console "$D/console.log" --no-auth --listen 127.0.0.1:0 \
  --registry "$ZKF_CONNECT/cviews" --store "sqlite:$D/history.db" || exit 1
URL=$CENV_URL

# ---------------------------------------------------------------- instants
wait_json 60 '/api/history?job=tickJob&limit=5' 'len([e for e in d["executions"] if e["completed"]]) >= 3' True "the Shanghai daemon's runs are listed"
expect_json '[abs(__import__("datetime").datetime.fromisoformat(e["start"]).timestamp() - __import__("time").time()) < 60 for e in d["executions"]] == [True] * len(d["executions"])' True "each start is the UTC instant (within a minute of now, not 8 h off)"
expect_json 'all(e["start"].endswith("+00:00") for e in d["executions"])' True "instants carry an offset"
expect_json '[e["start"] for e in d["executions"]] == sorted([e["start"] for e in d["executions"]], reverse=True)' True "newest first by instant"
RUN=$(jq_ 'd["executions"][0]["id"]')
req "/api/history/$RUN"
expect_json 'all(abs(__import__("datetime").datetime.fromisoformat(s["time"]).timestamp() - __import__("time").time()) < 60 for s in d["statusTrail"]) and len(d["statusTrail"]) > 0' True "its status trail is read in the writer's zone"

# ---------------------------------------------------------------- history cursor and search
req '/api/history?job=tickJob&limit=2'
P1=$(jq_ '[e["id"] for e in d["executions"]]'); OLDER=$(jq_ 'd["older"]')
expect_json 'd["newer"]' None "the newest page has no newer page"
[ "$OLDER" != None ] && pass "the newest page has an older cursor" || fail "no older cursor: $BODY"
req "/api/history?job=tickJob&limit=2&before=$OLDER"; expect_code 200 "older page"
P2=$(jq_ '[e["id"] for e in d["executions"]]'); NEWER=$(jq_ 'd["newer"]')
python3 -c "import sys; a=$P1; b=$P2; sys.exit(0 if len(b)==2 and not set(a)&set(b) else 1)" && pass "the older page holds other runs" || fail "older page: $P1 / $P2"
req "/api/history?job=tickJob&limit=2&after=$NEWER"
expect_json '[e["id"] for e in d["executions"]]' "$P1" "newer from the older page gives the first page again"
req '/api/history?before=junk'; expect_code 400 "a bad cursor is refused"
grep -q 'before: ."junk." is not a cursor' <<<"$BODY" && pass "the bad cursor is named" || fail "bad cursor: $BODY"
req '/api/history?q=needle-&limit=1000'
expect_json 'len(d["executions"]) > 0 and all(e["job"] == "tickJob" for e in d["executions"])' True "output search finds the runs that printed it"
req '/api/history?q=no-such-text-printed&limit=1000'
expect_json 'len(d["executions"])' 0 "output search: nothing for text never printed"

# ---------------------------------------------------------------- job times
req /api/registries/cviews/jobs/dailyJob
expect_json 'd["timeZone"], len(d["nextFires"])' "America/New_York 5" "a job names its zone and its next 5 fires"
expect_json 'all(f[11:19] == "03:00:00" and f[-6:] in ("-05:00", "-04:00") for f in d["nextFires"])' True "next fires in the job's zone (03:00 New York)"
expect_json 'd["items"][0]["failoverWaiting"]' False "items say whether they wait for failover"
wait_json 30 /api/registries/cviews/jobs/tickJob 'd["lastFire"] is not None and d["lastFire"].endswith("+08:00")' True "the last fire, from the fire ledger, in the job's zone"

# ---------------------------------------------------------------- job list
req '/api/registries/cviews/jobs?limit=1&sort=name'
expect_json 'd["total"], len(d["jobs"]), d["jobs"][0]["jobName"]' "2 1 dailyJob" "paged: total 2, one per page, by name"
expect_json 'd["jobs"][0]["timeZone"], d["jobs"][0]["nextFire"][11:19], d["connected"]' "America/New_York 03:00:00 True" "the list shows zone and next fire"
req '/api/registries/cviews/jobs?limit=1&offset=1&sort=name&order=desc'; expect_json 'd["jobs"][0]["jobName"]' dailyJob "descending, second page"
req '/api/registries/cviews/jobs?q=THREE'; expect_json '[j["jobName"] for j in d["jobs"]]' "['dailyJob']" "filter by text (name or description, any case)"
req '/api/registries/cviews/jobs?sort=bogus'; expect_code 400 "unknown sort refused"
req '/api/registries/cviews/jobs?q=daily'
ETAG=$(sed -n 's/^ETag: \(.*\)\r$/\1/Ip' "$D/headers")
[ -n "$ETAG" ] && pass "the list has an ETag" || fail "no ETag: $(cat "$D/headers")"
req '/api/registries/cviews/jobs?q=daily' -H "If-None-Match: $ETAG"
expect_code 304 "an unchanged list polled with its ETag"
[ ! -s "$D/body" ] && pass "304 has no body" || fail "304 body: $BODY"
req '/api/registries/cviews/jobs?q=daily' -H 'If-None-Match: W/"0000000000000000"'; expect_code 200 "another ETag gets the list"
"$E" disable dailyJob --server 127.0.0.81 -r "$ZKF_CONNECT/cviews" >/dev/null || fail "ejob disable"
sleep 1
req '/api/registries/cviews/jobs?q=daily' -H "If-None-Match: $ETAG"
expect_code 200 "a changed list is sent again"
expect_json 'd["jobs"][0]["disabledServers"], d["jobs"][0]["disabledServerIps"]' "1 ['127.0.0.81']" "the list shows the disabled server"

[ "$FAILS" = 0 ] && echo "PASS" || { echo "$FAILS failure(s)"; exit 1; }
