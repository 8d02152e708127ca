#!/bin/bash
# The embedded registry of `ejob run`: two daemons share one ZooKeeper, it
# survives a daemon's SIGKILL, a daemon started later joins it, it stops with
# the last daemon; a stale address file is replaced, never duplicated;
# `ejob registry status|stop`; bad daemon files are refused with exact
# file:line:column messages before anything starts.
set -u
E=${EJOB:?EJOB must name the ejob binary}
T=$(mktemp -d "${TMPDIR:-/tmp}/ejob-embedded-XXXXXX")
S=$T/state
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  "$E" registry stop --force --state-dir "$S" >/dev/null 2>&1
  [ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$EJ_SOURCE_DIR/tests/support/checks.sh"
dead() { ! kill -0 "$1" 2>/dev/null; }
addr() { cat "$S/registry" 2>/dev/null; }
# The ZooKeeper servers of this state directory (read-only check by cmdline).
servers_running() { pgrep -f "ZooKeeperServerMain $S/zk/zoo.cfg" | wc -l; }

cat >"$T/jobs.yaml" <<EOF
regCenter:
  serverLists: embedded
  namespace: emb
  sessionTimeoutMilliseconds: 4000
jobs:
  embJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 2
    props:
      script.command.line: /bin/true
EOF

# ------------------------------------------------------------ bad files
cat >"$T/bad.yaml" <<'EOF'
regCenter:
  namespace: emb
  sesionTimeoutMilliseconds: 4000
jobs:
  badJob:
    elasticJobType: SCRIPT
    cron: "0/2 * * * *"
    shardingTotalCount: three
    props:
      script.command.line: /bin/true
EOF
OUT=$("$E" run -c "$T/bad.yaml" --state-dir "$S" 2>&1); RC=$?
[ $RC -eq 2 ] && pass "bad file: exit 2" || fail "bad file: exit $RC"
WANT="$T/bad.yaml:3:3: regCenter: unknown key \"sesionTimeoutMilliseconds\"
$T/bad.yaml:7:11: jobs.badJob.cron: day-of-week: missing (an expression needs 6 or 7 fields)
$T/bad.yaml:8:25: jobs.badJob.shardingTotalCount: expected an integer, got \"three\""
[ "$OUT" = "$WANT" ] && pass "every error reported as file:line:column" || { fail "bad file messages"; diff <(echo "$WANT") <(echo "$OUT"); }
[ -e "$S/registry" ] && fail "a registry was started for a bad file" || pass "nothing started for a bad file"
OUT=$("$E" run -c "$T/missing.yaml" 2>&1); RC=$?
[ $RC -eq 2 ] && grep -q "missing.yaml" <<<"$OUT" && pass "missing file: exit 2 naming it" || fail "missing file: exit $RC: $OUT"
OUT=$("$E" run -c "$T/jobs.yaml" --check 2>&1); RC=$?
[ $RC -eq 0 ] && [ "$OUT" = "$T/jobs.yaml: OK (1 job)" ] && pass "--check" || fail "--check: $RC $OUT"
"$E" run 2>/dev/null; [ $? -eq 2 ] && pass "run without -c: exit 2" || fail "run without -c"
"$E" run -c "$T/jobs.yaml" --log-format xml 2>/dev/null; [ $? -eq 2 ] && pass "bad --log-format: exit 2" || fail "bad --log-format"

# ------------------------------------------------------------ sharing
"$E" registry status --state-dir "$S" >/dev/null; [ $? -eq 1 ] && pass "status before any daemon: exit 1" || fail "status before any daemon"
EJOB_IP=127.0.0.21 setpriv --pdeathsig KILL "$E" run -c "$T/jobs.yaml" --state-dir "$S" 2>"$T/a.log" & A=$!; PIDS+=($A)
EJOB_IP=127.0.0.22 setpriv --pdeathsig KILL "$E" run -c "$T/jobs.yaml" --state-dir "$S" 2>"$T/b.log" & B=$!; PIDS+=($B)
wait_for 60 "daemon A running" logged "$T/a.log" "running 1 job"
wait_for 60 "daemon B running" logged "$T/b.log" "running 1 job"
ADDR=$(addr)
[ -n "$ADDR" ] && pass "registry address file: $ADDR" || fail "no registry address file"
[ "$(servers_running)" -eq 1 ] && pass "one server for two daemons" || fail "$(servers_running) servers for two daemons"
grep -q "embedded registry $ADDR" "$T/a.log" && grep -q "embedded registry $ADDR" "$T/b.log" \
  && pass "both daemons use $ADDR" || fail "daemons use different registries"
OUT=$("$E" registry status --state-dir "$S"); RC=$?
[ $RC -eq 0 ] && grep -q "running at $ADDR" <<<"$OUT" && grep -q "daemons using it:  2" <<<"$OUT" \
  && pass "registry status: running, 2 daemons" || fail "registry status: $OUT"
OUT=$("$E" registry status --state-dir "$S" --json)
python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["state"]=="running" and len(d["daemonPids"])==2, d' <<<"$OUT" \
  && pass "registry status --json" || fail "registry status --json: $OUT"
# Other commands find the embedded registry through the state directory.
OUT=$(EJOB_REGISTRY= "$E" jobs --state-dir "$S" --namespace emb 2>&1)
grep -qE '^embJob ' <<<"$OUT" && pass "ejob jobs through the embedded registry" || fail "jobs via embedded: $OUT"
"$E" registry stop --state-dir "$S" 2>"$T/stop.err"; RC=$?
[ $RC -eq 1 ] && grep -q "2 daemon(s) still use the embedded registry" "$T/stop.err" \
  && pass "registry stop refused while used" || fail "registry stop while used: $RC $(cat "$T/stop.err")"

# A crash of the daemon that started the server does not stop it.
kill -KILL $A; wait $A 2>/dev/null
sleep 1
[ "$(servers_running)" -eq 1 ] && OUT=$("$E" registry status --state-dir "$S") && grep -q "daemons using it:  1" <<<"$OUT" \
  && pass "server survives SIGKILL of a daemon" || fail "server after SIGKILL: $OUT"

# A daemon started now joins the same server.
EJOB_IP=127.0.0.23 setpriv --pdeathsig KILL "$E" run -c "$T/jobs.yaml" --state-dir "$S" 2>"$T/c.log" & C=$!; PIDS+=($C)
wait_for 60 "daemon C running" logged "$T/c.log" "running 1 job"
grep -q "embedded registry $ADDR" "$T/c.log" && pass "daemon C joined $ADDR" || fail "daemon C: $(head -3 "$T/c.log")"
[ "$(servers_running)" -eq 1 ] && pass "still one server" || fail "$(servers_running) servers"

# The server stops with the last daemon.
SRV=$(cat "$S/server.pid")
kill -TERM $B; wait $B; RB=$?
[ $RB -eq 0 ] && pass "daemon B: SIGTERM -> exit 0" || fail "daemon B exit $RB"
kill -0 "$SRV" 2>/dev/null && pass "server kept while daemon C runs" || fail "server stopped too early"
kill -TERM $C; wait $C; RC=$?
[ $RC -eq 0 ] && pass "daemon C: SIGTERM -> exit 0" || fail "daemon C exit $RC"
wait_for 15 "server pid $SRV gone after the last daemon" dead "$SRV"
[ ! -e "$S/registry" ] && [ ! -e "$S/server.pid" ] && pass "state files removed" || fail "state files left: $(ls "$S")"
"$E" registry status --state-dir "$S" >/dev/null; [ $? -eq 1 ] && pass "status after stop: exit 1" || fail "status after stop"

# ------------------------------------------------------------ stale state
# An address file naming a dead server is replaced, never duplicated.
echo "127.0.0.1:1" >"$S/registry"; echo 999999 >"$S/server.pid"
"$E" registry status --state-dir "$S" | grep -q "stale" && pass "stale state reported" || fail "stale not reported"
EJOB_IP=127.0.0.24 setpriv --pdeathsig KILL "$E" run -c "$T/jobs.yaml" --state-dir "$S" 2>"$T/d.log" & D=$!; PIDS+=($D)
wait_for 60 "daemon D running" logged "$T/d.log" "running 1 job"
NEW=$(addr)
[ -n "$NEW" ] && [ "$NEW" != "127.0.0.1:1" ] && pass "stale address replaced by $NEW" || fail "stale address kept: $NEW"
[ "$(servers_running)" -eq 1 ] && pass "one server after replacing the stale one" || fail "$(servers_running) servers"
# The operator can stop it with --force; the daemon then loses its registry.
"$E" registry stop --force --state-dir "$S" >/dev/null; RC=$?
[ $RC -eq 0 ] && [ "$(servers_running)" -eq 0 ] && [ ! -e "$S/registry" ] && pass "registry stop --force" || fail "registry stop --force: $RC"
kill -TERM $D; wait $D
pass "daemon D stopped after its registry went away"

echo "$FAILS failure(s)"
exit $((FAILS > 0))
