#!/bin/bash
# The control commands (jobs, status, trigger, disable/enable, disable-item/
# enable-item, shutdown, remove, config get/set, dump) on a job laid out in
# ZooKeeper exactly as a Java ElasticJob 2.1.5 instance writes it: the nodes
# are created here with ZooKeeper's own client (instances, leader and running
# nodes ephemeral, held by a zkCli session), not by ejob.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
# run CMD...: runs ejob, keeps stdout in $OUT, stderr in $ERR, exit code in $RC.
run() {
  OUT=$("$E" "$@" 2>"$ZKF_DIR/stderr"); RC=$?
  ERR=$(cat "$ZKF_DIR/stderr")
}
expect_rc() { [ "$RC" -eq "$1" ] && pass "$2 (exit $RC)" || fail "$2: exit $RC, wanted $1; stderr: $ERR"; }
expect_out() { grep -qE -- "$1" <<<"$OUT" && pass "$2" || fail "$2: stdout lacks /$1/: $OUT"; }
expect_err() { [ "$ERR" = "$1" ] && pass "$2" || fail "$2: stderr is '$ERR', wanted '$1'"; }
expect_err_re() { grep -qE -- "$1" <<<"$ERR" && pass "$2" || fail "$2: stderr lacks /$1/: $ERR"; }
zk_get() { zkf_cli get "$1"; }
zk_exists() { zkf_cli stat "$1" | grep -q cZxid; }

# A zkCli session kept open on a fifo: it owns the ephemeral nodes.
mkfifo "$ZKF_DIR/session.fifo"
setpriv --pdeathsig KILL java -Xmx128m -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
  org.apache.zookeeper.ZooKeeperMain -server "$ZKF_CONNECT" <"$ZKF_DIR/session.fifo" >"$ZKF_DIR/session.log" 2>&1 &
zkf_track $!
exec 7>"$ZKF_DIR/session.fifo"

CFG='{"jobName":"javaJob","jobClass":"com.dangdang.ddframe.job.api.script.ScriptJob","jobType":"SCRIPT","cron":"0/2 * * * * ?","shardingTotalCount":4,"shardingItemParameters":"0\u003dBeijing,1\u003dShanghai","jobParameter":"","failover":true,"misfire":true,"description":"","jobProperties":{"job_exception_handler":"com.dangdang.ddframe.job.executor.handler.impl.DefaultJobExceptionHandler","executor_service_handler":"com.dangdang.ddframe.job.executor.handler.impl.DefaultExecutorServiceHandler"},"scriptCommandLine":"/opt/jobs/log-item.sh","monitorExecution":true,"maxTimeDiffSeconds":-1,"monitorPort":-1,"jobShardingStrategyClass":"","reconcileIntervalMinutes":10,"disabled":false,"overwrite":true}'
cat >&7 <<CMDS
create /ops ""
create /ops/javaJob ""
create /ops/javaJob/config '$CFG'
create /ops/javaJob/servers ""
create /ops/javaJob/servers/192.168.1.10 ""
create /ops/javaJob/servers/192.168.1.11 ""
create /ops/javaJob/instances ""
create -e /ops/javaJob/instances/192.168.1.10@-@100 ""
create -e /ops/javaJob/instances/192.168.1.11@-@200 ""
create /ops/javaJob/leader ""
create /ops/javaJob/leader/election ""
create -e /ops/javaJob/leader/election/instance "192.168.1.10@-@100"
create /ops/javaJob/sharding ""
create /ops/javaJob/sharding/0 ""
create /ops/javaJob/sharding/0/instance "192.168.1.10@-@100"
create /ops/javaJob/sharding/1 ""
create /ops/javaJob/sharding/1/instance "192.168.1.10@-@100"
create -e /ops/javaJob/sharding/1/running ""
create /ops/javaJob/sharding/2 ""
create /ops/javaJob/sharding/2/instance "192.168.1.11@-@200"
create /ops/javaJob/sharding/2/misfire ""
create /ops/javaJob/sharding/3 ""
create /ops/javaJob/sharding/3/instance "192.168.1.11@-@200"
create /ops/brokenJob ""
create /ops/brokenJob/config '{"jobName":"brokenJob","jobType":"SCRIPT","cron":"0/2 * * * * ?","shardingTotalCount":"three"}'
create /ops/notAJob ""
create /ops/notAJob/leftover ""
CMDS
for i in $(seq 1 200); do
  grep -q 'Created /ops/notAJob/leftover' "$ZKF_DIR/session.log" && break
  sleep 0.05
done
grep -q 'Created /ops/notAJob/leftover' "$ZKF_DIR/session.log" || { echo "setup failed:"; cat "$ZKF_DIR/session.log"; exit 1; }

export EJOB_REGISTRY="$ZKF_CONNECT/ops"
unset EJOB_NAMESPACE EJOB_STATE_DIR

# ---------------------------------------------------------------- help
run --help; expect_rc 0 "ejob --help"
HELP=$OUT
for c in jobs status trigger disable enable disable-item enable-item shutdown remove config dump run registry; do
  grep -qE "^  $c " <<<"$HELP" && pass "--help lists $c" || fail "--help does not list $c"
  run "$c" --help; expect_rc 0 "ejob $c --help"; expect_out "^Usage: ejob $c" "$c --help shows usage"
done
run help status; expect_rc 0 "ejob help status"; expect_out "^Usage: ejob status JOB" "help CMD shows the usage"
run help nope; expect_rc 2 "ejob help of an unknown command"
run sttus; expect_rc 2 "a typo"; expect_err_re "unknown command 'sttus'. Did you mean 'status'\\?" "typo suggestion"

# ---------------------------------------------------------------- jobs
run jobs; expect_rc 0 "jobs"
expect_out '^JOB +STATUS +CRON +ITEMS +INSTANCES +LEADER +TYPE' "jobs header"
expect_out '^javaJob +OK +0/2 \* \* \* \* \? +4 +2 +192\.168\.1\.10@-@100 +SCRIPT$' "javaJob row"
expect_out '^brokenJob +CRASHED +\? +0 +0 +- +\?$' "brokenJob row"
grep -q notAJob <<<"$OUT" && fail "notAJob (no config) listed" || pass "node without config not listed"
expect_err_re 'job "brokenJob": config error: shardingTotalCount' "jobs names the config error"
run jobs --json; expect_rc 0 "jobs --json"
python3 -c 'import json,sys; d=json.load(sys.stdin); j=[x for x in d if x["jobName"]=="javaJob"][0]; assert j["status"]=="OK" and j["instanceCount"]==2 and j["shardingTotalCount"]==4 and j["leader"]=="192.168.1.10@-@100", j' <<<"$OUT" \
  && pass "jobs --json fields" || fail "jobs --json fields: $OUT"

# ---------------------------------------------------------------- status
run status javaJob; expect_rc 0 "status"
expect_out '^Status: +OK$' "status line"
expect_out '^ITEM +OWNER +RUNNING +FAILOVER +MISFIRE +DISABLED +STATUS +PARAMETER$' "item header"
expect_out '^0 +192\.168\.1\.10@-@100 +no +- +no +no +PENDING +Beijing$' "item 0"
expect_out '^1 +192\.168\.1\.10@-@100 +yes +- +no +no +RUNNING +Shanghai$' "item 1 running"
expect_out '^2 +192\.168\.1\.11@-@200 +no +- +yes +no +PENDING +-$' "item 2 misfire"
expect_out '^192\.168\.1\.10@-@100 +192\.168\.1\.10 +yes +-$' "leader instance"
run status javaJob --json; expect_rc 0 "status --json"
python3 -c 'import json,sys; d=json.load(sys.stdin); it=d["items"]; assert d["status"]=="OK" and it[1]["running"] and it[2]["misfire"] and it[0]["parameter"]=="Beijing" and d["config"]["cron"]=="0/2 * * * * ?" and d["configError"] is None, d' <<<"$OUT" \
  && pass "status --json fields" || fail "status --json fields: $OUT"
run status brokenJob; expect_rc 0 "status of a job whose config does not parse"
expect_out '^Config error: shardingTotalCount: expected an integer, got "three"$' "status shows the config error naming the field"
run status nosuch; expect_rc 1 "status of an unknown job"
expect_err 'ejob status: no job "nosuch" in namespace "ops"' "unknown job message"
run status; expect_rc 2 "status without a job"
run status a/b; expect_rc 2 "status with a bad job name"
run status javaJob --frob; expect_rc 2 "unknown option"; expect_err_re '^ejob status: unknown option --frob' "unknown option message"

# ---------------------------------------------------------------- dump
run dump javaJob; expect_rc 0 "dump (no monitor port: from ZooKeeper)"
WANT="/javaJob/sharding | 
/javaJob/sharding/3 | 
/javaJob/sharding/3/instance | ip1@-@200
/javaJob/sharding/2 | 
/javaJob/sharding/2/misfire | 
/javaJob/sharding/2/instance | ip1@-@200
/javaJob/sharding/1 | 
/javaJob/sharding/1/running | 
/javaJob/sharding/1/instance | ip2@-@100
/javaJob/sharding/0 | 
/javaJob/sharding/0/instance | ip2@-@100
/javaJob/servers | 
/javaJob/servers/ip1 | 
/javaJob/servers/ip2 | 
/javaJob/leader | 
/javaJob/leader/election | 
/javaJob/leader/election/instance | ip2@-@100
/javaJob/instances | 
/javaJob/instances/ip1@-@200 | 
/javaJob/instances/ip2@-@100 | 
/javaJob/config | $CFG"
[ "$OUT" = "$WANT" ] && pass "dump text" || { fail "dump text"; diff <(echo "$WANT") <(echo "$OUT"); }
"$E" dump javaJob | tail -c 1 | od -c | grep -q '\\n' && pass "dump ends with a newline" || fail "dump ends with a newline"
run dump nosuch; expect_rc 1 "dump of an unknown job"; expect_err 'ejob dump: no job "nosuch" in namespace "ops"' "dump unknown job message"

# ---------------------------------------------------------------- trigger
run trigger javaJob; expect_rc 0 "trigger"
expect_out '^triggered javaJob on 192\.168\.1\.11@-@200$' "trigger names instance .11"
[ "$(zk_get /ops/javaJob/instances/192.168.1.10@-@100)" = TRIGGER ] && [ "$(zk_get /ops/javaJob/instances/192.168.1.11@-@200)" = TRIGGER ] \
  && pass "TRIGGER written into both instance nodes" || fail "TRIGGER not written"
echo 'set /ops/javaJob/instances/192.168.1.10@-@100 ""' >&7
echo 'set /ops/javaJob/instances/192.168.1.11@-@200 ""' >&7
sleep 0.5
run trigger javaJob --instance 192.168.1.11@-@200; expect_rc 0 "trigger one instance"
[ "$(zk_get /ops/javaJob/instances/192.168.1.11@-@200)" = TRIGGER ] && [ -z "$(zk_get /ops/javaJob/instances/192.168.1.10@-@100)" ] \
  && pass "only the chosen instance triggered" || fail "trigger --instance touched the wrong nodes"
run trigger javaJob --instance 10.9.9.9@-@1; expect_rc 1 "trigger an unknown instance"
expect_err 'ejob trigger: no live instance "10.9.9.9@-@1" of job "javaJob"' "unknown instance message"
run trigger brokenJob; expect_rc 1 "trigger a job without instances"
expect_err 'ejob trigger: job "brokenJob" has no live instance' "no instance message"
run trigger javaJob --instance a --server b; expect_rc 2 "--instance with --server"

# ---------------------------------------------------------------- disable / enable
run disable javaJob --server 192.168.1.11; expect_rc 0 "disable one server"
[ "$(zk_get /ops/javaJob/servers/192.168.1.11)" = DISABLED ] && pass "servers/192.168.1.11 = DISABLED" || fail "server not disabled"
run jobs; expect_out '^javaJob +OK ' "one disabled server keeps the job OK"
run disable javaJob; expect_rc 0 "disable all servers"
run jobs; expect_out '^javaJob +DISABLED ' "all servers disabled: DISABLED"
run enable javaJob --server 192.168.1.10; expect_rc 0 "enable one server"
[ -z "$(zk_get /ops/javaJob/servers/192.168.1.10)" ] && [ "$(zk_get /ops/javaJob/servers/192.168.1.11)" = DISABLED ] \
  && pass "enable wrote \"\" into that server only" || fail "enable one server"
run enable javaJob --json; expect_rc 0 "enable all (json)"
python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["action"]=="enable" and sorted(d["targets"])==["192.168.1.10","192.168.1.11"], d' <<<"$OUT" \
  && pass "enable --json" || fail "enable --json: $OUT"
run disable javaJob --server 9.9.9.9; expect_rc 1 "disable an unknown server"
expect_err 'ejob disable: job "javaJob" has no server 9.9.9.9 (its servers: 192.168.1.11, 192.168.1.10)' "unknown server message"
zk_exists /ops/javaJob/servers/9.9.9.9 && fail "unknown server node created" || pass "no node created for an unknown server"
run disable nosuch; expect_rc 1 "disable an unknown job"

# ---------------------------------------------------------------- items
run disable-item javaJob 3; expect_rc 0 "disable-item"
zk_exists /ops/javaJob/sharding/3/disabled && pass "sharding/3/disabled created" || fail "sharding/3/disabled missing"
run status javaJob; expect_out '^3 +192\.168\.1\.11@-@200 +no +- +no +yes +DISABLED +-$' "status shows item 3 disabled"
run enable-item javaJob 3; expect_rc 0 "enable-item"
zk_exists /ops/javaJob/sharding/3/disabled && fail "sharding/3/disabled still there" || pass "sharding/3/disabled deleted"
run enable-item javaJob 3; expect_rc 0 "enable-item of an enabled item"; expect_out 'was not disabled' "says it was not disabled"
run disable-item javaJob 4; expect_rc 1 "disable-item out of range"
expect_err 'ejob disable-item: job "javaJob" has items 0..3; there is no item 4' "out of range message"
run disable-item javaJob x; expect_rc 2 "disable-item with a bad number"
run disable-item javaJob; expect_rc 2 "disable-item without an item"

# ---------------------------------------------------------------- config
BEFORE=$("$E" config get javaJob --raw)
[ "$BEFORE" = "$CFG" ] && pass "config get --raw gives the stored bytes" || fail "config get --raw: $BEFORE"
run config get javaJob; expect_rc 0 "config get"
expect_out '^  "shardingItemParameters": "0=Beijing,1=Shanghai",$' "config get pretty-prints, decoded"
"$E" config get javaJob >"$ZKF_DIR/c.json"
sed 's|"shardingTotalCount": 4|"shardingTotalCount": 0|' "$ZKF_DIR/c.json" >"$ZKF_DIR/bad1.json"
run config set javaJob "$ZKF_DIR/bad1.json"; expect_rc 1 "config set with shardingTotalCount 0"
expect_err "ejob config: invalid config in $ZKF_DIR/bad1.json: shardingTotalCount: must be >= 1, got 0; /ops/javaJob/config is unchanged" "count error names the field"
sed 's|"0/2 \* \* \* \* ?"|"0/2 * * * *"|' "$ZKF_DIR/c.json" >"$ZKF_DIR/bad2.json"
run config set javaJob - <"$ZKF_DIR/bad2.json"; expect_rc 1 "config set with a bad cron"
expect_err_re '^ejob config: invalid config in standard input: cron: ' "cron error names the field"
sed 's|"javaJob"|"otherJob"|' "$ZKF_DIR/c.json" >"$ZKF_DIR/bad3.json"
run config set javaJob "$ZKF_DIR/bad3.json"; expect_rc 1 "config set with another jobName"
expect_err_re 'jobName: is "otherJob" but the job is "javaJob"' "jobName mismatch named"
echo '{"jobName": ' >"$ZKF_DIR/bad4.json"
run config set javaJob "$ZKF_DIR/bad4.json"; expect_rc 1 "config set with broken JSON"
run config set javaJob "$ZKF_DIR/nonexistent.json"; expect_rc 1 "config set with a missing file"
[ "$(zk_get /ops/javaJob/config)" = "$CFG" ] && pass "config node unchanged after refusals" || fail "config node changed"
sed 's|"0/2 \* \* \* \* ?"|"0/5 * * * * ?"|' "$ZKF_DIR/c.json" >"$ZKF_DIR/good.json"
run config set javaJob "$ZKF_DIR/good.json" --dry-run; expect_rc 0 "config set --dry-run"
expect_out '^  cron: "0/2 \* \* \* \* \?" -> "0/5 \* \* \* \* \?"$' "dry run shows the changed field"
[ "$(zk_get /ops/javaJob/config)" = "$CFG" ] && pass "dry run wrote nothing" || fail "dry run wrote"
run config set javaJob "$ZKF_DIR/good.json"; expect_rc 0 "config set"
[ "$(zk_get /ops/javaJob/config)" = "${CFG/0\/2 \* \* \* \* ?/0/5 * * * * ?}" ] && pass "config written as ElasticJob's exact JSON" || fail "config bytes: $(zk_get /ops/javaJob/config)"
# The console's JobSettings shape (another key order, no disabled/overwrite).
cat >"$ZKF_DIR/console.json" <<'J'
{"jobName":"javaJob","jobType":"SCRIPT","jobClass":"com.dangdang.ddframe.job.api.script.ScriptJob","cron":"0/7 * * * * ?","shardingTotalCount":2,"shardingItemParameters":"","jobParameter":"","monitorExecution":true,"streamingProcess":false,"maxTimeDiffSeconds":-1,"monitorPort":-1,"failover":false,"misfire":true,"jobShardingStrategyClass":"","description":"","jobProperties":{"executor_service_handler":"com.dangdang.ddframe.job.executor.handler.impl.DefaultExecutorServiceHandler","job_exception_handler":"com.dangdang.ddframe.job.executor.handler.impl.DefaultJobExceptionHandler"},"scriptCommandLine":"/opt/jobs/x.sh","reconcileIntervalMinutes":10}
J
run config set javaJob "$ZKF_DIR/console.json"; expect_rc 0 "config set, console shape"
WANT_CFG='{"jobName":"javaJob","jobClass":"com.dangdang.ddframe.job.api.script.ScriptJob","jobType":"SCRIPT","cron":"0/7 * * * * ?","shardingTotalCount":2,"shardingItemParameters":"","jobParameter":"","failover":false,"misfire":true,"description":"","jobProperties":{"job_exception_handler":"com.dangdang.ddframe.job.executor.handler.impl.DefaultJobExceptionHandler","executor_service_handler":"com.dangdang.ddframe.job.executor.handler.impl.DefaultExecutorServiceHandler"},"scriptCommandLine":"/opt/jobs/x.sh","monitorExecution":true,"maxTimeDiffSeconds":-1,"monitorPort":-1,"jobShardingStrategyClass":"","reconcileIntervalMinutes":10,"disabled":false,"overwrite":false}'
[ "$(zk_get /ops/javaJob/config)" = "$WANT_CFG" ] && pass "console shape rewritten in the Lite shape" || fail "console shape: $(zk_get /ops/javaJob/config)"
run config set javaJob "$ZKF_DIR/console.json"; expect_rc 0 "config set again"; expect_out '^no change' "unchanged config is not rewritten"
run config set nosuch "$ZKF_DIR/good.json"; expect_rc 1 "config set on an unknown job"
run config frob javaJob; expect_rc 2 "config with a bad action"
run config get; expect_rc 2 "config get without a job"

# ---------------------------------------------------------------- shutdown / remove
run remove javaJob; expect_rc 1 "remove with live instances"
expect_err 'ejob remove: job "javaJob" has 2 live instance(s): 192.168.1.11@-@200, 192.168.1.10@-@100; shut them down first (ejob shutdown javaJob) or stop their daemons' "remove refusal message"
zk_exists /ops/javaJob/config && pass "job kept after refused remove" || fail "job deleted despite live instances"
run shutdown javaJob --instance 192.168.1.11@-@200; expect_rc 0 "shutdown one instance"
zk_exists /ops/javaJob/instances/192.168.1.11@-@200 && fail "instance node still there" || pass "instance node deleted"
run jobs; expect_out '^javaJob +SHARDING_FLAG +0/7' "owner gone: SHARDING_FLAG"
run shutdown javaJob --server 192.168.1.11; expect_rc 1 "shutdown a server without instances"
run shutdown javaJob; expect_rc 0 "shutdown the rest"
run jobs; expect_out '^javaJob +CRASHED ' "no instance: CRASHED"
run remove javaJob; expect_rc 0 "remove"
zk_exists /ops/javaJob && fail "/ops/javaJob still there" || pass "/ops/javaJob deleted"
run status javaJob; expect_rc 1 "status after remove"

# ---------------------------------------------------------------- registry discovery
run jobs --registry "$ZKF_CONNECT" --namespace ops; expect_rc 0 "--registry without namespace plus --namespace"
EJOB_REGISTRY= EJOB_NAMESPACE=ops run jobs --registry "$ZKF_CONNECT"; expect_rc 0 "EJOB_NAMESPACE"
EJOB_REGISTRY= run jobs --registry "$ZKF_CONNECT"; expect_rc 2 "no namespace anywhere"
expect_err_re 'no namespace' "no namespace message"
EJOB_REGISTRY= run jobs --state-dir "$ZKF_DIR/nostate" --namespace ops; expect_rc 1 "no registry and no embedded one"
expect_err_re "^ejob jobs: no registry given: pass --registry HOST:PORT/NAMESPACE, -c FILE or set EJOB_REGISTRY" "no registry message"
run jobs --registry 127.0.0.1:1/ops --timeout-ms 500; expect_rc 1 "unreachable registry"
expect_err_re '^ejob jobs: cannot connect to ZooKeeper at 127\.0\.0\.1:1' "unreachable registry message"
mkdir -p "$ZKF_DIR/stale"; echo "127.0.0.1:1" >"$ZKF_DIR/stale/registry"
EJOB_REGISTRY= run jobs --state-dir "$ZKF_DIR/stale" --namespace ops; expect_rc 1 "embedded registry not answering"
expect_err_re 'embedded registry at 127\.0\.0\.1:1 .* is not answering' "stale embedded message"
# The embedded registry's address file is used when nothing else is given.
echo "$ZKF_CONNECT" >"$ZKF_DIR/stale/registry"
EJOB_REGISTRY= run jobs --state-dir "$ZKF_DIR/stale" --namespace ops; expect_rc 0 "address from the state directory"
expect_out '^brokenJob ' "jobs through the state directory's address"

# ---------------------------------------------------------------- -c FILE
# The registry a daemon file names: every command that talks to ZooKeeper
# takes -c, the file's namespace before EJOB_NAMESPACE, its serverLists
# before EJOB_REGISTRY; -n still wins over the file.
cat >"$ZKF_DIR/daemon.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: ops
jobs:
  fileJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 1
    props:
      script.command.line: /bin/true
YAML
EJOB_REGISTRY=127.0.0.1:1/elsewhere EJOB_NAMESPACE=elsewhere run jobs -c "$ZKF_DIR/daemon.yaml"
expect_rc 0 "jobs -c FILE: the file's registry, not the environment's"
expect_out '^brokenJob ' "jobs -c FILE lists the file's namespace"
EJOB_REGISTRY= run jobs --config "$ZKF_DIR/daemon.yaml" --json; expect_rc 0 "jobs --config FILE --json"
EJOB_REGISTRY= run jobs -c "$ZKF_DIR/daemon.yaml" -n nosuchns; expect_rc 0 "-n wins over the file's namespace"
[ -z "$OUT" ] || grep -qv brokenJob <<<"$OUT" && pass "  ... listing the other namespace" || fail "-n did not win: $OUT"
for c in "status brokenJob" "dump brokenJob" "config get brokenJob" "trigger brokenJob" \
  "disable brokenJob" "enable brokenJob" "disable-item brokenJob 0" "enable-item brokenJob 0" \
  "shutdown brokenJob"; do
  read -r -a words <<<"$c"
  EJOB_REGISTRY= run "${words[@]}" -c "$ZKF_DIR/daemon.yaml"
  grep -q "unknown option\|no registry\|no namespace" <<<"$ERR" && fail "$c -c FILE: $ERR" ||
    pass "$c -c FILE finds the registry (exit $RC)"
done
run jobs -c "$ZKF_DIR/daemon.yaml" --registry "$ZKF_CONNECT/ops"; expect_rc 2 "-c and --registry together"
expect_err_re 'give --registry or -c, not both' "  ... refused, saying so"
run jobs -c "$ZKF_DIR/nosuch.yaml"; expect_rc 2 "-c with a missing file"
expect_err_re 'nosuch.yaml' "  ... naming the file"
# An embedded registry: its address from the state directory, the namespace
# from the file.
printf 'regCenter:\n  serverLists: embedded\n  namespace: ops\njobs: {}\n' >"$ZKF_DIR/embedded.yaml"
EJOB_REGISTRY= run jobs -c "$ZKF_DIR/embedded.yaml" --state-dir "$ZKF_DIR/stale"
expect_rc 0 "-c FILE with an embedded registry: the state directory's address"
expect_out '^brokenJob ' "  ... and the file's namespace"
EJOB_REGISTRY= run jobs -c "$ZKF_DIR/embedded.yaml" --state-dir "$ZKF_DIR/nostate"
expect_rc 1 "-c FILE, embedded, no registry running"
expect_err_re 'nostate/registry does not exist; --state-dir names the daemon' "  ... says where it looked"
run registry status -c "$ZKF_DIR/embedded.yaml" --state-dir "$ZKF_DIR/nostate"; expect_rc 1 "registry status -c FILE"

echo "$FAILS failure(s)"
exit $((FAILS > 0))
