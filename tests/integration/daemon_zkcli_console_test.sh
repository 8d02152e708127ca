#!/bin/bash
# Console operations done with zkCli.sh, writing exactly what the Java
# ElasticJob 2.1.5 console writes, against a running `ejob run` daemon:
# TRIGGER into the instance node, "DISABLED" into servers/{ip}, a
# sharding/{item}/disabled node, and deleting the instance node (shutdown).
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"
D=$ZKF_DIR/t
mkdir -p "$D"
# Its own state directory (history.db, an embedded registry), never the
# user's default one.
export EJOB_STATE_DIR=$D/state
RUNS=$D/runs.log
: >"$RUNS"
cat >"$D/item.sh" <<'SH'
#!/bin/sh
# $1 = the runs file, $2 = the sharding context JSON
item=$(printf '%s' "$2" | sed -n 's/.*"shardingItem":\([0-9]*\).*/\1/p')
echo "$(date +%s%3N) $item" >>"$1"
SH
chmod +x "$D/item.sh"
# A cron that never fires during the test: only console triggers run items.
cat >"$D/jobs.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: console
  sessionTimeoutMilliseconds: 4000
jobs:
  opsJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 2
    overwrite: true
    props:
      script.command.line: $D/item.sh $RUNS
YAML
IP=127.0.0.71
EJOB_IP=$IP setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
P=$!; zkf_track $P
INST="$IP@-@$P"
NS=/console/opsJob
registered() { zkf_cli ls "$NS/instances" | grep -q "$INST"; }
wait_for 30 "daemon registered $INST" registered

count() { wc -l <"$RUNS"; }
runs_of() { grep -c " $1\$" "$RUNS"; }

zkf_cli set "$NS/instances/$INST" TRIGGER >/dev/null
two_runs() { [ "$(count)" -ge 2 ]; }
wait_for 20 "TRIGGER runs both items" two_runs
cleared() { ! zkf_cli get "$NS/instances/$INST" | grep -q TRIGGER; }
wait_for 10 "the instance clears TRIGGER" cleared

zkf_cli create "$NS/sharding/1/disabled" "" >/dev/null
sleep 1
before0=$(runs_of 0); before1=$(runs_of 1)
zkf_cli set "$NS/instances/$INST" TRIGGER >/dev/null
item0_again() { [ "$(runs_of 0)" -gt "$before0" ]; }
wait_for 20 "TRIGGER with item 1 disabled runs item 0" item0_again
sleep 1
[ "$(runs_of 1)" -eq "$before1" ] && pass "disabled item 1 did not run" || fail "disabled item 1 ran"
zkf_cli delete "$NS/sharding/1/disabled" >/dev/null

zkf_cli set "$NS/servers/$IP" DISABLED >/dev/null
sleep 1
n=$(count)
zkf_cli set "$NS/instances/$INST" TRIGGER >/dev/null
sleep 3
[ "$(count)" -eq "$n" ] && pass "a DISABLED server runs nothing" || fail "a DISABLED server ran items"
zkf_cli set "$NS/servers/$IP" "" >/dev/null
sleep 1
zkf_cli set "$NS/instances/$INST" TRIGGER >/dev/null
more() { [ "$(count)" -gt "$n" ]; }
wait_for 20 "enabled again, TRIGGER runs items" more

zkf_cli delete "$NS/instances/$INST" >/dev/null
gone() { ! zkf_cli ls "$NS/instances" | grep -q "$INST"; }
sleep 3
gone && pass "after an operator shutdown the instance does not register again" || fail "instance node came back"
kill -TERM $P 2>/dev/null; wait $P 2>/dev/null
echo "$FAILS failure(s)"
[ $FAILS -gt 0 ] && { echo "--- daemon log"; tail -30 "$D/daemon.log"; echo "--- runs"; cat "$RUNS"; }
exit $((FAILS > 0))
