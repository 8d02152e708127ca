#!/bin/bash
# `ejob run` under systemd: both units of dist/systemd pass
# `systemd-analyze verify` without a word; the daemon started exactly as
# ejob.service's ExecStart (binary and file rewritten to this build's) with
# NOTIFY_SOCKET on a datagram socket this test reads and JOURNAL_STREAM naming
# its stderr sends READY=1 only once its job is registered (the instance node
# exists at that moment), RELOADING=1 + MONOTONIC_USEC then READY=1 around
# an applied and a refused reload, STOPPING=1 at SIGTERM and exits 0; every
# stderr line is "<N>[module] ..." without a time; $STATE_DIRECTORY is its
# state directory.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
UNITS=$EJ_SOURCE_DIR/dist/systemd

source "$EJ_SOURCE_DIR/tests/support/checks.sh"

# ------------------------------------------------------------ the units
command -v systemd-analyze >/dev/null || { echo "FAIL: systemd-analyze missing (scripts/install-deps)" >&2; exit 1; }
V=$(mktemp -d "${TMPDIR:-/tmp}/ejob-units-XXXXXX")
trap 'rm -rf "$V"; zkf_cleanup' EXIT
# verify checks that ExecStart's binary exists: point it at this build's.
for u in ejob.service ejob@.service; do
  sed "s|^ExecStart=/usr/bin/ejob |ExecStart=$E |" "$UNITS/$u" >"$V/$u"
  grep -q "^ExecStart=$E run " "$V/$u" || fail "$u: no ExecStart=/usr/bin/ejob run ... to rewrite"
done
# verify also runs man for each Documentation= page: give it this tree's.
mkdir -p "$V/man/man1" "$V/man/man5"
cp "$UNITS/../../man/ejob.1" "$UNITS/../../man/ejob-run.1" "$V/man/man1/"
cp "$UNITS/../../man/ejob.yaml.5" "$V/man/man5/"
for u in ejob.service ejob@demo.service; do
  out=$(cd "$V" && MANPATH="$V/man" systemd-analyze verify "./$u" 2>&1); rc=$?
  [ $rc -eq 0 ] && [ -z "$out" ] && pass "systemd-analyze verify $u: clean" \
    || fail "systemd-analyze verify $u: rc $rc: $out"
done
# The verification can fail: a misspelt key is reported.
sed 's/^KillMode=/KillMod=/' "$V/ejob.service" >"$V/broken.service"
out=$(cd "$V" && MANPATH="$V/man" systemd-analyze verify ./broken.service 2>&1)
grep -q "Unknown key" <<<"$out" && pass "a misspelt key is reported by verify" || fail "verify missed a bad key: $out"
for k in "Type=notify" "KillMode=mixed" "User=ejob" "Group=ejob" "Restart=on-failure" \
  "NoNewPrivileges=yes" "ProtectSystem=strict" "ExecReload=/bin/kill -HUP \$MAINPID"; do
  for u in ejob.service ejob@.service; do
    grep -qx -- "$k" "$UNITS/$u" || fail "$u: no $k"
  done
done
grep -q '^MemoryDenyWriteExecute=yes' "$UNITS/ejob.service" "$UNITS/ejob@.service" \
  && fail "MemoryDenyWriteExecute=yes breaks the embedded registry's JVM" || pass "units: no MemoryDenyWriteExecute"
# Documentation= names the docs the package installs (docs/X.md as
# /usr/share/doc/ejob/docs/X.md), and only ones that exist.
for u in ejob.service ejob@.service; do
  docs=$(sed -n 's|^Documentation=.*file:/usr/share/doc/ejob/\(docs/[a-z]*\.md\).*|\1|p' "$UNITS/$u")
  [ -n "$docs" ] && [ -f "$EJ_SOURCE_DIR/$docs" ] && pass "$u: Documentation= names /usr/share/doc/ejob/$docs" \
    || fail "$u: no Documentation=file:/usr/share/doc/ejob/docs/... of an existing doc ('$docs')"
done
grep -qx 'ExecStart=/usr/bin/ejob run -c /etc/ejob/%i.yaml' "$UNITS/ejob@.service" \
  && pass "ejob@NAME runs /etc/ejob/NAME.yaml" || fail "ejob@.service ExecStart"
# TimeoutStopSec must outlast the daemon's default drain (30 s) plus the
# embedded registry's stop (15 s).
STOP=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s\{0,1\}$/\1/p' "$UNITS/ejob.service")
[ -n "$STOP" ] && [ "$STOP" -gt 45 ] && pass "TimeoutStopSec=$STOP > 30 s drain + 15 s" || fail "TimeoutStopSec '$STOP'"
"$E" run -c "$EJ_SOURCE_DIR/dist/ejob.yaml" --check >/dev/null && pass "dist/ejob.yaml passes --check" \
  || fail "dist/ejob.yaml: $("$E" run -c "$EJ_SOURCE_DIR/dist/ejob.yaml" --check 2>&1)"

# ------------------------------------------------------------ the daemon
zkf_start || exit 1
D=$ZKF_DIR/t
mkdir -p "$D/state"
job_yaml() { # NAME
  cat <<EOF
  $1:
    elasticJobType: SCRIPT
    cron: "* * * * * ?"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/true
EOF
}
head_yaml() {
  printf 'regCenter:\n  serverLists: %s\n  namespace: sysd\n  sessionTimeoutMilliseconds: 4000\njobs:\n' "$ZKF_CONNECT"
}
{ head_yaml; job_yaml tick; } >"$D/ejob.yaml"

# The notification socket: one line per datagram ("|" for its newlines).
# At READY=1 it also records whether the job's instance node exists (the
# server's ephemeral nodes, from the "dump" four-letter word) and whether
# the daemon's log already says the job was registered.
cat >"$D/notify.py" <<'EOF'
import os, socket, sys
path, out, log, zk_port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
def ephemerals():
    try:
        c = socket.create_connection(("127.0.0.1", zk_port), timeout=5)
        c.sendall(b"dump")
        data = b""
        while True:
            b = c.recv(65536)
            if not b:
                break
            data += b
        return data.decode(errors="replace")
    except OSError as e:
        return "dump failed: %s" % e
with open(out, "a", buffering=1) as f:
    while True:
        msg = s.recv(4096).decode(errors="replace")
        at_ready = ""
        if "READY=1" in msg.split("\n"):
            node = "/sysd/tick/instances/" in ephemerals()
            with open(log, errors="replace") as l:
                logged = "job tick started as" in l.read()
            at_ready = "AT-READY instance-node=%s logged-registered=%s\n" % (node, logged)
        # The checks are written first: whoever sees READY=1 sees them.
        f.write(at_ready + msg.replace("\n", "|") + "\n")
EOF
python3 "$D/notify.py" "$D/notify.sock" "$D/notify.log" "$D/daemon.log" "$ZKF_PORT" &
zkf_track $!
wait_for 10 "notification socket bound" test -S "$D/notify.sock"

# ExecStart as the unit has it, with this build's binary and a test file.
EXEC=$(sed -n 's/^ExecStart=//p' "$UNITS/ejob.service")
EXEC=${EXEC/\/usr\/bin\/ejob/$E}
EXEC=${EXEC/\/etc\/ejob\/ejob.yaml/$D/ejob.yaml}
read -r -a ARGV <<<"$EXEC"
[ "${ARGV[0]}" = "$E" ] && [ "${ARGV[*]: -1}" = "$D/ejob.yaml" ] && pass "ExecStart: ${ARGV[*]}" \
  || fail "ExecStart not rewritten: $EXEC"
: >"$D/daemon.log"
JS=$(stat -c '%d:%i' "$D/daemon.log")
: >"$D/notify.log"
env -u EJOB_STATE_DIR NOTIFY_SOCKET="$D/notify.sock" JOURNAL_STREAM="$JS" STATE_DIRECTORY="$D/state" \
  setpriv --pdeathsig KILL "${ARGV[@]}" 2>>"$D/daemon.log" &
P=$!; zkf_track $P
count() { grep -c -- "$1" "$D/notify.log"; }
ready_at_least() { [ "$(count '^READY=1')" -ge "$1" ]; }
wait_for 40 "READY=1 received" grep -q '^READY=1' "$D/notify.log"
head -1 <(grep AT-READY "$D/notify.log") | grep -q 'AT-READY instance-node=True logged-registered=True' \
  && pass "at READY=1 the job's instance node existed and its registration was logged" \
  || fail "READY=1 before the job was registered: $(grep AT-READY "$D/notify.log")"
grep -q '^READY=1|STATUS=running 1 job(s) of ' "$D/notify.log" && pass "READY=1 carries STATUS=running 1 job(s)" \
  || fail "READY status: $(cat "$D/notify.log")"
grep -q '^STATUS=registering 1 job(s)' "$D/notify.log" && pass "STATUS while registering" || fail "no STATUS=registering"
[ "$(grep -n '^STATUS=registering' "$D/notify.log" | cut -d: -f1)" -lt "$(grep -n '^READY=1' "$D/notify.log" | head -1 | cut -d: -f1)" ] \
  && pass "STATUS=registering came before READY=1" || fail "order: $(cat "$D/notify.log")"

# A reload that adds a job: RELOADING=1 with MONOTONIC_USEC, then READY=1.
{ head_yaml; job_yaml tick; job_yaml tock; } >"$D/ejob.yaml"
kill -HUP $P
wait_for 20 "READY=1 after the reload" ready_at_least 2
grep -q '^RELOADING=1|MONOTONIC_USEC=[0-9]\+|STATUS=reloading ' "$D/notify.log" \
  && pass "RELOADING=1 with MONOTONIC_USEC and a STATUS" || fail "reloading: $(cat "$D/notify.log")"
sed -n '/^RELOADING=1/,$p' "$D/notify.log" | grep -q '^READY=1|STATUS=running 2 job(s) of .*last reload: 1 added' \
  && pass "READY=1 after RELOADING=1 says 2 jobs, 1 added" || fail "after reload: $(cat "$D/notify.log")"
# A refused reload ends with READY=1 too.
echo "jobs: [" >"$D/ejob.yaml"
kill -HUP $P
wait_for 20 "READY=1 after a refused reload" ready_at_least 3
[ "$(count '^RELOADING=1')" -eq 2 ] && pass "one RELOADING=1 per reload" || fail "RELOADING count $(count '^RELOADING=1')"
grep '^READY=1' "$D/notify.log" | tail -1 | grep -q '^READY=1|STATUS=running 2 job(s) of .*reload refused' \
  && pass "READY=1 after the refused reload says so" || fail "refused: $(tail -2 "$D/notify.log")"
MONO=($(sed -n 's/^RELOADING=1|MONOTONIC_USEC=\([0-9]*\)|.*/\1/p' "$D/notify.log"))
[ "${#MONO[@]}" -eq 2 ] && [ "${MONO[1]}" -gt "${MONO[0]}" ] && pass "MONOTONIC_USEC grows" || fail "MONOTONIC_USEC ${MONO[*]}"

kill -TERM $P
wait $P; RC=$?
[ $RC -eq 0 ] && pass "exit code 0 after SIGTERM" || fail "exit code $RC"
grep -q '^STOPPING=1|STATUS=SIGTERM: stopping' "$D/notify.log" && pass "STOPPING=1 on SIGTERM" || fail "no STOPPING=1: $(tail -3 "$D/notify.log")"
sed 's/^/  notify: /' "$D/notify.log"

# The journal's format: a priority, no time.
N=$(grep -c '' "$D/daemon.log")
BAD=$(grep -c -v '^<[3467]>\[[a-z]*\] ' "$D/daemon.log")
[ "$N" -gt 5 ] && [ "$BAD" -eq 0 ] && pass "all $N stderr lines start with <N>[module]" \
  || fail "$BAD of $N lines without <N>[module]: $(grep -v '^<[3467]>\[' "$D/daemon.log" | head -3)"
grep -q '[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:' "$D/daemon.log" && fail "a timestamp in the journal's lines" \
  || pass "no timestamps"
grep -q '^<6>\[daemon\] running 1 job(s)' "$D/daemon.log" && pass "info is <6>" || fail "no <6> info line"
grep -q '^<3>\[daemon\] reload: ' "$D/daemon.log" && grep -q '^<4>\[daemon\] reload: .* has errors' "$D/daemon.log" \
  && pass "errors are <3>, warnings <4>" || fail "priorities of the refused reload: $(grep reload "$D/daemon.log")"
sed 's/^/  stderr: /' "$D/daemon.log" | head -12
# The history store opens its file at the first event: the log says where.
grep -q "^<6>\[daemon\] history: SQLite $D/state/history.db " "$D/daemon.log" \
  && pass "\$STATE_DIRECTORY is the state directory (history.db there)" \
  || fail "history not in \$STATE_DIRECTORY: $(grep history: "$D/daemon.log")"

[ $FAILS -eq 0 ] && echo "daemon_systemd_test: all passed" || echo "daemon_systemd_test: $FAILS failure(s)"
exit $FAILS
