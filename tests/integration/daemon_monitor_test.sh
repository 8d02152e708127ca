#!/bin/bash
# The monitor port of a job run by `ejob run` (monitorPort set): `echo dump |
# nc` gets ElasticJob's dump, anything else gets nothing; `ejob dump` goes
# through the port and falls back to ZooKeeper when nobody answers. Then the
# console operations on that live job: trigger runs it, a disabled server
# does not run it, shutdown stops the instance, remove deletes the job.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"
export EJOB_REGISTRY="$ZKF_CONNECT/mon"
PORT=$(zkf_free_port)
D=$ZKF_DIR/t
mkdir -p "$D"
# Its own state directory (history.db, an embedded registry), never the
# user's default one.
export EJOB_STATE_DIR=$D/state
# A job that never fires on its own: its subtree stays still while we look.
cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: mon
  sessionTimeoutMilliseconds: 4000
jobs:
  monJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 2
    monitorPort: $PORT
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'echo ran >>$D/trig'
EOF
EJOB_IP=10.1.2.3 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
P=$!; zkf_track $P
wait_for 30 "daemon started" logged "$D/daemon.log" "running 1 job"
wait_for 10 "monitor port listening" logged "$D/daemon.log" "monitor port listening on 127.0.0.1:$PORT"

VIA_NC=$(echo dump | nc -N -w 10 127.0.0.1 "$PORT")
grep -qxF "/monJob/instances/ip1@-@$P | " <<<"$VIA_NC" && pass "echo dump | nc: instance line, IP masked" || fail "dump via nc: $VIA_NC"
grep -q "10\.1\.2\.3" <<<"$VIA_NC" && fail "an IP is not masked" || pass "no IP left in the dump"
grep -q '^/monJob/config | {"jobName":"monJob"' <<<"$VIA_NC" && pass "config line" || fail "no config line"
[ "$(printf 'DUMP\r\n' | nc -N -w 10 127.0.0.1 "$PORT")" = "$VIA_NC" ] && pass "DUMP with CRLF" || fail "DUMP with CRLF"
[ -z "$(echo stat | nc -N -w 10 127.0.0.1 "$PORT")" ] && pass "other commands: no output" || fail "stat answered"

OUT=$("$E" dump monJob 2>"$D/err")
[ "$OUT" = "$VIA_NC" ] && pass "ejob dump goes through the monitor port" || { fail "ejob dump differs from the port"; diff <(echo "$VIA_NC") <(echo "$OUT"); }
[ ! -s "$D/err" ] && pass "no fallback note" || fail "stderr: $(cat "$D/err")"
OUT2=$("$E" dump monJob --zookeeper)
[ "$OUT2" = "$VIA_NC" ] && pass "computed dump equals the port's" || { fail "computed dump differs"; diff <(echo "$VIA_NC") <(echo "$OUT2"); }

# ------------------------------------------------ operations on a live job
runs() { [ -f "$D/trig" ] && wc -l <"$D/trig" || echo 0; }
runs_are() { [ "$(runs)" -eq "$1" ]; }
"$E" trigger monJob >/dev/null; [ $? -eq 0 ] && pass "trigger" || fail "trigger"
wait_for 15 "trigger ran both items" runs_are 2
"$E" disable monJob >/dev/null && "$E" trigger monJob >/dev/null
sleep 3
runs_are 2 && pass "a disabled server does not run a trigger" || fail "ran while disabled: $(runs)"
"$E" enable monJob >/dev/null && "$E" trigger monJob >/dev/null
wait_for 15 "enabled again: the trigger runs" runs_are 4
# A second instance of the job cannot bind the same monitor port: as in
# ElasticJob, that is logged and the job runs without a monitor port.
EJOB_IP=10.1.2.3 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" 2>"$D/second.log" &
P2=$!; zkf_track $P2
wait_for 30 "second daemon started" logged "$D/second.log" "running 1 job"
grep -q "monitor port $PORT not started" "$D/second.log" && pass "port taken: logged by the second instance" || fail "second daemon: $(tail -3 "$D/second.log")"
kill -TERM $P2; wait $P2; RC=$?
[ $RC -eq 0 ] && pass "second daemon: SIGTERM -> exit 0" || fail "second daemon exit $RC"
"$E" remove monJob 2>/dev/null; [ $? -eq 1 ] && pass "remove refused while the daemon's instance is live" || fail "remove not refused"
"$E" shutdown monJob >/dev/null; [ $? -eq 0 ] && pass "shutdown" || fail "shutdown"
no_instance() { [ -z "$(zkf_cli ls /mon/monJob/instances | tr -d '[]')" ]; }
wait_for 10 "instance node deleted" no_instance
sleep 1
kill -0 $P && pass "the daemon process keeps running after a console shutdown" || fail "daemon exited"
"$E" trigger monJob 2>/dev/null; [ $? -eq 1 ] && pass "trigger after shutdown: no live instance" || fail "trigger after shutdown"

kill -TERM $P; wait $P; RC=$?
[ $RC -eq 0 ] && pass "SIGTERM after a console shutdown: exit 0" || fail "exit $RC"
# The job's nodes stay (config, servers, sharding); the port is closed.
OUT=$("$E" dump monJob 2>"$D/err"); RC=$?
[ $RC -eq 0 ] && grep -q "no monitor answered on port $PORT; computed from ZooKeeper" "$D/err" \
  && pass "fallback to ZooKeeper when the port is closed" || fail "fallback: $RC $(cat "$D/err")"
grep -q '^/monJob/config | ' <<<"$OUT" && pass "fallback dump has the config" || fail "fallback dump: $OUT"
"$E" dump monJob --zookeeper --port 1 >/dev/null 2>&1; [ $? -eq 2 ] && pass "--zookeeper with --port: usage error" || fail "--zookeeper --port"
"$E" remove monJob >/dev/null; [ $? -eq 0 ] && pass "remove once no instance is live" || fail "remove"
"$E" status monJob 2>/dev/null; [ $? -eq 1 ] && pass "the job is gone" || fail "job still there"

echo "$FAILS failure(s)"
exit $((FAILS > 0))
