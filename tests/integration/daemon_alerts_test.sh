#!/bin/bash
# Alerts from `ejob run` to real receivers on loopback: a webhook receiver
# (tests/support/alert_receiver.py, which checks the HMAC) and an SMTP
# server (aiosmtpd). A job with rules of its own whose script outlasts its
# timeout sends "timeout"; a disabled job's fires send "not-run".
# Two daemons share a one-item job whose script fails:
# its first failure reaches the webhook and the mailbox within 5 s, once
# (only the instance that ran it sends), signed; the failures that follow
# within throttleSeconds are held back and counted in the next message;
# the first success after that sends one "recovered". /metrics counts what
# was sent. `ejob alerts test` reports each receiver's answer; `ejob run
# --check` refuses a bad alerts value at its line and column.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D"
# Debian's python3 has aiosmtpd (python3-aiosmtpd); another python3 on
# PATH may not.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

HPORT=$(zkf_free_port)
SPORT=$(zkf_free_port)
MPORT=$(zkf_free_port)
MPORT2=$(zkf_free_port)
DEAD=$(zkf_free_port)
printf 'k3y-for-the-test\n' >"$D/hook.key"
chmod 600 "$D/hook.key"
python3 "$EJ_SOURCE_DIR/tests/support/alert_receiver.py" "$HPORT" "$D/hook.jsonl" "$D/hook.key" \
  2>"$D/hook.log" &
zkf_track $!
"$PY" -m aiosmtpd -n -l "127.0.0.1:$SPORT" -c aiosmtpd.handlers.Mailbox "$D/mail" \
  >"$D/smtp.log" 2>&1 &
zkf_track $!
up() { (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_for 20 "webhook receiver up" up "$HPORT"
wait_for 20 "SMTP server up" up "$SPORT"

# kind N: webhook messages of that kind so far.
kind_count() {
  python3 - "$D/hook.jsonl" "$1" <<'PY'
import json, sys
n = 0
try:
    for line in open(sys.argv[1]):
        if json.loads(json.loads(line)['body'])['kind'] == sys.argv[2]:
            n += 1
except FileNotFoundError:
    pass
print(n)
PY
}
# field KIND INDEX EXPR: a Python expression over rec (the request) and b
# (its JSON body) of the INDEX-th message of KIND.
field() {
  python3 - "$D/hook.jsonl" "$1" "$2" "$3" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
recs = [r for r in recs if json.loads(r['body'])['kind'] == sys.argv[2]]
rec = recs[int(sys.argv[3])]
b = json.loads(rec['body'])
print(eval(sys.argv[4]))
PY
}
mails() { find "$D/mail/new" -type f 2>/dev/null | wc -l; }

cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: alerts
  sessionTimeoutMilliseconds: 4000
alerts:
  channels:
    hook: {type: webhook, url: "http://127.0.0.1:$HPORT/hook", secretFile: hook.key}
    mail: {type: email, smtp: "smtp://127.0.0.1:$SPORT", from: ejob@example.org, to: [ops@example.org]}
    side: {type: webhook, url: "http://127.0.0.1:$HPORT/side", secretFile: hook.key}
  rules:
    - {on: [failed, timeout], after: 1, channels: [hook, mail]}
    - {on: [recovered], channels: [hook]}
  throttleSeconds: 6
jobs:
  flaky:
    cron: "0/1 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    timeZone: Asia/Shanghai
    props:
      script.command.line: "sh -c 'test -f $D/fail || exit 0; echo first >&2; echo boom: disk full >&2; exit 3'"
  slow:                     # its own rule: timeouts only
    cron: "0/2 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    alerts: {rules: [{on: timeout, channels: [side]}]}
    props:
      script.command.line: "sh -c 'sleep 5'"
      script.timeout.milliseconds: 300
  off:                      # disabled: its fires do not run
    cron: "0/2 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    disabled: true
    alerts: {rules: [{on: [not-run], channels: [side]}]}
    props:
      script.command.line: "true"
EOF

# ------------------------------------------------------------ --check
cp "$D/jobs.yaml" "$D/bad.yaml"
sed -i 's/after: 1,/after: 0,/' "$D/bad.yaml"
"$E" run --check -c "$D/bad.yaml" >/dev/null 2>"$D/check.err"; RC=$?
[ $RC -eq 2 ] && grep -q "bad.yaml:11:38: alerts.rules\[0\].after: must be 1..1000000, got 0" "$D/check.err" \
  && pass "--check refuses a bad alerts value at its line:column" \
  || fail "--check of after: 0: exit $RC, $(cat "$D/check.err")"
"$E" run --check -c "$D/jobs.yaml" >/dev/null 2>&1 && pass "--check accepts the alerts section" \
  || fail "--check refuses the good file"

# --------------------------------------------------------- two daemons
MLISTEN=127.0.0.1:$MPORT
EJOB_IP=127.0.0.71 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" --state-dir "$D/s1" \
  --metrics-listen "$MLISTEN" 2>"$D/d1.log" &
P1=$!; zkf_track $P1
EJOB_IP=127.0.0.72 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" --state-dir "$D/s2" \
  --metrics-listen "127.0.0.1:$MPORT2" 2>"$D/d2.log" &
P2=$!; zkf_track $P2
# The job succeeds until both daemons are up and its item has its owner;
# then it fails (and is not moved again).
started() { grep -q "running 3 job" "$D/d1.log" && grep -q "running 3 job" "$D/d2.log"; }
wait_for 40 "both daemons started" started
ran_ok() { grep -qE 'job=flaky item=0 .*succeeded' "$D/d1.log" "$D/d2.log"; }
wait_for 20 "flaky runs" ran_ok
sleep 3
touch "$D/fail"
failed_logged() { grep -qE 'job=flaky item=0 .*fail' "$D/d1.log" "$D/d2.log"; }
wait_for 10 "a run of flaky failed" failed_logged
t0=$SECONDS
have_failed() { [ "$(kind_count failed)" -ge 1 ]; }
have_mail() { [ "$(mails)" -ge 1 ]; }
wait_for 5 "the first failure reached the webhook within 5 s" have_failed
left=$((5 - (SECONDS - t0)))
[ $left -lt 1 ] && left=1
wait_for $left "and the SMTP server" have_mail
echo "figure: the run's start to the webhook's receipt: $(field failed 0 "int(rec['time'] * 1000 - b['fireTimeMs'])") ms"
sleep 1.5
# More runs failed meanwhile (one a second), held back by throttleSeconds:
# one message for the first failure, none from the other instance, and
# messages of the job at least throttleSeconds apart (however slow this
# machine is today).
spacing() {
  python3 - "$D/hook.jsonl" <<'PY'
import datetime, json, sys
recs = [json.loads(json.loads(l)['body']) for l in open(sys.argv[1])]
f = [b for b in recs if b['kind'] == 'failed' and b['job'] == 'flaky']
t = [datetime.datetime.fromisoformat(b['sentAt'].replace('Z', '+00:00')).timestamp() for b in f]
firsts = sum(1 for b in f if b['consecutiveFailures'] == 1)
gaps = [round(y - x, 1) for x, y in zip(t, t[1:])]
print(firsts, all(g >= 5.9 for g in gaps), len(f), gaps)
PY
}
sp=$(spacing)
case "$sp" in "1 True "*) pass "one message for the first failure; the next ones throttleSeconds apart ($sp)" ;;
  *) fail "failed messages (first failures, spaced, count, gaps): $sp" ;; esac
same_count() { [ "$(mails)" = "$(kind_count failed)" ]; }
wait_for 5 "each of those was mailed once" same_count
[ "$(field failed 0 "rec['signature_ok']")" = True ] && pass "the HMAC signature is valid" \
  || fail "signature: $(field failed 0 "rec['signature_ok']")"
[ "$(field failed 0 "b['version'], b['job'], b['item'], b['exitCode'], b['timeZone']")" = \
  "(1, 'flaky', 0, 3, 'Asia/Shanghai')" ] && pass "webhook body: version, job, item, exit code, zone" \
  || fail "body: $(field failed 0 "b")"
field failed 0 "b['stderrTail']" | grep -q "boom: disk full" && pass "the last lines of stderr" \
  || fail "stderr tail: $(field failed 0 "b['stderrTail']")"
CMDLINE=$(field failed 0 "b['command']")
ID=${CMDLINE#ejob history show }
case "$CMDLINE" in "ejob history show "*) pass "the command to see the run: $CMDLINE" ;;
  *) fail "command: $CMDLINE" ;; esac
inst=$(field failed 0 "b['instance']")
case "$inst" in 127.0.0.7[12]@-@*) pass "names the instance that ran it ($inst)" ;;
  *) fail "instance: $inst" ;; esac
grep -rq "^Subject: \[ejob\] failed: job flaky item 0" "$D/mail/new" && pass "the mail's subject" \
  || fail "mail: $(cat "$D"/mail/new/* | head -20)"
grep -rq "See the run:  *ejob history show $ID" "$D/mail/new" && pass "the mail names the run" \
  || fail "mail body: $(cat "$D"/mail/new/* | tail -20)"
# The run is where the command looks (the history of the instance that ran it).
owner=1
[ "${inst#127.0.0.72}" != "$inst" ] && owner=2
"$E" history show "$ID" -c "$D/jobs.yaml" --state-dir "$D/s$owner" 2>&1 | grep -q "boom: disk full" \
  && pass "ejob history show ID shows that run" || fail "history show $ID"

have_two() { [ "$(kind_count failed)" -ge 2 ]; }
wait_for 10 "after throttleSeconds, the next failure sends again" have_two
held=$(field failed 1 "b['suppressed']")
[ "$held" -ge 1 ] 2>/dev/null && pass "it counts the $held held back" || fail "suppressed: $held"
grep -rq "^Held back: " "$D/mail/new" && pass "the mail counts them too" || fail "no 'Held back' in a mail"

# ------------------------------------ a timeout, a fire not run (job rules)
have_timeout() { [ "$(kind_count timeout)" -ge 1 ]; }
wait_for 10 "a script killed by its timeout sends timeout" have_timeout \
  || grep -h "job=slow" "$D/d1.log" "$D/d2.log" | tail -3
[ "$(field timeout 0 "b['job'], b['termSignal'] is not None, 'timed out after 300 ms' in b['reason']")" = \
  "('slow', True, True)" ] && pass "the timeout message: job, signal, cause" \
  || fail "timeout message: $(field timeout 0 "b")"
have_not_run() { [ "$(kind_count not-run)" -ge 1 ]; }
wait_for 10 "a disabled job's fire sends not-run" have_not_run
[ "$(field not-run 0 "b['job'], b['reason'], b['item']")" = "('off', 'disabled', None)" ] \
  && pass "the not-run message: job, reason, the whole fire" || fail "not-run: $(field not-run 0 "b")"

# ------------------------------------------------------------ recovery
rm "$D/fail"
have_recovered() { [ "$(kind_count recovered)" -ge 1 ]; }
wait_for 10 "the first success sends recovered" have_recovered
sleep 2
[ "$(kind_count recovered)" = 1 ] && pass "recovered once" || fail "recovered: $(kind_count recovered)"
[ "$(field recovered 0 "b['item']")" = 0 ] && pass "recovered names the item" \
  || fail "recovered item: $(field recovered 0 "b['item']")"

# ------------------------------------------------------------- /metrics
metric() { # PORT SERIES
  curl -s "http://127.0.0.1:$1/metrics" | awk -v s="$2" '$1 == s {print $2}'
}
ports=("$MPORT" "$MPORT2")
mine=${ports[$((owner - 1))]} other=${ports[$((2 - owner))]}
v=$(metric "$mine" 'ejob_alerts_sent_total{channel="hook"}')
[ "${v:-0}" -ge 3 ] 2>/dev/null && pass "/metrics of the instance that ran it: hook sent $v" \
  || fail "/metrics hook sent: ${v:-none}"
v=$(metric "$other" 'ejob_alerts_sent_total{channel="hook"}')
[ "$v" = 0 ] && pass "/metrics of the other instance: hook sent 0 (once for the cluster)" \
  || fail "/metrics of the other instance: ${v:-none}"
[ "$(metric "$mine" 'ejob_alerts_dropped_total{channel="mail"}')" = 0 ] && pass "/metrics: nothing dropped" \
  || fail "/metrics: $(curl -s "http://127.0.0.1:$mine/metrics" | grep alerts)"

kill -TERM $P1 $P2
wait $P1; R1=$?
wait $P2; R2=$?
[ $R1 -eq 0 ] && [ $R2 -eq 0 ] && pass "both daemons stop with exit 0" || fail "exit $R1 $R2"

# -------------------------------------------------------- alerts test
sed -i "s|^  rules:|    down: {type: slack, url: \"http://127.0.0.1:$DEAD/x\"}\n  rules:|" "$D/jobs.yaml"
"$E" alerts test hook -c "$D/jobs.yaml" >"$D/t1.out" 2>&1; RC=$?
[ $RC -eq 0 ] && grep -q "^hook (webhook): sent: HTTP 200: ok" "$D/t1.out" \
  && pass "alerts test hook: HTTP 200" || fail "alerts test hook: exit $RC: $(cat "$D/t1.out")"
[ "$(field test 0 "rec['signature_ok'], b['test']")" = "(True, True)" ] \
  && pass "the test message is signed and says it is a test" || fail "test message: $(tail -1 "$D/hook.jsonl")"
"$E" alerts test -c "$D/jobs.yaml" >"$D/t2.out" 2>&1; RC=$?
grep -q "^mail (email): sent: SMTP 250" "$D/t2.out" && pass "alerts test: the SMTP reply" \
  || fail "alerts test mail: $(cat "$D/t2.out")"
[ $RC -eq 1 ] && grep -q "^down (slack): NOT sent: " "$D/t2.out" \
  && pass "alerts test: a dead receiver is reported, exit 1" || fail "alerts test all: exit $RC: $(cat "$D/t2.out")"
"$E" alerts test nosuch -c "$D/jobs.yaml" >/dev/null 2>"$D/t3.err"; RC=$?
[ $RC -eq 2 ] && grep -q 'no channel "nosuch"' "$D/t3.err" && pass "alerts test: an unknown channel, exit 2" \
  || fail "alerts test nosuch: exit $RC"
echo "$FAILS failure(s)"
exit $((FAILS > 0))
