# Source this from a console test (after zkfixture.sh and zkf_start):
#   cenv_job_yaml FILE NS JOB ITEMS      a daemon YAML with one SCRIPT job
#   cenv_daemon IP FILE                  starts `ejob run` as instance IP; sets CENV_PID
#   cenv_console LOG ARGS...             starts `ejob console` with ARGS; sets
#                                        CENV_URL (from its first line), CENV_CONSOLE_PID
#   cenv_hash PASSWORD                   prints a passwordHash
#   cenv_need_browser                    fails (exit 1) without chromium, node and
#                                        tests/browser's playwright-core; sets NODE_MODULES
# Every process started is tracked for the fixture's cleanup (killed by pid).
E=${EJOB:?EJOB must name the ejob binary}

cenv_job_yaml() {
  cat >"$1" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: $2
  sessionTimeoutMilliseconds: 3000
jobs:
  $3:
    elasticJobType: SCRIPT
    cron: "0/2 * * * * ?"
    shardingTotalCount: $4
    shardingItemParameters: "0=Beijing,1=Shanghai"
    failover: true
    overwrite: true
    description: console test job
    props:
      script.command.line: /bin/true
YAML
}

cenv_daemon() {
  # A state directory per instance (its history.db), not the user's default.
  EJOB_IP=$1 setpriv --pdeathsig KILL "$E" run -c "$2" --state-dir "$ZKF_DIR/state-$1" \
    >>"$ZKF_DIR/daemon-$1.log" 2>&1 &
  CENV_PID=$!
  zkf_track "$CENV_PID"
}

cenv_console() {
  local log=$1; shift
  : >"$log"
  setpriv --pdeathsig KILL "$E" console "$@" >"$log" 2>"$log.err" &
  CENV_CONSOLE_PID=$!
  zkf_track "$CENV_CONSOLE_PID"
  local i
  CENV_URL=
  for i in $(seq 1 "${CENV_START_TENTHS:-300}"); do # tenths of a second
    CENV_URL=$(sed -n 's|^ejob console: serving \(https\{0,1\}://[^ ]*\)/ .*|\1|p' "$log")
    [ -n "$CENV_URL" ] && return 0
    kill -0 "$CENV_CONSOLE_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "console did not start: $(cat "$log.err")" >&2
  return 1
}

cenv_hash() { printf '%s\n' "$1" | "$E" console hash-password; }

cenv_need_browser() {
  NODE_MODULES=$EJ_SOURCE_DIR/tests/browser/node_modules
  local missing=
  [ -x /usr/bin/chromium ] || missing="$missing chromium (/usr/bin/chromium)"
  command -v node >/dev/null || missing="$missing node"
  [ -d "$NODE_MODULES/playwright-core" ] || missing="$missing playwright-core ($NODE_MODULES)"
  if [ -n "$missing" ]; then
    echo "FAIL: missing:$missing; run scripts/install-deps (this test installs nothing)" >&2
    exit 1
  fi
}
