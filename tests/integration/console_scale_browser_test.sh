#!/bin/bash
# The console page at scale and in time, in Debian's chromium (playwright-core
# from tests/browser, installed by scripts/install-deps): 5,000 jobs written
# straight into ZooKeeper (build/ej_zkfill) and 20,000 history rows into the
# SQLite file a daemon created, then tests/browser/console_scale.e2e.js pages
# through both, checks zones and next fires, the registry in the URL,
# failover-waiting items, disabled servers, running vs died runs, labelled
# filters, output search, and the banner when ZooKeeper goes down.
set -u
FILL=${EJ_BUILD_DIR:?}/ej_zkfill
[ -x "$FILL" ] || { echo "FAIL: missing $FILL (build it)" >&2; exit 1; }
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
cenv_need_browser
zkf_start || exit 1
D=$ZKF_DIR
ART=${EJ_BUILD_DIR:-$D}/console-scale-screenshots
rm -rf "$ART"; mkdir -p "$ART"

# The first 20 jobs run (an instance, a leader, items); the others were
# never started (their config only): the same list to page through, fewer
# nodes for the console to load.
"$FILL" "$ZKF_CONNECT" cscale 5000 job 20 || { echo "FAIL: ej_zkfill" >&2; exit 1; }
"$FILL" "$ZKF_CONNECT" cother 3 other || { echo "FAIL: ej_zkfill other" >&2; exit 1; }
# A daemon creates the history schema (its job fires once a day).
cat >"$D/d.yaml" <<YAML
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: cdaemon
  sessionTimeoutMilliseconds: 3000
tracing:
  type: SQLITE
  url: $D/history.db
jobs:
  liveJob:
    elasticJobType: SCRIPT
    cron: "0 0 4 * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/true
YAML
cenv_daemon 127.0.0.91 "$D/d.yaml"
for _ in $(seq 1 100); do
  [ -f "$D/history.db" ] && python3 -c "import sqlite3,sys; sys.exit(0 if sqlite3.connect('$D/history.db').execute(\"SELECT count(*) FROM sqlite_master WHERE name='EJOB_EXECUTION_INSTANT'\").fetchone()[0] else 1)" 2>/dev/null && break
  sleep 0.2
done
# 20,000 runs, one a minute back from now, each printing "needle-N;";
# and two runs not ended: one on a live instance, one on a gone one.
python3 - "$D/history.db" <<'PY' || { echo "FAIL: history rows" >&2; exit 1; }
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=30)
now = int(time.time() * 1000)
def local(ms):
    return time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(ms / 1000)) + '.%03d' % (ms % 1000)
ex, inst, det = [], [], []
for i in range(20000):
    job = 'job%05d' % (i % 5000)
    start = now - (i + 10) * 60000
    rid = 'h%05d' % i
    ex.append((rid, job, '%s@-@0@-@READY@-@10.0.0.1@-@100' % job, 'host', '10.0.0.1', 0,
               'NORMAL_TRIGGER', 1 if i % 13 else 0, local(start), local(start + 1500)))
    inst.append((rid, start, start + 1500, time.localtime(start / 1000).tm_gmtoff))
    det.append((rid, '10.0.0.1@-@100', local(start), 1500, 1, 0, 0, ('needle-%d;\n' % i).encode(), 0, 0, 0))
for rid, job, owner in (('run-live', 'job00001', '10.0.0.1@-@100'), ('run-dead', 'job00002', '10.0.0.9@-@999')):
    ex.append((rid, job, '%s@-@0@-@READY@-@%s' % (job, owner), 'host', owner.split('@')[0], 0, 'NORMAL_TRIGGER', 0, local(now - 5000), None))
    inst.append((rid, now - 5000, None, time.localtime().tm_gmtoff))
db.executemany('INSERT INTO JOB_EXECUTION_LOG (id, job_name, task_id, hostname, ip, sharding_item, '
               'execution_source, is_success, start_time, complete_time) VALUES (?,?,?,?,?,?,?,?,?,?)', ex)
db.executemany('INSERT INTO EJOB_EXECUTION_INSTANT (id, start_ms, complete_ms, utc_offset_s) VALUES (?,?,?,?)', inst)
db.executemany('INSERT INTO EJOB_EXECUTION_DETAIL (id, instance_id, start_time, duration_ms, fencing_token, '
               'exit_code, term_signal, stdout, stdout_truncated, stderr_truncated, failure_cause_truncated) '
               'VALUES (?,?,?,?,?,?,?,?,?,?,?)', det)
# How two runs ended, as the supervisor records it (EJOB_EXECUTION_RESULT).
db.executemany('INSERT INTO EJOB_EXECUTION_RESULT (id, result, attempt, killed_by) VALUES (?,?,?,?)',
               [('h00000', 'killed', 1, 'console:alice'), ('h00001', 'timeout', 1, None)])
db.commit()
PY

# The first load of 5,000 jobs' nodes takes a while on a busy machine.
cat >"$D/console.yaml" <<YAML
listen: 127.0.0.1:0
connectionTimeoutMilliseconds: 180000
registries:
  - {name: scale, serverLists: "$ZKF_CONNECT", namespace: cscale}
  - {name: other, serverLists: "$ZKF_CONNECT", namespace: cother}
history:
  store: sqlite:$D/history.db
YAML
chmod 600 "$D/console.yaml"
echo "$(date +%T) history rows written"
CENV_START_TENTHS=1800 cenv_console "$D/console.log" --no-auth -c "$D/console.yaml" || exit 1
echo "$(date +%T) console up after loading 5,000 jobs"

TZ=UTC CONSOLE_URL=$CENV_URL ZK_PID=$ZKF_PID ARTIFACTS=$ART USER_DATA_DIR=$D/chromium-profile \
  NODE_PATH=$NODE_MODULES timeout 400 node "$EJ_SOURCE_DIR/tests/browser/console_scale.e2e.js"
rc=$?
ls "$ART"
exit $rc
