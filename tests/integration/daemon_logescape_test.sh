#!/bin/bash
# A job cannot forge the daemon's log lines nor drive the terminal: in the
# text format a failing script's output (kept in the failure message) is
# written with newline, CR, ESC and the other control characters escaped, so
# it stays on the one line of the failure; the JSON format escapes it too.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"

D=$ZKF_DIR/t
mkdir -p "$D"
cat >"$D/forge.sh" <<'EOF'
#!/bin/sh
# Ends its output with a forged daemon line and a clear-screen sequence.
printf 'working\n2026-01-01T00:00:00.000Z info  [daemon] all jobs healthy\n'
printf '\033[2J\033[Hgone\r\n'
exit 1
EOF
chmod +x "$D/forge.sh"
cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: logescape
  sessionTimeoutMilliseconds: 4000
tracing:
  type: NONE
jobs:
  forge:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: $D/forge.sh
EOF

# run NAME ARGS...: a daemon until its first failure is logged, then SIGTERM.
run() {
  local name=$1; shift
  EJOB_STATE_DIR=$D/state setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" "$@" 2>"$D/$name.log" &
  local p=$!; zkf_track $p
  wait_for 30 "$name: the job's failure is logged" logged "$D/$name.log" "exited with code 1"
  sleep 0.5
  kill -TERM $p; wait $p
}

run text
L=$D/text.log
grep -q "all jobs healthy" "$L" || fail "text: the output is not in the log at all"
! grep -q '^2026-01-01T00:00:00.000Z info  \[daemon\] all jobs healthy' "$L" \
  && pass "text: no forged daemon line" || fail "text: forged line: $(grep -m1 'all jobs healthy' "$L")"
! grep -q $'\033' "$L" && pass "text: no ESC byte in the log" || fail "text: a raw ESC reached the log"
! grep -q $'\r' "$L" && pass "text: no CR in the log" || fail "text: a raw CR reached the log"
LINE=$(grep -m1 "Job 'forge' exception" "$L")
grep -qF 'stdout' <<<"$LINE" && grep -qF 'working\n2026-01-01T00:00:00.000Z info  [daemon] all jobs healthy\n\x1b[2J\x1b[Hgone\r\n' <<<"$LINE" \
  && pass "text: the output is on the failure's one line, escaped" || fail "text: failure line: $LINE"
echo "  $LINE" | cut -c1-400

run json --log-format json
L=$D/json.log
! grep -q $'\033' "$L" && pass "json: no ESC byte" || fail "json: a raw ESC reached the log"
! grep -v '^{.*}$' "$L" | grep -q . && pass "json: every line is one object" \
  || fail "json: a line that is not an object: $(grep -m1 -v '^{.*}$' "$L")"

[ $FAILS -eq 0 ] && echo "daemon_logescape_test: all passed" || echo "daemon_logescape_test: $FAILS failure(s)"
exit $FAILS
