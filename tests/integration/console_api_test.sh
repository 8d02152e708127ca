#!/bin/bash
# `ejob console`'s REST API against a real ZooKeeper with two `ejob run`
# daemons: login and roles (no session 401, guest writing 403, bad CSRF
# token 403), every operation, config editing refused by the validator with
# the field named, version conflicts, the server view, LEADER_LOST and
# config errors in the job list, failover seen through the API after kill -9,
# the server view's disable and enable of every job of one IP (each job's
# servers/IP node DISABLED and back, read with `ejob status`, the items
# moving off that server and back; other servers untouched),
# the audit log, session expiry, start-up refusals, and TLS with a
# self-signed certificate made here.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
zkf_start || exit 1

FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
D=$ZKF_DIR
# req METHOD PATH [JSON] [extra curl args]: body in $BODY, status in $CODE.
JAR=$D/admin.jar
CSRF=
req() {
  local m=$1 p=$2 data=${3:-}; shift 3 2>/dev/null || shift $#
  local args=(-s -o "$D/body" -w '%{http_code}' -X "$m" -b "$JAR" -c "$JAR" "$@")
  [ -n "$CSRF" ] && args+=(-H "X-CSRF-Token: $CSRF")
  [ -n "$data" ] && args+=(-H 'Content-Type: application/json' --data "$data")
  CODE=$(curl "${args[@]}" "$URL$p"); BODY=$(cat "$D/body")
}
expect_code() { [ "$CODE" = "$1" ] && pass "$2 (HTTP $CODE)" || fail "$2: HTTP $CODE, wanted $1: $BODY"; }
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" <<<"$BODY"; }
expect_json() { local got; got=$(jq_ "$1" 2>&1); [ "$got" = "$2" ] && pass "$3" || fail "$3: $1 is '$got', wanted '$2' in $BODY"; }
wait_json() { # SECS PATH EXPR WANT WHAT
  local end=$((SECONDS + $1)) got=
  while [ $SECONDS -lt $end ]; do
    req GET "$2"; got=$(jq_ "$3" 2>/dev/null)
    [ "$got" = "$4" ] && { pass "$5"; return 0; }
    sleep 0.3
  done
  fail "$5: $3 is '$got', wanted '$4' (not within $1 s): $BODY"; return 1
}

# ---------------------------------------------------------------- set-up
cenv_job_yaml "$D/a.yaml" capi apiJob 4
cenv_daemon 127.0.0.51 "$D/a.yaml"; P51=$CENV_PID
cenv_daemon 127.0.0.52 "$D/a.yaml"; P52=$CENV_PID
# A namespace where two servers each run two jobs, for the server view.
cenv_job_yaml "$D/srv.yaml" srv srvA 2
cat >>"$D/srv.yaml" <<YAML
  srvB:
    elasticJobType: SCRIPT
    cron: "0/2 * * * * ?"
    shardingTotalCount: 2
    overwrite: true
    props:
      script.command.line: /bin/true
YAML
cenv_daemon 127.0.0.53 "$D/srv.yaml"; P53=$CENV_PID
cenv_daemon 127.0.0.54 "$D/srv.yaml"; P54=$CENV_PID
# A second namespace with jobs laid out by hand: one whose config the
# validator refuses, one whose leader node names an instance that is gone.
zkf_cli create /other "" >/dev/null
zkf_cli create /other/badJob "" >/dev/null
zkf_cli create /other/badJob/config '{"jobName":"badJob","jobType":"SCRIPT","cron":"0/2 * * * * ?","shardingTotalCount":0,"scriptCommandLine":"/bin/true"}' >/dev/null
for p in /other/lostJob /other/lostJob/instances /other/lostJob/leader /other/lostJob/leader/election /other/lostJob/servers /other/lostJob/servers/10.0.0.1 /other/lostJob/sharding /other/lostJob/sharding/0; do zkf_cli create "$p" "" >/dev/null; done
zkf_cli create /other/lostJob/config '{"jobName":"lostJob","jobType":"SCRIPT","cron":"0/2 * * * * ?","shardingTotalCount":1,"scriptCommandLine":"/bin/true"}' >/dev/null
zkf_cli create /other/lostJob/instances/10.0.0.1@-@1 "" >/dev/null
zkf_cli create /other/lostJob/sharding/0/instance "10.0.0.1@-@1" >/dev/null
zkf_cli create /other/lostJob/leader/election/instance "10.0.0.9@-@9" >/dev/null
# A job with settings Java ignores, shared with an instance that holds no
# ejob marker (a Java one); its node as an earlier ejob wrote BALANCED.
for p in /other/tzJob /other/tzJob/instances /other/tzJob/instances/10.0.0.3@-@3; do zkf_cli create "$p" "" >/dev/null; done
zkf_cli create /other/tzJob/config '{"jobName":"tzJob","jobType":"SCRIPT","cron":"0/2 * * * * ?","shardingTotalCount":1,"scriptCommandLine":"/bin/true","jobShardingStrategyClass":"BALANCED","timeZone":"Asia/Shanghai"}' >/dev/null

ADMIN_HASH=$(cenv_hash 'adm1n pass')
GUEST_HASH=$(cenv_hash 'guest-pass')
case "$ADMIN_HASH" in '$y$'*) pass "hash-password gives a yescrypt hash";; *) fail "hash: $ADMIN_HASH";; esac
[ "$ADMIN_HASH" != "$(cenv_hash 'adm1n pass')" ] && pass "hashes are salted" || fail "same hash twice"
cat >"$D/console.yaml" <<YAML
listen: 127.0.0.1:0
auditLog: $D/audit.log
registries:
  - {name: capi, serverLists: "$ZKF_CONNECT", namespace: capi}
  - {name: other, serverLists: "$ZKF_CONNECT", namespace: other}
  - {name: srv, serverLists: "$ZKF_CONNECT", namespace: srv}
accounts:
  - {name: alice, role: admin, passwordHash: "$ADMIN_HASH"}
  - {name: gus, role: guest, passwordHash: "$GUEST_HASH"}
YAML
chmod 600 "$D/console.yaml"

# ---------------------------------------------------------------- refusals at start-up
out=$("$E" console --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/capi" 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'no accounts' <<<"$out" && pass "no accounts and no --no-auth: refused" || fail "started without accounts: $rc $out"
out=$("$E" console --no-auth --listen 0.0.0.0:0 --registry "$ZKF_CONNECT/capi" 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'only allowed on a loopback' <<<"$out" && pass "--no-auth off loopback: refused" || fail "--no-auth on 0.0.0.0: $rc $out"
cp "$D/console.yaml" "$D/open.yaml"; chmod 666 "$D/open.yaml"
out=$("$E" console -c "$D/open.yaml" 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'others may write it' <<<"$out" && pass "world-writable settings: refused" || fail "world-writable settings: $rc $out"
printf 'accounts:\n  - {name: x, role: admin, password: secret}\nregistries: []\n' >"$D/plain.yaml"; chmod 600 "$D/plain.yaml"
out=$("$E" console -c "$D/plain.yaml" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "plain.yaml:2:.*plain passwords are not accepted" <<<"$out" && pass "plain password refused with FILE:LINE" || fail "plain password: $rc $out"

cenv_console "$D/console.log" -c "$D/console.yaml" || exit 1
URL=$CENV_URL
pass "console serving at $URL"

# ---------------------------------------------------------------- authentication
req GET /api/registries/capi/jobs; expect_code 401 "no session: jobs"
req POST /api/registries/capi/jobs/apiJob/trigger '{}'; expect_code 401 "no session: trigger"
req GET /api/session; expect_code 401 "no session: session"
req POST /api/registries/capi/jobs/apiJob/trigger 'not json'; expect_code 401 "no session: a bad body is not even read"
req GET /; expect_code 200 "the page itself needs no session"
grep -q '<script src="/app.js">' <<<"$BODY" && pass "page served from the binary" || fail "page: $BODY"
req GET /app.js; expect_code 200 "script served"
req POST /api/login '{"user":"alice","password":"wrong"}'; expect_code 401 "wrong password"
req POST /api/login '{"user":"nobody","password":"x"}'; expect_code 401 "unknown user"
req POST /api/login '{"user":"alice","password":"adm1n pass"}'; expect_code 200 "admin login"
CSRF=$(jq_ 'd["csrfToken"]')
grep -q 'HttpOnly' <<<"$(curl -s -i -X POST -H 'Content-Type: application/json' --data '{"user":"alice","password":"adm1n pass"}' "$URL/api/login" | grep -i '^set-cookie')" && pass "cookie is HttpOnly" || fail "cookie not HttpOnly"
curl -s -i -X POST -H 'Content-Type: application/json' --data '{"user":"alice","password":"adm1n pass"}' "$URL/api/login" | grep -i '^set-cookie' | grep -q 'SameSite=Strict' && pass "cookie is SameSite=Strict" || fail "cookie not SameSite=Strict"
req GET /api/session; expect_code 200 "session"; expect_json 'd["role"]' admin "admin role"

# ---------------------------------------------------------------- queries
req GET /api/registries; expect_code 200 "registries"
expect_json 'len(d)' 3 "three registries"
wait_json 30 /api/registries/capi/jobs 'd["jobs"][0]["status"]' OK "apiJob OK once both daemons run"
expect_json 'd["jobs"][0]["instanceCount"]' 2 "two instances"
req GET /api/registries/capi/jobs/apiJob; expect_code 200 "job detail"
expect_json 'len(d["items"])' 4 "four items"
expect_json 'd["items"][0]["parameter"]' Beijing "item parameter"
expect_json 'sorted(s["ip"] for s in d["servers"])' "['127.0.0.51', '127.0.0.52']" "two servers"
req GET /api/registries/other/jobs; expect_code 200 "jobs of the second namespace"
expect_json '[j["status"] for j in d["jobs"] if j["jobName"]=="lostJob"][0]' LEADER_LOST "leader naming no live instance: LEADER_LOST"
expect_json '[j["configError"] for j in d["jobs"] if j["jobName"]=="badJob"][0]' "shardingTotalCount: must be >= 1, got 0" "config error shown, naming the field"
# The same verdicts in `ejob jobs` and `ejob status`.
out=$("$E" jobs --registry "$ZKF_CONNECT/other" 2>"$D/jobs.err")
grep -qE '^lostJob +LEADER_LOST .* 10\.0\.0\.9@-@9 \(gone\)' <<<"$out" && pass "ejob jobs: LEADER_LOST, leader (gone)" || fail "ejob jobs: $out"
grep -q 'job "badJob": config error: shardingTotalCount: must be >= 1, got 0' "$D/jobs.err" && pass "ejob jobs: config error on stderr" || fail "ejob jobs stderr: $(cat "$D/jobs.err")"
out=$("$E" status lostJob --registry "$ZKF_CONNECT/other")
grep -q '^Leader: *10.0.0.9@-@9 (not a live instance' <<<"$out" && pass "ejob status flags the lost leader" || fail "ejob status: $out"
req GET /api/registries/other/jobs/tzJob; expect_code 200 "tzJob detail"
expect_json 'd["javaInstances"]' "['10.0.0.3@-@3']" "the instance without an ejob marker is flagged as Java"
expect_json 'd["javaIgnores"]' "['jobShardingStrategyType', 'timeZone']" "the settings Java ignores"
req GET /api/registries/other/jobs/lostJob; expect_code 200 "lostJob detail"
expect_json 'd["javaInstances"]' "[]" "no flag for a job without ejob-only settings"
out=$("$E" status tzJob --registry "$ZKF_CONNECT/other")
grep -q '^Java: *10.0.0.3@-@3 is no ejob instance: it ignores jobShardingStrategyType, timeZone' <<<"$out" && pass "ejob status flags the Java instance" || fail "ejob status: $out"
req GET /api/registries/nosuch/jobs; expect_code 404 "unknown registry"
req GET /api/registries/capi/jobs/nosuch; expect_code 404 "unknown job"
req GET /api/registries/capi/jobs/apiJob/history; expect_code 404 "history without a history store: 404"
expect_json 'd["configured"]' False "history says no store is configured"
grep -q 'no history store is configured: start the console with --store' <<<"$BODY" && pass "history says why and how" || fail "history: $BODY"
req GET /api/registries/capi/servers; expect_code 200 "servers"
expect_json '[s["jobs"][0]["jobName"] for s in d]' "['apiJob', 'apiJob']" "server view lists the job per server"

# ---------------------------------------------------------------- CSRF and roles
SAVED=$CSRF
CSRF=; req POST /api/registries/capi/jobs/apiJob/trigger '{}'; expect_code 403 "write without CSRF token"
CSRF=deadbeef; req POST /api/registries/capi/jobs/apiJob/trigger '{}'; expect_code 403 "write with a bad CSRF token"
CSRF=$SAVED
req POST /api/registries/capi/jobs/apiJob/trigger 'not json'; expect_code 400 "a body that is not a JSON object"
GJAR=$D/guest.jar
CODE=$(curl -s -o "$D/body" -w '%{http_code}' -c "$GJAR" -H 'Content-Type: application/json' --data '{"user":"gus","password":"guest-pass"}' "$URL/api/login"); BODY=$(cat "$D/body")
expect_code 200 "guest login"; GCSRF=$(jq_ 'd["csrfToken"]')
CODE=$(curl -s -o "$D/body" -w '%{http_code}' -b "$GJAR" "$URL/api/registries/capi/jobs"); expect_code 200 "guest reads"
for route in "POST /api/registries/capi/jobs/apiJob/trigger" "POST /api/registries/capi/jobs/apiJob/disable" "POST /api/registries/capi/servers/127.0.0.51/shutdown" "PUT /api/registries/capi/jobs/apiJob/config" "DELETE /api/registries/capi/jobs/apiJob"; do
  set -- $route
  CODE=$(curl -s -o "$D/body" -w '%{http_code}' -b "$GJAR" -X "$1" -H "X-CSRF-Token: $GCSRF" -H 'Content-Type: application/json' --data '{}' "$URL$2")
  expect_code 403 "guest $1 $2"
done

# ---------------------------------------------------------------- operations
req POST /api/registries/capi/jobs/apiJob/trigger '{}'; expect_code 200 "trigger"
expect_json 'len(d["targets"])' 2 "trigger reached both instances"
req POST /api/registries/capi/jobs/apiJob/trigger '{"instance":"9.9.9.9@-@1"}'; expect_code 404 "trigger an unknown instance"
req POST /api/registries/capi/jobs/apiJob/kill '{"item":1}'; expect_code 200 "kill item 1"
expect_json 'd["targets"][0].startswith("kill-")' True "kill names its request"
KILLNODE=$(zkf_cli get "/capi/apiJob/kills/$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["targets"][0])' "$BODY" 2>/dev/null)" | tr '\n' ' ')
grep -q "item=1 instance= server= by=console:alice" <<<"$KILLNODE" && pass "the kill request in ZooKeeper names the item and the console user" || fail "kill node: $KILLNODE"
req POST /api/registries/capi/jobs/apiJob/kill '{"item":"x"}'; expect_code 400 "kill with a bad item"
req POST /api/registries/capi/jobs/apiJob/disable '{"server":"127.0.0.51"}'; expect_code 200 "disable one server"
[ "$(zkf_cli get /capi/apiJob/servers/127.0.0.51)" = DISABLED ] && pass "servers/127.0.0.51 is DISABLED in ZooKeeper" || fail "server node not DISABLED"
wait_json 20 /api/registries/capi/jobs/apiJob 'sorted(set(i["instanceId"].split("@")[0] for i in d["items"]))' "['127.0.0.52']" "items move off the disabled server"
req POST /api/registries/capi/jobs/apiJob/disable '{"server":"10.1.1.1"}'; expect_code 404 "disable an unknown server"
req POST /api/registries/capi/jobs/apiJob/enable '{}'; expect_code 200 "enable every server"
wait_json 10 /api/registries/capi/jobs/apiJob '[s["disabled"] for s in d["servers"]]' "[False, False]" "servers enabled"
req POST /api/registries/capi/jobs/apiJob/items/3/disable '{}'; expect_code 200 "disable item 3"
wait_json 10 /api/registries/capi/jobs/apiJob 'd["items"][3]["status"]' DISABLED "item 3 DISABLED"
req POST /api/registries/capi/jobs/apiJob/items/9/disable '{}'; expect_code 404 "disable an item the job does not have"
req POST /api/registries/capi/jobs/apiJob/items/3/enable '{}'; expect_code 200 "enable item 3"
req DELETE /api/registries/capi/jobs/apiJob; expect_code 409 "remove with live instances"
grep -q 'live instance' <<<"$BODY" && pass "remove refusal says why" || fail "remove: $BODY"

# ---------------------------------------------------------------- server view: every job of one IP
# server_states JOB: each server of the job and its state, as `ejob status` reads ZooKeeper.
server_states() {
  "$E" status "$1" --json --registry "$ZKF_CONNECT/srv" 2>&1 |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(sorted((s["ip"], s["status"]) for s in d["servers"]))' 2>&1
}
owners() { echo "sorted(set((i[\"instanceId\"] or \"-\").split(\"@\")[0] for i in d[\"items\"]))"; }
SRVS='sorted((s["ip"], s["jobCount"], s["disabledJobCount"]) for s in d)'
wait_json 30 /api/registries/srv/servers "$SRVS" "[('127.0.0.53', 2, 0), ('127.0.0.54', 2, 0)]" "srv: two servers with two jobs each"
for j in srvA srvB; do
  wait_json 30 /api/registries/srv/jobs/$j "$(owners)" "['127.0.0.53', '127.0.0.54']" "$j: items on both servers"
done
req POST /api/registries/srv/servers/127.0.0.53/disable '{}'; expect_code 200 "server view: disable every job of 127.0.0.53"
expect_json 'sorted(d["jobs"])' "['srvA', 'srvB']" "disable-all names both jobs of the IP"
for j in srvA srvB; do
  got=$(server_states $j)
  [ "$got" = "[('127.0.0.53', 'DISABLED'), ('127.0.0.54', 'ENABLED')]" ] \
    && pass "ejob status $j: 127.0.0.53 DISABLED, 127.0.0.54 untouched" || fail "ejob status $j after disable-all: $got"
  [ "$(zkf_cli get /srv/$j/servers/127.0.0.53)" = DISABLED ] && pass "/srv/$j/servers/127.0.0.53 holds DISABLED" \
    || fail "/srv/$j/servers/127.0.0.53: '$(zkf_cli get /srv/$j/servers/127.0.0.53)'"
done
req GET /api/registries/srv/servers
expect_json "$SRVS" "[('127.0.0.53', 2, 2), ('127.0.0.54', 2, 0)]" "server view counts both jobs of .53 disabled"
for j in srvA srvB; do
  wait_json 20 /api/registries/srv/jobs/$j "$(owners)" "['127.0.0.54']" "$j: every item moves to 127.0.0.54"
done
req POST /api/registries/srv/servers/127.0.0.53/enable '{}'; expect_code 200 "server view: enable every job of 127.0.0.53"
expect_json 'sorted(d["jobs"])' "['srvA', 'srvB']" "enable-all names both jobs of the IP"
for j in srvA srvB; do
  got=$(server_states $j)
  [ "$got" = "[('127.0.0.53', 'ENABLED'), ('127.0.0.54', 'ENABLED')]" ] \
    && pass "ejob status $j: 127.0.0.53 enabled again" || fail "ejob status $j after enable-all: $got"
done
req GET /api/registries/srv/servers
expect_json "$SRVS" "[('127.0.0.53', 2, 0), ('127.0.0.54', 2, 0)]" "server view: nothing disabled"
for j in srvA srvB; do
  wait_json 20 /api/registries/srv/jobs/$j "$(owners)" "['127.0.0.53', '127.0.0.54']" "$j: items back on both servers"
done
req POST /api/registries/srv/servers/10.9.9.9/disable '{}'; expect_code 404 "server view: an IP no job names"
kill -TERM "$P53" "$P54"; wait "$P53" "$P54" 2>/dev/null

# ---------------------------------------------------------------- config editing
req GET /api/registries/capi/jobs/apiJob/config; expect_code 200 "config get"
VER=$(jq_ 'd["version"]'); CFG=$(jq_ 'json.dumps(d["config"])')
BAD=$(python3 -c 'import json,sys; c=json.loads(sys.argv[1]); c["shardingTotalCount"]=0; c["cron"]="0 0 0 30 2 ? x"; print(json.dumps({"version":int(sys.argv[2]),"config":c}))' "$CFG" "$VER")
req PUT /api/registries/capi/jobs/apiJob/config "$BAD"; expect_code 422 "invalid config refused"
expect_json 'sorted(e["field"] for e in d["errors"])' "['cron', 'shardingTotalCount']" "each error names its field"
STALE=$(python3 -c 'import json,sys; c=json.loads(sys.argv[1]); c["cron"]="0/3 * * * * ?"; print(json.dumps({"version":int(sys.argv[2])-1 if int(sys.argv[2])>0 else 99,"config":c}))' "$CFG" "$VER")
req PUT /api/registries/capi/jobs/apiJob/config "$STALE"; expect_code 409 "write at a stale version refused"
GOOD=$(python3 -c 'import json,sys; c=json.loads(sys.argv[1]); c["cron"]="0/3 * * * * ?"; print(json.dumps({"version":int(sys.argv[2]),"config":c}))' "$CFG" "$VER")
req PUT /api/registries/capi/jobs/apiJob/config "$GOOD"; expect_code 200 "valid config written"
expect_json 'd["changed"]' True "config changed"
zkf_cli get /capi/apiJob/config | grep -q '"cron":"0/3 \* \* \* \* ?"' && pass "new cron in ZooKeeper" || fail "config node: $(zkf_cli get /capi/apiJob/config)"
req PUT /api/registries/capi/jobs/apiJob/config '{"config":{}}'; expect_code 400 "config write without a version"

# ---------------------------------------------------------------- failover through the API
kill -KILL "$P51"
wait_json 30 /api/registries/capi/jobs/apiJob 'sorted(set((i["instanceId"] or "-").split("@")[0] for i in d["items"]))' "['127.0.0.52']" "after kill -9 of .51 every item is owned by .52"
req POST /api/registries/capi/servers/127.0.0.52/shutdown '{}'; expect_code 200 "server view: shut down every job on .52"
expect_json 'd["jobs"]' "['apiJob']" "shutdown reached apiJob"
wait_json 10 /api/registries/capi/jobs 'd["jobs"][0]["status"]' CRASHED "no instance left: CRASHED"

# ---------------------------------------------------------------- audit, logout, expiry
grep -q '"user":"alice","auth":"session","role":"admin",.*"method":"POST","path":"/api/registries/capi/jobs/apiJob/trigger","result":200' "$D/audit.log" && pass "audit line for a write" || fail "audit log: $(cat "$D/audit.log")"
grep -q '"user":"alice",.*"path":"/api/registries/capi/jobs/apiJob/kill","result":200.*"item":1' "$D/audit.log" && pass "audit line for a kill, with its item" || fail "no kill in the audit log: $(grep kill "$D/audit.log")"
grep -q '"user":"gus","auth":"session","role":"viewer",.*"result":403' "$D/audit.log" && pass "audit line for a refused write" || fail "no refused write in the audit log"
grep -q '"method":"PUT","path":"/api/registries/capi/jobs/apiJob/config","result":422,"error":"' "$D/audit.log" && pass "audit line names the error" || fail "no 422 line"
grep -q 'adm1n' "$D/audit.log" "$D/console.log" "$D/console.log.err" && fail "a password reached a log" || pass "no password in the logs"
req POST /api/logout '{}'; expect_code 200 "logout"
req GET /api/registries; expect_code 401 "after logout: 401"

sed -e 's/^listen: .*/listen: 127.0.0.1:0\nsessionTimeoutSeconds: 2/' "$D/console.yaml" >"$D/short.yaml"; chmod 600 "$D/short.yaml"
cenv_console "$D/short.log" -c "$D/short.yaml" || exit 1
URL=$CENV_URL; JAR=$D/short.jar; CSRF=
req POST /api/login '{"user":"alice","password":"adm1n pass"}'; expect_code 200 "login (2 s sessions)"
req GET /api/registries; expect_code 200 "fresh session works"
sleep 3
req GET /api/registries; expect_code 401 "idle session expired"

# ---------------------------------------------------------------- TLS
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/key.pem" -out "$D/cert.pem" -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 || fail "openssl could not make a cert"
cenv_console "$D/tls.log" -c "$D/console.yaml" --tls-cert "$D/cert.pem" --tls-key "$D/key.pem" || exit 1
case "$CENV_URL" in https://*) pass "TLS console says https";; *) fail "url $CENV_URL";; esac
TLSURL=$CENV_URL
hdrs=$(curl -s -i --cacert "$D/cert.pem" -H 'Content-Type: application/json' --data '{"user":"alice","password":"adm1n pass"}' "$TLSURL/api/login")
grep -q '^HTTP/[0-9.]* 200' <<<"$hdrs" && pass "login over TLS, certificate verified" || fail "TLS login: $hdrs"
grep -i '^set-cookie' <<<"$hdrs" | grep -q 'Secure' && pass "cookie is Secure over TLS" || fail "cookie not Secure"
CODE=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$D/cert.pem" "$TLSURL/api/registries"); expect_code 401 "TLS: no session 401"
plain=${TLSURL/https:/http:}
curl -s -m 5 "$plain/api/session" >/dev/null 2>&1 && fail "plain HTTP answered on the TLS port" || pass "plain HTTP refused on the TLS port"
out=$("$E" console -c "$D/console.yaml" --tls-cert "$D/cert.pem" 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'both certFile and keyFile' <<<"$out" && pass "cert without key refused" || fail "cert alone: $rc $out"

# ---------------------------------------------------------------- SIGTERM stops it
kill -TERM "$CENV_CONSOLE_PID"; t=0
while kill -0 "$CENV_CONSOLE_PID" 2>/dev/null && [ $t -lt 50 ]; do sleep 0.1; t=$((t + 1)); done
kill -0 "$CENV_CONSOLE_PID" 2>/dev/null && fail "console still running 5 s after SIGTERM" || pass "SIGTERM stops the console"

echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
