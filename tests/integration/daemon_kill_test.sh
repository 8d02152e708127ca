#!/bin/bash
# `ejob kill` through ZooKeeper: two `ejob run` daemons each run one item of
# a script job; `ejob kill --server` (from the CLI, neither daemon's
# process) stops the item of the other daemon within 1 s, its whole process
# group gone, while the first daemon's item keeps running; --item kills
# that one too, a script ignoring SIGTERM is SIGKILLed after
# timeoutGraceSeconds. Both runs are recorded as killed, by whom, in the
# history; a run that starts after a request is not killed by it; and a
# script job past its timeoutSeconds is recorded as a timeout.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1
now_ms() { date +%s%3N; }
export EJOB_REGISTRY="$ZKF_CONNECT/kill"

D=$ZKF_DIR
DB=$D/history.db
cat >"$D/item.sh" <<'EOF'
#!/bin/sh
# item.sh MARKS TERM_MODE CONTEXT: "start ITEM PGID TASKID", then sleeps in a
# child of its own group; TERM_MODE "ignore" ignores SIGTERM.
[ "$2" = ignore ] && trap '' TERM
item=$(printf '%s' "$3" | sed -n 's/.*"shardingItem":\([0-9]*\).*/\1/p')
task=$(printf '%s' "$3" | sed -n 's/.*"taskId":"\([^"]*\)".*/\1/p')
echo "start $item $$ $task" >>"$1"
sleep 60
echo "end $item" >>"$1"
EOF
chmod +x "$D/item.sh"
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: kill
  sessionTimeoutMilliseconds: 10000
tracing:
  type: SQLITE
  url: $DB
jobs:
  killJob:
    elasticJobType: SCRIPT
    cron: "0 0 3 * * ?"
    shardingTotalCount: 2
    overwrite: true
    props:
      script.command.line: $D/item.sh $D/kill.marks run
  stubbornJob:
    elasticJobType: SCRIPT
    cron: "0 0 3 * * ?"
    shardingTotalCount: 1
    timeoutGraceSeconds: 1
    overwrite: true
    props:
      script.command.line: $D/item.sh $D/stubborn.marks ignore
  slowJob:
    elasticJobType: SCRIPT
    cron: "0 0 3 * * ?"
    shardingTotalCount: 1
    timeoutSeconds: 1
    overwrite: true
    props:
      script.command.line: $D/item.sh $D/slow.marks run
YAML
for ip in 127.0.0.51 127.0.0.52; do
  EJOB_IP=$ip setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" >>"$D/daemon-$ip.log" 2>&1 &
  zkf_track $!
done
for ip in 127.0.0.51 127.0.0.52; do
  wait_for 30 "daemon $ip started" logged "$D/daemon-$ip.log" "running 3 job"
done
sleep 1
"$E" trigger killJob >/dev/null || fail "trigger"
two_started() { [ "$(grep -c '^start' "$D/kill.marks" 2>/dev/null)" -ge 2 ]; }
wait_for 30 "both items started" two_started
read -r _ ITEM_B PG_B _ < <(grep '@-@127.0.0.52@-@' "$D/kill.marks")
read -r _ ITEM_A PG_A _ < <(grep '@-@127.0.0.51@-@' "$D/kill.marks")
[ -n "${PG_A:-}" ] && [ -n "${PG_B:-}" ] && pass "one item on each daemon ($ITEM_A on .51, $ITEM_B on .52)" ||
  fail "items: $(cat "$D/kill.marks")"

# No live process of the group (an exited one waiting to be reaped is dead).
group_gone() { [ -z "$(ps -eo pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/')" ]; }
T0=$(now_ms)
OUT=$("$E" kill killJob --server 127.0.0.52) || fail "ejob kill: $OUT"
TK=$(now_ms)
while ! group_gone "$PG_B" && [ $(($(now_ms) - T0)) -lt 5000 ]; do sleep 0.02; done
T1=$(now_ms)
echo "ejob kill took $((TK - T0)) ms; the group was gone $((T1 - TK)) ms after it returned"
group_gone "$PG_B" && [ $((T1 - T0)) -lt 1000 ] &&
  pass "the .52 item's process group is gone $((T1 - T0)) ms after ejob kill started" ||
  fail "the .52 item's group after $((T1 - T0)) ms: $(ps -o pid,pgid,cmd -g "$PG_B" 2>&1 | tail -n +2)"
grep -q "^kill request kill-[0-9]* for killJob on 127.0.0.52 by " <<<"$OUT" && pass "ejob kill says what it asked" || fail "output: $OUT"
sleep 0.3
group_gone "$PG_A" && fail "the .51 item was killed too" || pass "the .51 item still runs (not targeted)"

T0=$(now_ms)
"$E" kill killJob --item "$ITEM_A" --json >"$D/kill.json" || fail "ejob kill --item"
echo "ejob kill --item took $(($(now_ms) - T0)) ms"
while ! group_gone "$PG_A" && [ $(($(now_ms) - T0)) -lt 5000 ]; do sleep 0.02; done
group_gone "$PG_A" && pass "--item $ITEM_A: its group is gone after $(($(now_ms) - T0)) ms" || fail "--item: still running"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["item"]==int(sys.argv[2]) and d["request"].startswith("kill-"), d' \
  "$D/kill.json" "$ITEM_A" && pass "--json names the request" || fail "json: $(cat "$D/kill.json")"

# A run that starts after the request is not killed by it.
"$E" trigger killJob >/dev/null
four_started() { [ "$(grep -c '^start' "$D/kill.marks" 2>/dev/null)" -ge 4 ]; }
wait_for 30 "the next runs started" four_started
sleep 1
NEW=$(grep '^start' "$D/kill.marks" | tail -2 | awk '{print $3}')
alive=0; for g in $NEW; do group_gone "$g" || alive=$((alive + 1)); done
[ $alive -eq 2 ] && pass "runs started after the requests are not killed by them" || fail "$alive of 2 new runs alive"
"$E" kill killJob >/dev/null || fail "kill all"
for g in $NEW; do wait_for 5 "new run $g killed" group_gone "$g"; done

# A script ignoring SIGTERM: SIGKILL to the group after timeoutGraceSeconds (1 s).
"$E" trigger stubbornJob >/dev/null
wait_for 30 "the stubborn item started" logged "$D/stubborn.marks" "^start"
read -r _ _ PG_S _ < <(grep '^start' "$D/stubborn.marks")
T0=$(now_ms)
"$E" kill stubbornJob >/dev/null || fail "kill stubborn"
while ! group_gone "$PG_S" && [ $(($(now_ms) - T0)) -lt 10000 ]; do sleep 0.05; done
T1=$(now_ms)
group_gone "$PG_S" && [ $((T1 - T0)) -ge 900 ] && [ $((T1 - T0)) -lt 2500 ] &&
  pass "SIGTERM ignored: the group was SIGKILLed $((T1 - T0)) ms after the kill (grace 1 s)" ||
  fail "stubborn group after $((T1 - T0)) ms"

# timeoutSeconds: 1 on a 60 s script.
"$E" trigger slowJob >/dev/null
wait_for 30 "the slow item started" logged "$D/slow.marks" "^start"

# The history: killed by whom, and the timeout.
hist() { "$E" history "$1" --store "sqlite:$DB" --json 2>/dev/null; }
results() { hist "$1" | python3 -c 'import json,sys; print(" ".join(sorted(r["result"] for r in json.load(sys.stdin))))'; }
killed4() { [ "$(results killJob)" = "killed killed killed killed" ]; }
wait_for 15 "four killJob runs recorded as killed" killed4
BY=$(hist killJob | python3 -c 'import json,sys; print(sorted({r["killedBy"] for r in json.load(sys.stdin)}))')
[ "$BY" = "['${USER:-uid}@$(hostname)']" ] && pass "killedBy names the user and host" || fail "killedBy: $BY"
timeout1() { [ "$(results slowJob)" = "timeout" ]; }
wait_for 15 "the slow run recorded as a timeout" timeout1
stub() { [ "$(results stubbornJob)" = "killed" ]; }
wait_for 15 "the stubborn run recorded as killed" stub
TABLE=$("$E" history killJob --store "sqlite:$DB")
grep -q "KILLED by " <<<"$TABLE" && pass "the table shows KILLED by" || fail "table: $TABLE"
ELOG=$(sqlite3 "$DB" "SELECT count(*) FROM JOB_EXECUTION_LOG WHERE job_name='killJob' AND is_success=0")
[ "$ELOG" = 4 ] && pass "JOB_EXECUTION_LOG keeps 2.1.5's rows (is_success 0)" || fail "JOB_EXECUTION_LOG: $ELOG"

# Usage errors.
"$E" kill >/dev/null 2>&1; [ $? -eq 2 ] && pass "no job: usage error" || fail "no job"
"$E" kill killJob --instance a --server b >/dev/null 2>&1; [ $? -eq 2 ] && pass "--instance with --server: usage error" || fail "both"
"$E" kill noSuchJob >/dev/null 2>&1; [ $? -eq 1 ] && pass "no such job: exit 1" || fail "no such job"

echo "$FAILS failure(s)"
exit $((FAILS > 0))
