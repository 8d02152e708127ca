#!/bin/bash
# The daemon's /metrics endpoint under a hostile client: 70 half-open
# connections, then a slowloris of 300 connections trickling a header line
# every 3 s (from 127.0.0.1, the probes' own address, then spread over ten
# 127.x addresses) leave /healthz and /metrics answering within 200 ms. A
# forged Host gets 421 and no data; a request body is refused; a request
# that never finishes its header is dropped.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
FLOOD="python3 $EJ_SOURCE_DIR/tests/support/http_flood.py"
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"

D=$ZKF_DIR/t
mkdir -p "$D"
cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: httpflood
  sessionTimeoutMilliseconds: 4000
tracing:
  type: NONE
jobs:
  idle:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/true
EOF
EJOB_STATE_DIR=$D/state setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" --metrics-listen 127.0.0.1:0 2>"$D/daemon.log" &
P=$!; zkf_track $P
wait_for 30 "daemon started" logged "$D/daemon.log" "running 1 job" || exit 1
PORT=$(sed -n 's/.*serving \/metrics.*(port \([0-9]*\)).*/\1/p' "$D/daemon.log")
U=http://127.0.0.1:$PORT

# probe WHAT: 5 rounds of GET /healthz and /metrics; every answer 200 within
# 200 ms (3 s at most is waited). Prints the slowest.
probe() {
  local worst=0 bad="" t code
  for _ in 1 2 3 4 5; do
    for path in /healthz /metrics; do
      read -r code t < <(curl -s -o /dev/null --max-time 3 -w '%{http_code} %{time_total}\n' "$U$path")
      t=$(awk -v t="$t" 'BEGIN { printf "%d", t * 1000 }')
      [ "$code" = 200 ] && [ "$t" -lt 200 ] || bad="$bad $path:$code:${t}ms"
      [ "$t" -gt "$worst" ] && worst=$t
    done
    sleep 0.3
  done
  echo "  $1: slowest answer ${worst} ms"
  [ -z "$bad" ] && pass "$1: /healthz and /metrics 200 within 200 ms" || fail "$1: slow or failed:$bad"
}

probe "no load"

# flood WHAT MODE COUNT SOURCES...: the flood for 12 s; probes from its 3rd second.
flood() {
  local what=$1 mode=$2 count=$3; shift 3
  $FLOOD 127.0.0.1 "$PORT" "$mode" "$count" 12 "$@" >"$D/flood.out" &
  local f=$!; zkf_track $f
  sleep 3
  probe "$what"
  wait $f
  echo "  $(cat "$D/flood.out")"
}
flood "70 half-open connections" halfopen 70
flood "slowloris, 300 connections from 127.0.0.1" slowloris 300
flood "slowloris, 300 connections from 10 addresses" slowloris 300 127.0.0.{2..11}

# The Host header: loopback names and addresses pass, a name rebound to
# 127.0.0.1 by an attacker's DNS gets 421 and nothing else.
code() { curl -s -o "$D/body" --max-time 3 -w '%{http_code}' "$@"; }
[ "$(code -H "Host: localhost:$PORT" "$U/metrics")" = 200 ] && pass "Host localhost: 200" || fail "Host localhost refused"
[ "$(code -H "Host: [::1]:$PORT" "$U/healthz")" = 200 ] && pass "Host [::1]: 200" || fail "Host [::1] refused"
C=$(code -H "Host: rebind.attacker.example:$PORT" "$U/metrics")
[ "$C" = 421 ] && ! grep -q ejob_ "$D/body" && pass "a forged Host: 421, no metrics" || fail "forged Host: $C $(head -c 200 "$D/body")"
C=$(code -X POST -d x=1 "$U/metrics")
[ "$C" = 405 ] || [ "$C" = 413 ] && pass "a request with a body: $C" || fail "a request with a body: $C"
# A header never finished is dropped after its deadline, long before the
# idle timeout an attacker could keep resetting.
START=$SECONDS
python3 - "$PORT" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(0.5)
s.send(b"GET /metrics HTTP/1.1\r\n")
t0 = time.monotonic()
while time.monotonic() - t0 < 30:
    try:
        s.send(b"X-Slow: 1\r\n")
        if s.recv(100) == b"":
            break
    except socket.timeout:
        continue
    except OSError:
        break
print(f"  a trickled header dropped after {time.monotonic() - t0:.1f} s")
EOF
[ $((SECONDS - START)) -le 15 ] && pass "a trickled header is dropped within 15 s" || fail "a trickled header held $((SECONDS - START)) s"

kill -TERM $P; wait $P; RC=$?
[ $RC -eq 0 ] && pass "daemon exit code 0" || fail "daemon exit code $RC"
[ $FAILS -eq 0 ] && echo "daemon_http_flood_test: all passed" || echo "daemon_http_flood_test: $FAILS failure(s)"
exit $FAILS
