#!/bin/bash
# `ejob run` log levels: at the default (info) a 2-item job firing every
# second logs exactly one line per item run (its end) and no status lines;
# --log-level debug, or log: {level: debug} in the file, brings back each
# item's start and the status trace; a reload applies a changed level; the
# command line wins over the file. A JOURNAL_STREAM that is not stderr's
# leaves the timestamps in.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"

D=$ZKF_DIR/t
mkdir -p "$D"
cat >"$D/item.sh" <<'EOF'
#!/bin/sh
# item.sh RUNS CONTEXT: one line per item run.
echo run >>"$1"
EOF
chmod +x "$D/item.sh"
write_yaml() { # LOG-SECTION...
  cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: loglevel
  sessionTimeoutMilliseconds: 4000
tracing:
  type: NONE
$*
jobs:
  two:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 2
    overwrite: true
    props:
      script.command.line: $D/item.sh $D/runs
EOF
}

# start NAME ARGS...: a daemon logging to $D/NAME.log; sets P.
start() {
  local name=$1; shift
  : >"$D/runs"
  EJOB_STATE_DIR=$D/state setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" "$@" 2>"$D/$name.log" &
  P=$!; zkf_track $P
  wait_for 30 "$name: daemon started" logged "$D/$name.log" "running 1 job"
}
# stop NAME: SIGTERM, exit code 0.
stop() {
  kill -TERM $P
  wait $P; local rc=$?
  [ $rc -eq 0 ] && pass "$1: exit code 0" || fail "$1: exit code $rc"
}
n_lines() { grep -c -- "$1" "$2"; }

# ------------------------------------------------- default level: info
write_yaml ""
# A JOURNAL_STREAM that names some other stream: not the journal's format.
JOURNAL_STREAM=1:1 start info
sleep 6
stop info
L=$D/info.log
RUNS=$(grep -c '' "$D/runs")
ENDS=$(n_lines '\[event\] execution .* job=two item=[01] source=NORMAL_TRIGGER .*: succeeded in [0-9]* ms$' "$L")
[ "$RUNS" -ge 8 ] && pass "info: $RUNS item runs in 6 s" || fail "info: only $RUNS item runs"
[ "$ENDS" -eq "$RUNS" ] && pass "info: one 'succeeded' line per item run ($ENDS)" \
  || fail "info: $ENDS succeeded lines for $RUNS runs"
[ "$(n_lines 'status job=' "$L")" -eq 0 ] && pass "info: no status lines" || fail "info: status lines: $(grep -m2 'status job=' "$L")"
[ "$(n_lines ': started$' "$L")" -eq 0 ] && pass "info: no 'started' lines" || fail "info: started lines logged"
# Between start-up and SIGTERM nothing else is logged per fire: at most the
# first fire's resharding line besides the runs' own lines.
OTHER=$(sed -n '/running 1 job(s)/,/SIGTERM: stopping/p' "$L" | sed '1d;$d' | grep -v ': succeeded in [0-9]* ms$')
[ "$(grep -c . <<<"$OTHER")" -le 1 ] && pass "info: per fire only the items' lines (other: ${OTHER:-none})" \
  || fail "info: more lines per fire: $OTHER"
grep -q '^[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9:.]*Z info  \[daemon\] running 1 job' "$L" \
  && pass "JOURNAL_STREAM not naming stderr: timestamps kept" || fail "no timestamped line: $(head -2 "$L")"
echo "  info log, per fire:"; grep -m2 'succeeded in' "$L" | sed 's/^/    /'

# ------------------------------------------------- --log-level debug
start debug --log-level debug
sleep 4
stop debug
L=$D/debug.log
RUNS=$(grep -c '' "$D/runs")
STARTS=$(n_lines '\[event\] execution .* job=two item=[01] .*: started$' "$L")
[ "$STARTS" -eq "$RUNS" ] && [ "$RUNS" -ge 4 ] && pass "--log-level debug: a 'started' line per item run ($STARTS)" \
  || fail "--log-level debug: $STARTS started lines for $RUNS runs"
grep -q 'debug \[event\] status job=two .*state=TASK_STAGING' "$L" && grep -q 'debug \[event\] status job=two .*state=TASK_FINISHED' "$L" \
  && pass "--log-level debug: the status trace, at debug" || fail "--log-level debug: no status trace"

# ------------------------------------------------- the file's level, reloaded
write_yaml "log: {level: info}"
start file
sleep 3
[ "$(n_lines 'status job=' "$D/file.log")" -eq 0 ] && pass "log.level info: no status lines" || fail "log.level info: status lines"
write_yaml "log:
  level: debug"
kill -HUP $P
wait_for 15 "reload to log.level debug applied" logged "$D/file.log" "reload done"
grep -q 'info  \[daemon\] log level debug' "$D/file.log" && pass "the reload logs the new level" || fail "no 'log level debug' line"
sleep 3
stop file
AFTER=$(sed -n '/reload done/,$p' "$D/file.log")
grep -q 'status job=two .*state=TASK_RUNNING' <<<"$AFTER" && grep -q ': started$' <<<"$AFTER" \
  && pass "after the reload: status and started lines" || fail "after the reload to debug: no debug lines"

# ------------------------------------------------- the command line wins
start cli --log-level info
sleep 3
stop cli
L=$D/cli.log
[ "$(n_lines 'status job=' "$L")" -eq 0 ] && [ "$(n_lines ': started$' "$L")" -eq 0 ] && [ "$(n_lines 'succeeded in' "$L")" -ge 2 ] \
  && pass "--log-level info over log.level debug: info only" || fail "--log-level info lost to the file"
start file-debug
sleep 3
stop file-debug
grep -q 'status job=two .*state=TASK_STAGING' "$D/file-debug.log" && pass "log.level debug at start-up: status lines" \
  || fail "log.level debug at start-up: no status lines"

# ------------------------------------------------- a bad level
write_yaml "log: {level: loud}"
OUT=$("$E" run -c "$D/jobs.yaml" --check 2>&1); RC=$?
[ $RC -eq 2 ] && grep -q "jobs.yaml:7:14: log.level: must be debug, info, warn or error, got \"loud\"" <<<"$OUT" \
  && pass "--check: a bad log.level is FILE:LINE:COL and exit 2" || fail "bad level: rc $RC: $OUT"

[ $FAILS -eq 0 ] && echo "daemon_loglevel_test: all passed" || echo "daemon_loglevel_test: $FAILS failure(s)"
exit $FAILS
