#!/bin/bash
# One validator for every path: the same bad cron or zone gets the same
# verdict and message from `ejob run --check`, start-up, SIGHUP, a config
# node written into ZooKeeper and `ejob cron next/check`; an invalid config
# from ZooKeeper is logged at error level naming the field and the running
# schedule stays as it was. SIGTERM is acted on while a reload is stuck
# reading its file. The digest comes from a file or the environment.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"
now_ms() { date +%s%3N; }
unset EJOB_DIGEST
export EJOB_REGISTRY="$ZKF_CONNECT/valid"
D=$ZKF_DIR/t
mkdir -p "$D"
# Its own state directory (history.db, an embedded registry), never the
# user's default one.
export EJOB_STATE_DIR=$D/state
NEVER='0 0 0 30 2 ?'
MSG='cron: has no fire time ahead'
yaml() { # CRON [ZONE]
  cat <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: valid
  sessionTimeoutMilliseconds: 4000
jobs:
  vjob:
    elasticJobType: SCRIPT
    cron: "$1"
    timeZone: "${2:-}"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: $D/item.sh
EOF
}
printf '#!/bin/sh\ndate +%%s%%3N >>%s/runs\n' "$D" >"$D/item.sh"
chmod +x "$D/item.sh"

# ------------------------------------------------ the same verdict offline
yaml "$NEVER" >"$D/never.yaml"
"$E" run --check -c "$D/never.yaml" 2>"$D/err"; RC=$?
[ $RC -eq 2 ] && grep -q "never.yaml:8:11: jobs.vjob.$MSG" "$D/err" && pass "--check: $(cat "$D/err")" || fail "--check: exit $RC: $(cat "$D/err")"
"$E" run -c "$D/never.yaml" 2>"$D/err"; RC=$?
[ $RC -eq 2 ] && grep -q "jobs.vjob.$MSG" "$D/err" && pass "start-up refuses it the same way" || fail "start-up: exit $RC: $(cat "$D/err")"
for c in "$NEVER" '0 0 0 1 1 ? 2001'; do
  "$E" cron next "$c" 2>"$D/err"; RC=$?
  [ $RC -eq 1 ] && grep -q "$MSG" "$D/err" && pass "cron next '$c': $(cat "$D/err")" || fail "cron next '$c': exit $RC"
  "$E" cron check "$c" 2>"$D/err"; RC=$?
  [ $RC -eq 1 ] && grep -q "$MSG" "$D/err" && pass "cron check '$c' refused" || fail "cron check '$c': exit $RC"
done
yaml '0/1 * * * * ?' 'GMT+08:00' >"$D/gmt.yaml"
"$E" run --check -c "$D/gmt.yaml" >/dev/null 2>&1 && pass "timeZone GMT+08:00 valid in YAML" || fail "GMT+08:00 refused in YAML"
"$E" cron next '0 * * * * ?' --tz GMT+08:00 --count 1 >/dev/null && pass "... and in cron next --tz" || fail "cron next --tz GMT+08:00"
yaml '0/1 * * * * ?' 'Mars/Base' >"$D/mars.yaml"
"$E" run --check -c "$D/mars.yaml" 2>"$D/err1"; "$E" cron check '0 * * * * ?' --tz Mars/Base 2>"$D/err2"
grep -q 'timeZone: unknown time zone "Mars/Base"' "$D/err1" && grep -q 'timeZone: unknown time zone "Mars/Base"' "$D/err2" && pass "an unknown zone: one message in both" || fail "zone messages: $(cat "$D/err1" "$D/err2")"

# ------------------------------------------------ the same verdict at run time
yaml '0/1 * * * * ?' >"$D/jobs.yaml"
EJOB_IP=127.0.0.81 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
P=$!; zkf_track $P
wait_for 30 "daemon started" logged "$D/daemon.log" "running 1 job"
wait_for 10 "vjob fires" test -s "$D/runs"
yaml "$NEVER" >"$D/jobs.yaml"
kill -HUP $P
wait_for 15 "SIGHUP refuses the never-firing cron" logged "$D/daemon.log" "has errors; the running configuration is kept"
grep -q "reload: $D/jobs.yaml:8:11: jobs.vjob.$MSG" "$D/daemon.log" && pass "SIGHUP names the field" || fail "SIGHUP message missing"

# A config node written into ZooKeeper with that cron.
CFG=$(zkf_cli get /valid/vjob/config | grep '^{')
BAD=${CFG/\"cron\":\"0\/1 \* \* \* \* ?\"/\"cron\":\"$NEVER\"}
[ "$BAD" != "$CFG" ] || fail "could not build the bad config from: $CFG"
zkf_cli set /valid/vjob/config "$BAD" >/dev/null
wait_for 10 "ZooKeeper's bad config logged at error level" grep -qE "error.*job vjob: the config in ZooKeeper is invalid and is not applied.*$MSG" "$D/daemon.log" || { echo "node: $(zkf_cli get /valid/vjob/config)"; grep -i config "$D/daemon.log" | tail -5; }
grep -q "job vjob: new config applied" "$D/daemon.log" && fail "the bad config was applied" || pass "not applied"
N1=$(wc -l <"$D/runs"); sleep 3; N2=$(wc -l <"$D/runs")
[ $((N2 - N1)) -ge 2 ] && pass "the running schedule goes on ($((N2 - N1)) runs in 3 s)" || fail "schedule changed: $((N2 - N1)) runs in 3 s"

# ------------------------------------------------ SIGTERM while a reload is stuck reading
rm -f "$D/jobs.yaml"; mkfifo "$D/jobs.yaml"
kill -HUP $P
wait_for 10 "reload started" logged "$D/daemon.log" "SIGHUP: reloading"
sleep 0.5
T0=$(now_ms); kill -TERM $P
wait_for 10 "SIGTERM acted on while the reload reads a FIFO" logged "$D/daemon.log" "SIGTERM: stopping"
wait $P; RC=$?; T1=$(now_ms)
[ $RC -eq 0 ] && pass "exit 0 after $((T1 - T0)) ms" || fail "exit $RC"
[ $((T1 - T0)) -lt 5000 ] || fail "stopping took $((T1 - T0)) ms"

# ------------------------------------------------ the digest off the command line
yaml '0 0 0 1 1 ? 2099' >"$D/d.yaml"; chmod 600 "$D/d.yaml"
echo "ops:s3cret" >"$D/digest"; chmod 666 "$D/digest"
"$E" run --check -c "$D/d.yaml" --digest-file "$D/digest" 2>"$D/err"; RC=$?
[ $RC -eq 2 ] && grep -q "holds a secret and is world-writable (mode 666): refused" "$D/err" && pass "a world-writable digest file is refused" || fail "digest file 666: exit $RC: $(cat "$D/err")"
grep -q s3cret "$D/err" && fail "the secret is in the message" || pass "the message does not show the secret"
chmod 644 "$D/digest"
"$E" run --check -c "$D/d.yaml" --digest-file "$D/digest" 2>"$D/err"; RC=$?
[ $RC -eq 0 ] && grep -q "world-readable (mode 644)" "$D/err" && pass "world-readable: a warning" || fail "digest file 644: exit $RC: $(cat "$D/err")"
chmod 600 "$D/digest"
sed -i "s|  sessionTimeoutMilliseconds: 4000|  sessionTimeoutMilliseconds: 4000\n  digestFile: digest|" "$D/d.yaml"
EJOB_IP=127.0.0.82 setpriv --pdeathsig KILL "$E" run -c "$D/d.yaml" 2>"$D/daemon2.log" &
P=$!; zkf_track $P
wait_for 30 "daemon with regCenter.digestFile started" logged "$D/daemon2.log" "running 1 job"
"$E" disable vjob 2>/dev/null; [ $? -eq 1 ] && pass "without the digest: refused" || fail "no digest: not refused"
EJOB_DIGEST=ops:s3cret "$E" disable vjob >/dev/null && pass "the digest from digestFile is the one in force" || fail "EJOB_DIGEST disable failed"
grep -q s3cret "$D/daemon2.log" && fail "the secret is in the log" || pass "the log does not show the secret"
kill -TERM $P; wait $P
sed -i "/digestFile/d" "$D/d.yaml"
EJOB_DIGEST=ops:s3cret EJOB_IP=127.0.0.83 setpriv --pdeathsig KILL "$E" run -c "$D/d.yaml" 2>"$D/daemon3.log" &
P=$!; zkf_track $P
wait_for 30 "daemon with EJOB_DIGEST started (nodes readable with it)" logged "$D/daemon3.log" "running 1 job"
kill -TERM $P; wait $P
"$E" run --check -c "$D/d.yaml" --digest ops:s3cret 2>"$D/err" >/dev/null
grep -q "visible to every user in ps" "$D/err" && pass "--digest still works, with a warning" || fail "no --digest warning"

echo "$FAILS failure(s)"
exit $((FAILS > 0))
