#!/bin/bash
# The run page follows a running item's output live, in a real headless
# browser (Debian's chromium driven by playwright-core from tests/browser,
# both installed by scripts/install-deps): a daemon on a real ZooKeeper runs
# a script printing a line every 200 ms for 5 s, writing history to a
# SQLite file that `ejob console` reads; tests/browser/live.e2e.js opens the
# run's page while it runs. Screenshots in BUILD_DIR/console-live-screenshots/.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
cenv_need_browser
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
zkf_start || exit 1
D=$ZKF_DIR
ART=${EJ_BUILD_DIR:-$D}/console-live-screenshots
rm -rf "$ART"; mkdir -p "$ART"

cat >"$D/ticker.sh" <<'SH'
i=0
while [ $i -lt 25 ]; do
  echo "line $i $(date +%s%3N)"
  i=$((i + 1))
  sleep 0.2
done
echo "stderr <b>as text</b>" >&2
SH
NS=clive
cat >"$D/live.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: $NS
jobs:
  tickJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/sh $D/ticker.sh
tracing:
  type: SQLITE
  url: $D/history.db
YAML
cenv_daemon 127.0.0.71 "$D/live.yaml"
cat >"$D/console.yaml" <<YAML
listen: 127.0.0.1:0
registries:
  - {name: clive, serverLists: "$ZKF_CONNECT", namespace: $NS}
accounts:
  - {name: vera, role: viewer, passwordHash: "$(cenv_hash 'viewer pass')"}
history:
  store: sqlite:$D/history.db
YAML
chmod 600 "$D/console.yaml"
cenv_console "$D/console.log" -c "$D/console.yaml" || exit 1
wait_for 60 "the daemon is up" logged "$D/daemon-127.0.0.71.log" "history: "

CONSOLE_URL=$CENV_URL READY_FILE=$D/ready ARTIFACTS=$ART USER_DATA_DIR=$D/chromium-profile \
  NODE_PATH=$NODE_MODULES timeout 120 node "$EJ_SOURCE_DIR/tests/browser/live.e2e.js" &
NPID=$!
zkf_track $NPID
wait_for 60 "the browser is logged in" test -s "$D/ready"
"$E" trigger tickJob -r "$ZKF_CONNECT" -n "$NS" >/dev/null || fail "trigger"
wait $NPID || fail "live.e2e.js"
ls "$ART"
echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
