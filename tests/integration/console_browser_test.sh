#!/bin/bash
# The console page end to end in a real headless browser (Debian's chromium
# driven by playwright-core from tests/browser, both installed by
# scripts/install-deps): two daemons on a real ZooKeeper writing history to
# a SQLite file, `ejob console` with accounts and that file, then tests/browser/console.e2e.js. Screenshots are kept in
# BUILD_DIR/console-screenshots/.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
cenv_need_browser
zkf_start || exit 1
D=$ZKF_DIR
ART=${EJ_BUILD_DIR:-$D}/console-screenshots
rm -rf "$ART"; mkdir -p "$ART"

cenv_job_yaml "$D/b.yaml" cbrowse browserJob 4
# History in a SQLite file the console reads, and a job whose failing runs
# print markup on stderr (the page must show it as text).
cat >"$D/out.sh" <<'EOF'
#!/bin/sh
printf 'out line \377 <b>not bold</b>\n'
echo 'boom <img src=x onerror="window.__pwned=1"> on stderr' >&2
exit 4
EOF
chmod +x "$D/out.sh"
cat >>"$D/b.yaml" <<YAML
  outJob:
    elasticJobType: SCRIPT
    cron: "0/2 * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: $D/out.sh
tracing:
  type: SQLITE
  url: $D/history.db
YAML
cenv_daemon 127.0.0.61 "$D/b.yaml"; P61=$CENV_PID
cenv_daemon 127.0.0.62 "$D/b.yaml"
zkf_cli create /cbrowse "" >/dev/null 2>&1
zkf_cli create /cbrowse/brokenJob "" >/dev/null
zkf_cli create /cbrowse/brokenJob/config '{"jobName":"brokenJob","jobType":"SCRIPT","cron":"0/2 * * * * ?","shardingTotalCount":0,"scriptCommandLine":"/bin/true"}' >/dev/null
cat >"$D/console.yaml" <<YAML
listen: 127.0.0.1:0
auditLog: $D/audit.log
registries:
  - {name: cbrowse, serverLists: "$ZKF_CONNECT", namespace: cbrowse}
accounts:
  - {name: alice, role: admin, passwordHash: "$(cenv_hash 'adm1n pass')"}
  - {name: gus, role: guest, passwordHash: "$(cenv_hash 'guest-pass')"}
history:
  store: sqlite:$D/history.db
YAML
chmod 600 "$D/console.yaml"
cenv_console "$D/console.log" -c "$D/console.yaml" || exit 1

CONSOLE_URL=$CENV_URL KILL_PID=$P61 KEEP_IP=127.0.0.62 ARTIFACTS=$ART USER_DATA_DIR=$D/chromium-profile \
  NODE_PATH=$NODE_MODULES timeout 300 node "$EJ_SOURCE_DIR/tests/browser/console.e2e.js"
rc=$?
grep -q '"user":"alice","auth":"session","role":"admin",.*jobs/browserJob/trigger","result":200' "$D/audit.log" || { echo "FAIL: no audit line for the page's trigger" >&2; rc=1; }
ls "$ART"
exit $rc
