#!/bin/bash
# `ejob console` against a hostile client, over HTTP on loopback with a real
# ZooKeeper and a daemon: a forged Host (DNS rebinding) gets 421 and no
# data, with --no-auth too; writes and logins from another Origin 403; a
# login must be JSON; 405 with Allow and HEAD; the cookie's Max-Age
# refreshed on use; audit lines that user names and URLs cannot forge;
# login throttling answered at once (429, Retry-After); a slowloris of 300
# connections and a flood of 100 parallel wrong logins leave an admin's job
# list under 200 ms; API tokens (create, Bearer without CSRF, list with last
# use, revoke); every route x every role, by session and by token; TLS 1.2+
# only, forward-secret suites, HSTS.
# EJ_SEC_REPORT=1 prints the latencies measured.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
zkf_start || exit 1
D=$ZKF_DIR
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
# code METHOD URL [curl args...]: the status; body in $D/body, headers in $D/headers.
code() {
  local m=$1 u=$2; shift 2
  curl -s -o "$D/body" -D "$D/headers" -w '%{http_code}' -X "$m" "$@" "$u"
}
expect() { [ "$1" = "$2" ] && pass "$3 ($1)" || fail "$3: got $1, wanted $2: $(head -c 300 "$D/body")"; }
header() { tr -d '\r' <"$D/headers" | sed -n "s/^$1: //Ip" | head -1; }
jfield() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))" "$D/body" "$1" 2>/dev/null; }

cenv_job_yaml "$D/a.yaml" sec secJob 2
cenv_job_yaml "$D/b.yaml" sec2 batchJob 1
cenv_daemon 127.0.0.71 "$D/a.yaml"
cenv_daemon 127.0.0.72 "$D/b.yaml"

# ---------------------------------------------------------------- --no-auth and Host
cenv_console "$D/noauth.log" --no-auth --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/sec" || exit 1
NA=$CENV_URL; NA_PORT=${NA##*:}
c=$(code GET "$NA/api/session" -H "Host: rebind.attacker.example:$NA_PORT")
expect "$c" 421 "--no-auth: a forged Host gets 421"
grep -q csrfToken "$D/body" && fail "a forged Host got the CSRF token" || pass "a forged Host gets no data"
c=$(code GET "$NA/api/registries/sec/jobs" -H "Host: rebind.attacker.example")
expect "$c" 421 "--no-auth: forged Host on the job list"
c=$(code GET "$NA/" -H "Host: rebind.attacker.example:$NA_PORT"); expect "$c" 421 "forged Host on the page"
c=$(code GET "$NA/api/session" -H "Host: localhost:$NA_PORT"); expect "$c" 200 "Host localhost"
NA_CSRF=$(jfield csrfToken)
c=$(code POST "$NA/api/registries/sec/jobs/secJob/items/1/disable" -H "X-CSRF-Token: $NA_CSRF" \
  -H 'Origin: http://rebind.attacker.example' -H 'Content-Type: application/json' --data '{}')
expect "$c" 403 "--no-auth: a write from another Origin"
c=$(code POST "$NA/api/registries/sec/jobs/secJob/items/1/disable" -H "X-CSRF-Token: $NA_CSRF" \
  -H "Origin: http://127.0.0.1:$NA_PORT" -H 'Content-Type: application/json' --data '{}')
expect "$c" 200 "--no-auth: a write from its own Origin"
code POST "$NA/api/registries/sec/jobs/secJob/items/1/enable" -H "X-CSRF-Token: $NA_CSRF" \
  -H 'Content-Type: application/json' --data '{}' >/dev/null

# ---------------------------------------------------------------- accounts
ADMIN_HASH=$(cenv_hash 'adm1n pass')
# A SHA-512 hash made before yescrypt keeps working.
OLD_HASH=$(python3 -c "import crypt; print(crypt.crypt('olga pass 1', '\$6\$saltsalt\$'))" 2>/dev/null ||
  perl -e 'print crypt("olga pass 1", q($6$saltsalt$)), "\n"')
V_HASH=$(cenv_hash 'viewer pass')
cat >"$D/console.yaml" <<YAML
listen: 127.0.0.1:0
auditLog: $D/audit.log
requestTimeoutSeconds: 3
registries:
  - {name: sec, serverLists: "$ZKF_CONNECT", namespace: sec}
  - {name: sec2, serverLists: "$ZKF_CONNECT", namespace: sec2}
accounts:
  - {name: alice, role: admin, passwordHash: "$ADMIN_HASH"}
  - {name: olga, role: viewer, roles: {sec: operator}, passwordHash: "$OLD_HASH"}
  - {name: vic, role: guest, passwordHash: "$V_HASH"}
YAML
chmod 600 "$D/console.yaml"
cenv_console "$D/console.log" --config "$D/console.yaml" || exit 1
URL=$CENV_URL; PORT=${URL##*:}
login() { # login USER PASSWORD JAR [curl args...]
  local u=$1 p=$2 jar=$3; shift 3
  code POST "$URL/api/login" -c "$jar" -H 'Content-Type: application/json' \
    --data "{\"user\":\"$u\",\"password\":\"$p\"}" "$@"
}
c=$(code POST "$URL/api/login" -H 'Content-Type: text/plain' --data '{"user":"alice","password":"adm1n pass"}')
expect "$c" 415 "a text/plain login (login CSRF)"
c=$(login alice 'adm1n pass' "$D/x.jar" -H 'Origin: http://evil.example')
expect "$c" 403 "a login from another Origin"
c=$(login alice 'adm1n pass' "$D/alice.jar" -H "Origin: http://127.0.0.1:$PORT"); expect "$c" 200 "admin login"
A_CSRF=$(jfield csrfToken)
c=$(login olga 'olga pass 1' "$D/olga.jar"); expect "$c" 200 "a SHA-512 hash still logs in"
O_CSRF=$(jfield csrfToken)
python3 -c "import json;d=json.load(open('$D/body'));assert d['roles']=={'sec':'operator','sec2':'viewer'},d" &&
  pass "the session lists the role per registry" || fail "roles: $(cat "$D/body")"
c=$(login vic 'viewer pass' "$D/vic.jar"); expect "$c" 200 "viewer (guest) login"
V_CSRF=$(jfield csrfToken)

# The cookie's Max-Age follows the session: each use sends it again.
c=$(code GET "$URL/api/session" -b "$D/alice.jar")
header Set-Cookie | grep -q '^ejob_session=[0-9a-f]\{64\}; .*Max-Age=1800' &&
  pass "the cookie is refreshed on use" || fail "no refreshed cookie: $(cat "$D/headers")"

# 405 with Allow, HEAD.
c=$(code PUT "$URL/api/registries" -b "$D/alice.jar" -H "X-CSRF-Token: $A_CSRF")
expect "$c" 405 "PUT on a read-only route"; [ "$(header Allow)" = "GET, HEAD" ] && pass "Allow: GET, HEAD" || fail "Allow: $(header Allow)"
c=$(code GET "$URL/api/registries/sec/jobs/secJob/trigger" -b "$D/alice.jar")
expect "$c" 405 "GET on a POST route"; [ "$(header Allow)" = "POST" ] && pass "Allow: POST" || fail "Allow: $(header Allow)"
c=$(code POST "$URL/api/login" -X GET); expect "$c" 405 "GET /api/login"
c=$(curl -s -o /dev/null -w '%{http_code}' -I -b "$D/alice.jar" "$URL/api/registries/sec/jobs"); expect "$c" 200 "HEAD on the API"
c=$(code DELETE "$URL/" ); expect "$c" 405 "DELETE on the page"; [ "$(header Allow)" = "GET, HEAD" ] && pass "page Allow" || fail "page Allow: $(header Allow)"
c=$(code GET "$URL/api/nothing" -b "$D/alice.jar"); expect "$c" 404 "an unknown API path"

# ---------------------------------------------------------------- audit lines
NL_USER='mallory\n2026-11-27T01:50:00Z ejob-console audit user=alice role=admin action=\"DELETE x\" result=200'
code POST "$URL/api/login" -H 'Content-Type: application/json' --data "{\"user\":\"$NL_USER\",\"password\":\"x\"}" >/dev/null
code POST "$URL/api/registries/sec%0a2026-11-27T01:50:00Z%20forged/jobs/secJob/trigger" -b "$D/vic.jar" \
  -H "X-CSRF-Token: $V_CSRF" -H 'Content-Type: application/json' --data '{}' >/dev/null
login alice 'wrong password' "$D/x.jar" --interface 127.0.0.5 >/dev/null
python3 - "$D/audit.log" <<'EOF' && pass "every audit line is one JSON object; injected newlines stay inside fields" || fail "audit log: $(cat "$D/audit.log")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
rows = [json.loads(l) for l in lines]
assert any(r["user"].startswith("mallory\n2026") and r["result"] == 401 for r in rows if r["user"]), rows
assert any("\n2026-11-27T01:50:00Z forged" in r["path"] for r in rows), rows
assert not any(l.startswith("2026") for l in lines), lines
assert any(r["user"] == "alice" and r["role"] == "admin" and r["result"] == 401 for r in rows), "a failed login of an admin's name is logged with its real role"
EOF

# ---------------------------------------------------------------- throttling, slow clients
JOBS="$URL/api/registries/sec/jobs"
# latency N: the slowest of N admin job-list requests, in ms.
latency() {
  local worst=0 t i out
  for i in $(seq 1 "$1"); do
    out=$(curl -s -o /dev/null -m 10 -w '%{http_code} %{time_total}' -b "$D/alice.jar" "$JOBS")
    [ "${out% *}" = 200 ] || { echo 99999; return; }
    t=$(python3 -c "print(int(float('${out#* }')*1000))")
    [ "$t" -gt "$worst" ] && worst=$t
    sleep 0.2
  done
  echo "$worst"
}
BASE=$(latency 5)
# 300 slow connections from ten loopback addresses (30 each), a header line
# every 3 s for 15 s; 40 more from one address (over its limit).
cat >"$D/slowloris.py" <<'EOF'
import socket, sys, time
port = int(sys.argv[1]); socks = []; refused = 0
for a in range(10):
    for i in range(30):
        s = socket.socket(); s.bind(("127.0.0.%d" % (20 + a), 0)); s.connect(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"); socks.append(s)
one = []
for i in range(40):
    s = socket.socket(); s.bind(("127.0.0.40", 0)); s.connect(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\n"); one.append(s)
time.sleep(1)
for s in one:
    s.settimeout(0.2)
    try:
        if s.recv(1) == b"": refused += 1
    except socket.timeout: pass
    except OSError: refused += 1
print("over-limit-closed", refused, flush=True)
end = time.time() + 15
while time.time() < end:
    time.sleep(3)
    for s in socks:
        try: s.sendall(b"X-Slow: 1\r\n")
        except OSError: pass
for s in socks + one: s.close()
EOF
timeout 40 python3 "$D/slowloris.py" "$PORT" >"$D/slowloris.out" 2>&1 &
SLOW=$!; zkf_track "$SLOW"
sleep 3
SLOW_MS=$(latency 10)
wait "$SLOW"
CLOSED=$(sed -n 's/^over-limit-closed //p' "$D/slowloris.out")
[ "${CLOSED:-0}" -ge 8 ] && pass "one address holds at most 32 connections ($CLOSED of 40 closed)" || fail "per-address limit: $(cat "$D/slowloris.out")"
[ "$SLOW_MS" -lt 200 ] && pass "admin's job list under a 300-connection slowloris: $SLOW_MS ms" || fail "job list took $SLOW_MS ms under the slowloris"
# A body sent a byte a second is cut off at requestTimeoutSeconds (3 s).
cat >"$D/slowbody.py" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /api/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          b"Content-Length: 100\r\n\r\n")
start = time.time()
try:
    for i in range(100):
        s.sendall(b" "); time.sleep(1)
        if time.time() - start > 15: break
    s.settimeout(2); s.recv(1)
except OSError:
    pass
print(int(time.time() - start))
EOF
SB=$(timeout 30 python3 "$D/slowbody.py" "$PORT")
[ "${SB:-99}" -le 8 ] && pass "a body trickled in is cut off after ${SB} s" || fail "slow body held ${SB:-?} s"
# 100 parallel wrong logins from one address (threads of one process: the
# clients' own start-up is not what is measured).
cat >"$D/flood.py" <<'EOF'
import http.client, sys, threading
port = int(sys.argv[1]); codes = []; go = threading.Event()
def one(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20, source_address=("127.0.0.6", 0))
    go.wait()
    try:
        c.request("POST", "/api/login", '{"user":"alice","password":"guess %d"}' % i,
                  {"Content-Type": "application/json"})
        codes.append(c.getresponse().status)
    except OSError as e:
        codes.append(str(e))
ts = [threading.Thread(target=one, args=(i,)) for i in range(100)]
for t in ts: t.start()
go.set()
for t in ts: t.join()
print("\n".join(map(str, codes)))
EOF
timeout 60 python3 "$D/flood.py" "$PORT" >"$D/flood.codes" 2>&1 &
FLOOD=$!; zkf_track "$FLOOD"
FLOOD_MS=$(latency 10)
wait "$FLOOD"
[ "$FLOOD_MS" -lt 200 ] && pass "admin's job list under 100 parallel wrong logins: $FLOOD_MS ms" || fail "job list took $FLOOD_MS ms under the login flood"
# Past 32 connections from one address MHD closes them; of those served,
# at most the allowance is checked against a hash, the rest get 429.
N429=$(grep -c '^429$' "$D/flood.codes"); N401=$(grep -c '^401$' "$D/flood.codes")
NRESET=$(grep -c 'reset\|refused\|closed\|Remote\|Broken pipe' "$D/flood.codes")
[ "$N401" -ge 1 ] && [ "$N401" -le 10 ] && [ "$N429" -ge 20 ] && [ $((N401 + N429 + NRESET)) = 100 ] &&
  pass "the flood is throttled ($N401 checked, $N429 answered 429, $NRESET closed over the address's limit)" ||
  fail "flood codes: $(sort "$D/flood.codes" | uniq -c | tr '\n' ';')"
# The back-off doubles with each attempt let through: two in a row meet it.
c=$(login alice 'guess again' "$D/x.jar" --interface 127.0.0.6)
[ "$c" = 429 ] || c=$(login alice 'guess again' "$D/x.jar" --interface 127.0.0.6)
expect "$c" 429 "the next attempts are throttled"
RA=$(header Retry-After); [ "${RA:-0}" -ge 1 ] && pass "Retry-After: $RA" || fail "no Retry-After"
c=$(code GET "$URL/api/status" -b "$D/alice.jar")
[ "$(jfield loginsThrottled)" -ge 20 ] 2>/dev/null && pass "throttled logins counted ($(jfield loginsThrottled))" || fail "status: $(cat "$D/body")"
[ -n "${EJ_SEC_REPORT:-}" ] && echo "REPORT base=${BASE}ms slowloris=${SLOW_MS}ms flood=${FLOOD_MS}ms"

# ---------------------------------------------------------------- API tokens
for r in viewer operator admin; do
  T=$("$E" console token create --config "$D/console.yaml" --name "t-$r" --role "$r" --expires 1d 2>"$D/tok.err")
  case "$T" in ejob_*) pass "token $r created";; *) fail "token create: $T $(cat "$D/tok.err")";; esac
  printf -v "TOK_$r" '%s' "$T"
done
TOK_mixed=$("$E" console token create --config "$D/console.yaml" --name t-mixed --role viewer --roles sec=operator 2>/dev/null)
"$E" console token list --config "$D/console.yaml" | grep -q '^t-mixed .* viewer,sec=operator ' &&
  pass "token list shows roles per registry" || fail "token list: $("$E" console token list --config "$D/console.yaml")"
grep -q "$TOK_operator" "$D/console-tokens.json" && fail "a token kept in clear" || pass "tokens kept hashed"
[ "$(stat -c %a "$D/console-tokens.json")" = 600 ] && pass "tokens file mode 600" || fail "tokens file mode"
c=$(code POST "$URL/api/registries/sec/jobs/secJob/trigger" -H "Authorization: Bearer $TOK_operator" \
  -H 'Content-Type: application/json' --data '{}')
expect "$c" 200 "an operator token triggers without a CSRF header"
c=$(code GET "$JOBS" -H "Authorization: Bearer ${TOK_operator%?}x"); expect "$c" 401 "a wrong token"
"$E" console token list --config "$D/console.yaml" >"$D/list.out"
grep '^t-operator ' "$D/list.out" | grep -q 'never$' && fail "last use not listed: $(cat "$D/list.out")" || pass "token list shows the last use"
"$E" console token revoke --config "$D/console.yaml" --name t-operator 2>/dev/null
c=$(code GET "$JOBS" -H "Authorization: Bearer $TOK_operator"); expect "$c" 401 "a revoked token"
"$E" console token create --config "$D/console.yaml" --name t-operator --role operator >"$D/tok" 2>/dev/null
TOK_operator=$(cat "$D/tok")
grep -q '"auth":"token","role":"operator"' "$D/audit.log" && pass "token use audited" || fail "no token audit line"
grep -q '"auth":"local","action":"token revoke","token":"t-operator"' "$D/audit.log" &&
  grep -q '"action":"token create","token":"t-operator","role":"operator"' "$D/audit.log" &&
  pass "token create and revoke audited" || fail "no token create/revoke audit line"

# ---------------------------------------------------------------- every route x every role
# METHOD PATH NEED, one line per route of src/console/web_api.c (checked
# below): reads on the real job, writes on a job that does not exist, so an
# allowed write answers 404 and a refused one 403.
ROUTES=$(cat <<'EOF'
GET /api/registries viewer
GET /api/fields viewer
GET /api/history viewer
GET /api/history/1 viewer
GET /api/history/1/output viewer
GET /api/registries/R/jobs viewer
GET /api/registries/R/jobs/J viewer
DELETE /api/registries/R/jobs/noSuchJob admin
GET /api/registries/R/jobs/J/config viewer
PUT /api/registries/R/jobs/noSuchJob/config admin
GET /api/registries/R/jobs/J/history viewer
GET /api/registries/R/jobs/J/fires viewer
POST /api/registries/R/jobs/noSuchJob/trigger operator
POST /api/registries/R/jobs/noSuchJob/shutdown operator
POST /api/registries/R/jobs/noSuchJob/restart operator
POST /api/registries/R/jobs/noSuchJob/kill admin
POST /api/registries/R/jobs/noSuchJob/disable operator
POST /api/registries/R/jobs/noSuchJob/enable operator
POST /api/registries/R/jobs/noSuchJob/items/0/disable operator
POST /api/registries/R/jobs/noSuchJob/items/0/enable operator
GET /api/registries/R/servers viewer
POST /api/registries/R/servers/10.9.9.9/disable operator
POST /api/registries/R/servers/10.9.9.9/enable operator
POST /api/registries/R/servers/10.9.9.9/shutdown operator
EOF
)
TABLE_ROUTES=$(grep -c '^    {"[A-Z]*", "' "$EJ_SOURCE_DIR/src/console/web_api.c")
[ "$TABLE_ROUTES" = "$(wc -l <<<"$ROUTES")" ] && pass "the test covers all $TABLE_ROUTES routes" || fail "web_api.c has $TABLE_ROUTES routes, the test $(wc -l <<<"$ROUTES")"
rank() { case $1 in viewer) echo 0;; operator) echo 1;; admin) echo 2;; esac; }
# who: NAME ROLE-ON-sec ROLE-ON-sec2 CURL-AUTH-ARGS...
check_routes() {
  local name=$1 on_sec=$2 on_sec2=$3; shift 3
  local bad=0 m p need reg have path want got
  while read -r m p need; do
    for reg in sec sec2; do
      have=$on_sec; [ "$reg" = sec2 ] && have=$on_sec2
      case $p in */R/*) ;; *) [ "$reg" = sec2 ] && continue; have=$on_sec2;; esac
      job=secJob; [ "$reg" = sec2 ] && job=batchJob
      path=$(sed -e "s#/R/#/$reg/#" -e "s#/J\(/\|\$\)#/$job\1#" <<<"$p")
      local data=(); [ "$m" != GET ] && data=(-H 'Content-Type: application/json' --data '{"version":0,"config":{}}')
      got=$(code "$m" "$URL$path" "$@" "${data[@]}")
      if [ "$(rank "$have")" -ge "$(rank "$need")" ]; then
        case $got in 403|401|405) bad=$((bad + 1)); echo "  $name $m $path: $got, wanted allowed: $(cat "$D/body")" >&2;; esac
      else
        [ "$got" = 403 ] || { bad=$((bad + 1)); echo "  $name $m $path: $got, wanted 403" >&2; }
      fi
    done
  done <<<"$ROUTES"
  [ "$bad" = 0 ] && pass "routes x roles: $name" || fail "routes x roles: $name, $bad wrong"
}
check_routes "vic (viewer, session)" viewer viewer -b "$D/vic.jar" -H "X-CSRF-Token: $V_CSRF"
check_routes "olga (operator on sec only, session)" operator viewer -b "$D/olga.jar" -H "X-CSRF-Token: $O_CSRF"
check_routes "alice (admin, session)" admin admin -b "$D/alice.jar" -H "X-CSRF-Token: $A_CSRF"
check_routes "viewer token" viewer viewer -H "Authorization: Bearer $TOK_viewer"
check_routes "operator token" operator operator -H "Authorization: Bearer $TOK_operator"
check_routes "admin token" admin admin -H "Authorization: Bearer $TOK_admin"
check_routes "token operator on sec only" operator viewer -H "Authorization: Bearer $TOK_mixed"
# A session write still needs its CSRF token; a cookie and a Bearer header
# of another kind are not mixed up.
c=$(code POST "$URL/api/registries/sec/jobs/secJob/trigger" -b "$D/alice.jar" -H 'Content-Type: application/json' --data '{}')
expect "$c" 403 "a session write without its CSRF token"

# ---------------------------------------------------------------- TLS
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/key.pem" -out "$D/cert.pem" -days 2 \
  -subj /CN=localhost >/dev/null 2>&1
cenv_console "$D/tls.log" --no-auth --listen 127.0.0.1:0 --registry "$ZKF_CONNECT/sec" \
  --tls-cert "$D/cert.pem" --tls-key "$D/key.pem" || exit 1
TPORT=${CENV_URL##*:}
# tls ARGS: "PROTOCOL CIPHER" of the handshake, "(NONE) (NONE)" when none.
# The client allows old versions (SECLEVEL=0) so that the server refuses.
tls() {
  timeout 10 openssl s_client -connect "127.0.0.1:$TPORT" -servername localhost "$@" </dev/null 2>&1 |
    sed -n 's/^New, \([^,]*\), Cipher is \(.*\)$/\1 \2/p' | head -1
}
got=$(tls -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0'); case $got in TLSv1.1*) fail "TLS 1.1 accepted: $got";; *) pass "TLS 1.1 refused ($got)";; esac
got=$(tls -tls1 -cipher 'DEFAULT:@SECLEVEL=0'); case $got in TLSv1\ *) fail "TLS 1.0 accepted: $got";; *) pass "TLS 1.0 refused ($got)";; esac
got=$(tls -tls1_2); case $got in "TLSv1.2 ECDHE-"*|"TLSv1.2 DHE-"*) pass "TLS 1.2 with forward secrecy ($got)";; *) fail "TLS 1.2: $got";; esac
got=$(tls -tls1_2 -cipher 'AES256-SHA256:AES128-SHA:AES256-SHA'); case $got in TLSv1.2\ A*) fail "static RSA accepted: $got";; *) pass "static RSA refused ($got)";; esac
got=$(tls); case $got in TLSv1.3*) pass "TLS 1.3 preferred ($got)";; *) fail "no TLS 1.3: $got";; esac
curl -sk -D "$D/headers" -o /dev/null "$CENV_URL/api/session"
header Strict-Transport-Security | grep -q 'max-age=' && pass "HSTS over TLS" || fail "no HSTS: $(cat "$D/headers")"

[ "$FAILS" = 0 ] && echo "console security: all passed" || { echo "$FAILS failure(s)" >&2; exit 1; }
