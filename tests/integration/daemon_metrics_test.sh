#!/bin/bash
# `ejob run --metrics-listen`: /metrics parsed whole by a strict checker of
# the text format (prom_check) at every scrape; counters that must move do
# (fires, item runs, a failing script's result="failed", ZooKeeper
# requests); /readyz is 503 before the registry connects and while
# ZooKeeper is down, 200 otherwise; /healthz stays 200 through a ZooKeeper
# outage; other paths 404, other methods 405; bad addresses are refused; a
# reload drops a removed job's gauges; a failover is counted on the instance
# that takes the item over. The YAML's metrics.listen: the flag overrides it,
# a bad one is refused by --check at its FILE:LINE:COL with the flag's words,
# a daemon with only the file's section serves there, and a reload that
# moves it keeps the running endpoint and says a restart is needed. The
# history store's counters: written grows with runs, nothing dropped or
# rejected, connected; no history series when tracing is NONE. Jobs whose
# item outlasts their 1-s period have the fires they miss counted in
# ejob_fires_not_run_total: reason "busy" with misfire on (the items are
# marked misfire, and their re-runs counted in ejob_misfire_runs_total),
# "running" with misfire off (the scheduler's report). /metrics never labels
# a series "job" (Prometheus's own label): ejob_job; ejob_ready follows
# /readyz.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
CHECK=${EJ_BUILD_DIR:?EJ_BUILD_DIR must name the build directory}/prom_check
[ -x "$CHECK" ] || { echo "FAIL: $CHECK not built" >&2; exit 1; }
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D"
# Its own state directory (history.db, an embedded registry), never the
# user's default one.
export EJOB_STATE_DIR=$D/state

# ------------------------------------------- the checker can fail at all
bad_exposition() { # name, text: the checker must refuse it
  if printf '%b' "$2" | "$CHECK" >/dev/null 2>"$D/check.err"; then
    fail "checker accepted $1"
  else
    pass "checker refuses $1 ($(cat "$D/check.err"))"
  fi
}
printf '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 2\n' | "$CHECK" >/dev/null \
  && pass "checker accepts a good exposition" || fail "checker refuses a good exposition"
bad_exposition "no final newline" '# TYPE a gauge\na 1'
bad_exposition "a bad escape" '# TYPE a gauge\na{x="\\t"} 1\n'
bad_exposition "a label twice" '# TYPE a gauge\na{x="1",x="2"} 1\n'
bad_exposition "a negative counter" '# TYPE a_total counter\na_total -1\n'
bad_exposition "a series twice" '# TYPE a gauge\na 1\na 2\n'
bad_exposition "a family split" '# TYPE a gauge\n# TYPE b gauge\na{x="1"} 1\nb 1\na{x="2"} 1\n'
bad_exposition "TYPE after samples" '# TYPE a gauge\na 1\n# TYPE a gauge\n'
bad_exposition "a sample without TYPE" 'a 1\n'
bad_exposition "a bad value" '# TYPE a gauge\na 1,5\n'
bad_exposition "buckets not cumulative" \
  '# TYPE h histogram\nh_bucket{le="1"} 3\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n'
bad_exposition "no +Inf bucket" '# TYPE h histogram\nh_bucket{le="1"} 3\nh_sum 1\nh_count 3\n'
bad_exposition "_count not the +Inf bucket" \
  '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n'
bad_exposition "buckets out of order" \
  '# TYPE h histogram\nh_bucket{le="2"} 1\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'

# --------------------------------------------------------- bad addresses
# The file names a port of its own; the flag given below overrides it.
FILEPORT=$(zkf_free_port)
cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: met
  sessionTimeoutMilliseconds: 4000
  connectionTimeoutMilliseconds: 60000
metrics:
  listen: 127.0.0.1:$FILEPORT
jobs:
  okJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 2
    overwrite: true
    props:
      script.command.line: /bin/true
  badJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'echo broken; exit 3'
EOF
"$E" run -c "$D/jobs.yaml" --metrics-listen 127.0.0.1 2>"$D/err"; RC=$?
[ $RC -eq 2 ] && grep -q "expected HOST:PORT" "$D/err" && pass "address without a port: exit 2, says why" \
  || fail "no port: exit $RC, $(cat "$D/err")"
"$E" run -c "$D/jobs.yaml" --metrics-listen example.com:80 2>"$D/err"; RC=$?
[ $RC -eq 2 ] && grep -q "not an IPv4 address" "$D/err" && pass "host name: exit 2, says why" \
  || fail "host name: exit $RC, $(cat "$D/err")"
FLAG_WHY=$(sed -n 's/^ejob run: --metrics-listen: //p' "$D/err")
"$E" run -c "$D/jobs.yaml" --check --metrics-listen 127.0.0.1 2>"$D/err" >/dev/null; RC=$?
[ $RC -eq 2 ] && grep -q "expected HOST:PORT" "$D/err" && pass "--check refuses a bad flag too" \
  || fail "--check with a bad flag: exit $RC, $(cat "$D/err")"
# The same address in the file: refused at its line and column, same words.
cat >"$D/badm.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: met
metrics:
  listen: example.com:80
  port: 9464
EOF
"$E" run -c "$D/badm.yaml" --check >"$D/out" 2>"$D/err"; RC=$?
[ $RC -eq 2 ] && pass "bad metrics.listen: --check exits 2" || fail "bad metrics.listen: exit $RC, $(cat "$D/out")"
[ "$(grep -c 'metrics.listen' "$D/err")" = 1 ] \
  && grep -qxF "$D/badm.yaml:5:11: metrics.listen: $FLAG_WHY" "$D/err" \
  && pass "file:line:col names metrics.listen with the flag's words: $(grep listen "$D/err")" \
  || fail "bad metrics.listen message: $(cat "$D/err") (flag said: $FLAG_WHY)"
grep -qxF "$D/badm.yaml:6:3: metrics: unknown key \"port\"" "$D/err" \
  && pass "unknown key under metrics refused" || fail "unknown metrics key: $(cat "$D/err")"
"$E" run -c "$D/badm.yaml" --check --metrics-listen 127.0.0.1:0 >/dev/null 2>"$D/err"; RC=$?
[ $RC -eq 2 ] && grep -q "metrics.listen" "$D/err" \
  && pass "the flag does not excuse a bad file" || fail "bad file with a good flag: exit $RC"
"$E" run -c "$D/jobs.yaml" --check >"$D/out" 2>"$D/err"; RC=$?
[ $RC -eq 0 ] && pass "a good metrics section passes --check" || fail "good file: exit $RC, $(cat "$D/err")"

# ------------------------------------------ readiness before ZooKeeper
zkf_stop
MPORT=$(zkf_free_port)
URL=http://127.0.0.1:$MPORT
setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" --metrics-listen "127.0.0.1:$MPORT" \
  2>"$D/daemon.log" &
P=$!; zkf_track $P
status_of() { curl -s -o "$D/body" -w '%{http_code}' "$URL$1"; }
is_status() { [ "$(status_of "$1")" = "$2" ]; }
wait_for 20 "endpoint up before ZooKeeper answers (healthz 200)" is_status /healthz 200
port_open() { curl -s -o /dev/null "http://127.0.0.1:$1/healthz"; }
port_open "$FILEPORT" && fail "the file's port answers although --metrics-listen overrides it" \
  || pass "--metrics-listen overrides the file's metrics.listen"
[ "$(status_of /readyz)" = 503 ] && grep -q "not ready: connecting to ZooKeeper" "$D/body" \
  && pass "readyz 503 before connecting: $(cat "$D/body")" || fail "readyz before connect: $(cat "$D/body")"
scrape() { # file: scrape and check the whole exposition
  curl -s -D "$1.headers" "$URL/metrics" >"$1.raw" || { fail "scrape failed"; return 1; }
  "$CHECK" <"$1.raw" >"$1" 2>"$1.err" || { fail "exposition invalid: $(cat "$1.err")"; return 1; }
}
value() { # file, series: the value of one series ("" when absent)
  awk -v s="$2" 'index($0, s " ") == 1 { print $NF; exit }' "$1"
}
scrape "$D/s0" && pass "exposition valid before connecting"
[ "$(value "$D/s0" 'ejob_zookeeper_session_state{state="connecting"}')" = 1 ] \
  && pass "session state connecting" || fail "session state: $(grep session_state "$D/s0")"
[ "$(value "$D/s0" ejob_ready)" = 0 ] && pass "ejob_ready 0 before connecting" \
  || fail "ejob_ready before connecting: '$(value "$D/s0" ejob_ready)'"
grep -qi '^Content-Type: text/plain; version=0.0.4' "$D/s0.headers" \
  && pass "Content-Type text/plain; version=0.0.4" || fail "headers: $(cat "$D/s0.headers")"

zkf_restart || exit 1
wait_for 60 "readyz 200 once ZooKeeper is up and both jobs registered" is_status /readyz 200
grep -qx ready "$D/body" && pass "readyz body" || fail "readyz body: $(cat "$D/body")"

# ---------------------------------------------------- counters that move
num_ge() { awk -v a="${1:-}" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 >= b + 0) }'; }
num_gt() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { exit !(a != "" && b != "" && a + 0 > b + 0) }'; }
runs_ok() {
  scrape "$D/s1" && num_ge "$(value "$D/s1" 'ejob_item_runs_total{ejob_job="okJob",result="success"}')" 2 &&
    num_ge "$(value "$D/s1" 'ejob_item_runs_total{ejob_job="badJob",result="failed"}')" 1
}
wait_for 60 "okJob items ran and badJob failed" runs_ok
GROWING=('ejob_job_fires_total{ejob_job="okJob"}' 'ejob_item_runs_total{ejob_job="okJob",result="success"}'
         'ejob_item_runs_total{ejob_job="badJob",result="failed"}' 'ejob_zookeeper_requests_total'
         'ejob_item_run_duration_seconds_count{ejob_job="okJob"}' 'ejob_event_posted_total'
         'ejob_fire_lateness_seconds_count{ejob_job="okJob"}')
all_grew() {
  scrape "$D/s2" || return 1
  local s
  for s in "${GROWING[@]}"; do num_gt "$(value "$D/s2" "$s")" "$(value "$D/s1" "$s")" || return 1; done
}
sleep 2
wait_for 60 "every moving counter grew between two scrapes" all_grew
for s in "${GROWING[@]}"; do
  a=$(value "$D/s1" "$s"); b=$(value "$D/s2" "$s")
  num_gt "$b" "$a" && pass "$s grows ($a -> $b)" || fail "$s did not grow: '$a' -> '$b'"
done
[ "$(value "$D/s2" 'ejob_item_runs_total{ejob_job="badJob",result="success"}')" = 0 ] \
  && pass "the failing script has no success (its series at 0)" || fail "badJob success: $(grep badJob "$D/s2")"
[ "$(value "$D/s2" 'ejob_item_runs_total{ejob_job="okJob",result="failed"}')" = 0 ] \
  && pass "the good script has no failure (its series at 0)" || fail "okJob failed: $(grep okJob "$D/s2")"
grep -Eq '[{,]job="' "$D/s2" && fail "a series labelled job (Prometheus's own label): $(grep -E '[{,]job="' "$D/s2" | head -1)" \
  || pass "no series labelled job: ejob_job names the job"
expect() { # series, value
  local v; v=$(value "$D/s2" "$1")
  [ "$v" = "$2" ] && pass "$1 = $2" || fail "$1 = '$v', want $2"
}
expect 'ejob_job_leader{ejob_job="okJob"}' 1
expect 'ejob_job_shard_items{ejob_job="okJob"}' 2
expect 'ejob_job_shard_items{ejob_job="badJob"}' 1
expect 'ejob_jobs' 2
expect 'ejob_ready' 1
expect 'ejob_zookeeper_session_state{state="connected"}' 1
expect 'ejob_zookeeper_session_state{state="connecting"}' 0
expect 'ejob_zookeeper_session_timeout_seconds' 4
expect 'ejob_event_dropped_total' 0
num_ge "$(value "$D/s2" ejob_event_queue_depth)" 0 \
  && pass "ejob_event_queue_depth present ($(value "$D/s2" ejob_event_queue_depth))" \
  || fail "no ejob_event_queue_depth: $(grep '^ejob_event' "$D/s2")"
num_ge "$(value "$D/s2" 'ejob_reshards_total{ejob_job="okJob"}')" 1 \
  && pass "the leader counted its sharding assignment" \
  || fail "reshards: $(grep '^ejob_reshards_total' "$D/s2")"
# Lateness: every cron fire started counted once (the checker has verified
# the buckets are cumulative and end in _count); a 1-s job on an idle
# scheduler starts most fires well within a second of their time.
LC=$(value "$D/s2" 'ejob_fire_lateness_seconds_count{ejob_job="okJob"}')
[ "$LC" = "$(value "$D/s2" 'ejob_job_fires_total{ejob_job="okJob"}')" ] \
  && pass "lateness counts every cron fire ($LC)" \
  || fail "lateness count $LC, fires $(value "$D/s2" 'ejob_job_fires_total{ejob_job="okJob"}')"
L1=$(value "$D/s2" 'ejob_fire_lateness_seconds_bucket{ejob_job="okJob",le="1"}')
num_ge "$L1" 1 && pass "$L1 of $LC fires started within 1 s of their time" \
  || fail "no fire within 1 s: $(grep '^ejob_fire_lateness_seconds.*okJob' "$D/s2")"
num_ge "$(value "$D/s2" 'ejob_item_run_duration_seconds_bucket{ejob_job="okJob",le="+Inf"}')" 1 \
  && pass "duration histogram has observations" || fail "duration histogram empty"
num_gt "$(value "$D/s2" process_resident_memory_bytes)" 1000000 \
  && pass "process_resident_memory_bytes $(value "$D/s2" process_resident_memory_bytes)" \
  || fail "rss: $(value "$D/s2" process_resident_memory_bytes)"
NEXT=$(value "$D/s2" 'ejob_job_next_fire_timestamp_seconds{ejob_job="okJob"}')
awk -v n="$NEXT" -v t="$(date +%s)" 'BEGIN { exit !(n > t - 5 && n < t + 5) }' \
  && pass "next fire within seconds of now ($NEXT)" || fail "next fire $NEXT"

# ------------------------------------------------------ other requests
[ "$(status_of /nope)" = 404 ] && pass "unknown path: 404" || fail "unknown path: $(status_of /nope)"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/metrics")" = 405 ] \
  && pass "POST: 405" || fail "POST not refused"
HEAD_OUT=$(curl -s -I "$URL/metrics")
grep -q '^HTTP/1.1 200' <<<"$HEAD_OUT" && pass "HEAD: 200" || fail "HEAD: $HEAD_OUT"

# ----------------------------------------- ZooKeeper away and back
zkf_stop
wait_for 20 "readyz 503 while ZooKeeper is down" is_status /readyz 503
grep -q "not ready: ZooKeeper session" "$D/body" && pass "says why: $(cat "$D/body")" \
  || fail "readyz body: $(cat "$D/body")"
is_status /healthz 200 && pass "healthz stays 200 while ZooKeeper is down" || fail "healthz: $(cat "$D/body")"
scrape "$D/s3" && pass "exposition valid while ZooKeeper is down"
[ "$(value "$D/s3" ejob_ready)" = 0 ] && pass "ejob_ready 0 while ZooKeeper is down" \
  || fail "ejob_ready while ZooKeeper is down: '$(value "$D/s3" ejob_ready)'"
[ "$(value "$D/s3" 'ejob_zookeeper_session_state{state="connected"}')" = 0 ] \
  && pass "session state no longer connected" || fail "state: $(grep session_state "$D/s3")"
num_ge "$(value "$D/s3" ejob_zookeeper_disconnects_total)" 1 && pass "disconnect counted" \
  || fail "disconnects: $(value "$D/s3" ejob_zookeeper_disconnects_total)"
zkf_restart || exit 1
wait_for 60 "readyz 200 again after ZooKeeper is back" is_status /readyz 200
scrape "$D/s4"
R=$(awk '/^ejob_zookeeper_reconnects_total/ { n += $NF } END { print n + 0 }' "$D/s4")
num_ge "$R" 1 && pass "reconnect counted ($R)" || fail "reconnects: $(grep reconnects "$D/s4")"

# A reload that removes badJob: its per-job gauges go, readiness stays.
awk '/^  badJob:/ { skip = 1; next } skip && /^  [^ ]/ { skip = 0 } !skip' "$D/jobs.yaml" >"$D/jobs2.yaml"
# The reload also moves the file's metrics.listen: the flag still rules.
sed -i "s/^  listen: 127.0.0.1:$FILEPORT\$/  listen: 127.0.0.1:0/" "$D/jobs2.yaml"
grep -q '^  listen: 127.0.0.1:0$' "$D/jobs2.yaml" || fail "test: metrics.listen not rewritten"
cp "$D/jobs2.yaml" "$D/jobs.yaml"
kill -HUP $P
one_job() { scrape "$D/s6" && [ "$(value "$D/s6" ejob_jobs)" = 1 ]; }
wait_for 30 "after a reload without badJob: ejob_jobs 1" one_job
grep -q '^ejob_job_leader{ejob_job="badJob"}' "$D/s6" && fail "badJob still has a leader gauge" \
  || pass "badJob's per-job gauges are gone"
[ -n "$(value "$D/s6" 'ejob_job_leader{ejob_job="okJob"}')" ] && pass "okJob's stay" || fail "okJob gauges gone"
is_status /readyz 200 && pass "still ready after the reload" || fail "readyz after reload: $(cat "$D/body")"
grep -q "reload: metrics.listen is overridden by --metrics-listen 127.0.0.1:$MPORT; ignored" \
  "$D/daemon.log" && pass "reload: a changed metrics.listen under the flag is ignored, with a word" \
  || fail "no override warning: $(grep reload "$D/daemon.log")"

# An operator's shutdown of one job on this instance: not ready, says which.
EJOB_REGISTRY="$ZKF_CONNECT/met" "$E" shutdown okJob >/dev/null || fail "ejob shutdown okJob"
readyz_names_job() { is_status /readyz 503 && grep -q "not ready: job okJob: stopped" "$D/body"; }
wait_for 20 "readyz 503 after a console shutdown of okJob" readyz_names_job
scrape "$D/s5" && pass "exposition valid after the shutdown"
not_leading() { scrape "$D/s5" && [ "$(value "$D/s5" 'ejob_job_leader{ejob_job="okJob"}')" = 0 ]; }
wait_for 20 "okJob no longer leads here" not_leading

kill -TERM $P; wait $P; RC=$?
[ $RC -eq 0 ] && pass "SIGTERM: exit 0" || fail "exit $RC"
curl -s -o /dev/null "$URL/healthz" && fail "port still open after exit" || pass "port closed after exit"

# A port in use is refused at start (exit 1), before anything else runs.
nc -l 127.0.0.1 "$MPORT" </dev/null >/dev/null 2>&1 &
H=$!; zkf_track $H
listening() { [ -n "$(ss -Hltn "sport = :$MPORT")" ]; }
wait_for 10 "another process listens on the port" listening
timeout 60 "$E" run -c "$D/jobs.yaml" --metrics-listen "127.0.0.1:$MPORT" 2>"$D/err"; RC=$?
[ $RC -eq 1 ] && grep -q "cannot listen" "$D/err" && pass "port in use: exit 1, says why" \
  || fail "port in use: exit $RC, $(cat "$D/err")"
kill $H 2>/dev/null; wait $H 2>/dev/null

# ------------------------------------ a failover, counted on the survivor
# Two instances of a job whose items take 4 s; the one without metrics is
# killed while its item runs; the other takes the item over.
MPORT2=$(zkf_free_port)
cat >"$D/fo.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: met2
  sessionTimeoutMilliseconds: 4000
jobs:
  foJob:
    elasticJobType: SCRIPT
    cron: "0/10 * * * * ?"
    shardingTotalCount: 2
    failover: true
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'sleep 4'
tracing:
  type: NONE
EOF
EJOB_IP=127.0.0.21 setpriv --pdeathsig KILL "$E" run -c "$D/fo.yaml" --metrics-listen "127.0.0.1:$MPORT2" \
  2>"$D/a.log" &
PA=$!; zkf_track $PA
URL=http://127.0.0.1:$MPORT2
wait_for 30 "survivor ready" is_status /readyz 200
# Debug: the line of an item's start (info logs only its end) tells when to kill it.
EJOB_IP=127.0.0.22 setpriv --pdeathsig KILL "$E" run -c "$D/fo.yaml" --log-level debug 2>"$D/b.log" &
PB=$!; zkf_track $PB
b_runs() { grep -q "job=foJob item=[01] source=NORMAL_TRIGGER.*: started" "$D/b.log"; }
wait_for 40 "the second instance runs an item" b_runs
kill -KILL $PB; wait $PB 2>/dev/null
failed_over() { scrape "$D/s7" && num_ge "$(value "$D/s7" 'ejob_failovers_total{ejob_job="foJob"}')" 1; }
wait_for 90 'ejob_failovers_total{ejob_job="foJob"} counts the take-over' failed_over
grep -q '^# TYPE ejob_history_events_written_total counter$' "$D/s7.raw" \
  && ! grep -q '^ejob_history_' "$D/s7" \
  && pass "tracing NONE: the history families have no series" \
  || fail "history series without a store: $(grep '^ejob_history' "$D/s7")"
# The survivor led throughout: it wrote the assignment over both instances
# (the second ran an item), and writes one over itself alone at the first
# cron fire after the other died.
reshards2() { scrape "$D/s8" && num_ge "$(value "$D/s8" 'ejob_reshards_total{ejob_job="foJob"}')" 2; }
wait_for 40 'ejob_reshards_total{ejob_job="foJob"} >= 2 on the leader' reshards2
kill -TERM $PA; wait $PA; RC=$?
[ $RC -eq 0 ] && pass "survivor: SIGTERM -> exit 0" || fail "survivor exit $RC"

# ------------------------------------------- metrics from the file alone
MPORT3=$(zkf_free_port)
MPORT4=$(zkf_free_port)
cat >"$D/file.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: met3
  sessionTimeoutMilliseconds: 4000
metrics:
  listen: 127.0.0.1:$MPORT3
jobs:
  fileJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/true
  slowJob:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'sleep 2.5'
  slowNoMisfire:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    misfire: false
    overwrite: true
    props:
      script.command.line: /bin/sh -c 'sleep 2.5'
EOF
setpriv --pdeathsig KILL "$E" run -c "$D/file.yaml" --state-dir "$D/state3" 2>"$D/file.log" &
PF=$!; zkf_track $PF
URL=http://127.0.0.1:$MPORT3
wait_for 30 "a daemon with only metrics.listen in its file serves /readyz there" is_status /readyz 200
grep -q "serving /metrics, /healthz and /readyz on 127.0.0.1:$MPORT3 " "$D/file.log" \
  && pass "its log names the file's address" || fail "log: $(grep metrics "$D/file.log")"
scrape "$D/f1" && [ "$(value "$D/f1" ejob_jobs)" = 3 ] && pass "its /metrics is valid and has the jobs" \
  || fail "file daemon /metrics: $(head -c 300 "$D/f1.raw")"

# Its history (the default store, STATE_DIR/history.db): the store's
# counters, the written one growing as the job runs.
W1=$(value "$D/f1" ejob_history_events_written_total)
num_ge "$W1" 0 && pass "ejob_history_events_written_total is exposed ($W1)" \
  || fail "no written counter: $(grep '^ejob_history' "$D/f1")"
hist_grew() {
  scrape "$D/f2" && num_gt "$(value "$D/f2" ejob_history_events_written_total)" "$W1" &&
    num_ge "$(value "$D/f2" 'ejob_item_runs_total{ejob_job="fileJob",result="success"}')" 2
}
sleep 2
wait_for 30 "ejob_history_events_written_total grows as fileJob runs" hist_grew
W2=$(value "$D/f2" ejob_history_events_written_total)
for s in ejob_history_events_dropped_total ejob_history_events_rejected_total; do
  [ "$(value "$D/f2" $s)" = 0 ] && pass "$s 0" || fail "$s = '$(value "$D/f2" $s)', want 0"
done
[ "$(value "$D/f2" ejob_history_store_up)" = 1 ] && pass "ejob_history_store_up 1" \
  || fail "ejob_history_store_up '$(value "$D/f2" ejob_history_store_up)'"
num_ge "$(value "$D/f2" ejob_history_queue_depth)" 0 && pass "ejob_history_queue_depth exposed" \
  || fail "no history queue depth"
LW=$(value "$D/f2" ejob_history_last_write_timestamp_seconds)
awk -v n="$LW" -v t="$(date +%s)" 'BEGIN { exit !(n > t - 30 && n <= t + 1) }' \
  && pass "last history write within seconds of now ($LW)" || fail "last write $LW"
# What it counts is in the database.
ROWS=$("$E" history fileJob --store "sqlite:$D/state3/history.db" --json 2>"$D/hist.err" |
  python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null)
num_ge "$ROWS" 1 && pass "ejob history reads $ROWS run(s) of fileJob ($W2 events written)" \
  || fail "history rows: '$ROWS' $(cat "$D/hist.err")"

# The slow jobs' items take 2.5 s of their 1-s period: the fire times that
# pass while they run are not run, and counted with their reason.
missed_both() {
  scrape "$D/f3" &&
    num_ge "$(value "$D/f3" 'ejob_fires_not_run_total{ejob_job="slowJob",reason="busy"}')" 1 &&
    num_ge "$(value "$D/f3" 'ejob_fires_not_run_total{ejob_job="slowNoMisfire",reason="running"}')" 1
}
wait_for 30 'ejob_fires_not_run_total counts missed fires: slowJob "busy", slowNoMisfire "running"' \
  missed_both
grep '^ejob_fires_not_run_total' "$D/f3" | sed 's/^/  /'
grep -q 'job slowJob: fire missed while the job still runs: items \[0\] run again' "$D/file.log" \
  && pass "the log says slowJob's items were marked misfire" || fail "no misfire line for slowJob"
grep -q "status job=slowNoMisfire .*fire not run (running)" "$D/file.log" \
  && pass "the log says slowNoMisfire's fires were not run (running)" \
  || fail "no 'fire not run (running)' logged for slowNoMisfire"
[ "$(value "$D/f3" 'ejob_fires_not_run_total{ejob_job="slowNoMisfire",reason="busy"}')" = 0 ] \
  && pass "misfire off: nothing counted as busy" \
  || fail "slowNoMisfire busy: $(grep slowNoMisfire "$D/f3" | grep not_run)"
# The items marked misfire run again as MISFIRE runs: counted, with misfire on only.
misfire_runs() { scrape "$D/f4" && num_ge "$(value "$D/f4" 'ejob_misfire_runs_total{ejob_job="slowJob"}')" 1; }
wait_for 20 'ejob_misfire_runs_total{ejob_job="slowJob"} counts its misfire re-runs' misfire_runs
[ "$(value "$D/f4" 'ejob_misfire_runs_total{ejob_job="slowNoMisfire"}')" = 0 ] \
  && pass "misfire off: no misfire runs (the series at 0)" \
  || fail "slowNoMisfire misfire runs: '$(value "$D/f4" 'ejob_misfire_runs_total{ejob_job="slowNoMisfire"}')'"
num_ge "$(value "$D/f3" ejob_event_queue_depth)" 0 && pass "ejob_event_queue_depth present here too" \
  || fail "no ejob_event_queue_depth: $(grep '^ejob_event' "$D/f3")"

# A reload that moves the address: the endpoint stays, the log says why.
sed -i "s/^  listen: 127.0.0.1:$MPORT3\$/  listen: 127.0.0.1:$MPORT4/" "$D/file.yaml"
kill -HUP $PF
moved_warned() {
  grep -q "reload: metrics.listen changes take effect only after a restart; the endpoint stays 127.0.0.1:$MPORT3" "$D/file.log"
}
wait_for 20 "a reload that moves metrics.listen warns that a restart is needed" moved_warned
is_status /readyz 200 && pass "the endpoint still serves on the old port" || fail "old port after reload"
port_open "$MPORT4" && fail "the new port answers before a restart" || pass "the new port is not opened"
kill -TERM $PF; wait $PF; RC=$?
[ $RC -eq 0 ] && pass "file daemon: SIGTERM -> exit 0" || fail "file daemon exit $RC"

echo "$FAILS failure(s)"
exit $((FAILS > 0))
