#!/bin/bash
# ZooKeeper digest auth: a daemon with regCenter.digest creates its nodes
# with CREATOR_ALL_ACL (as ElasticJob does); control commands without the
# digest are refused by ZooKeeper and say so, with --digest or EJOB_DIGEST
# they work.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
E=${EJOB:?EJOB must name the ejob binary}
zkf_start || exit 1

source "$EJ_SOURCE_DIR/tests/support/checks.sh"
export EJOB_REGISTRY="$ZKF_CONNECT/secure"
unset EJOB_DIGEST
D=$ZKF_DIR/t
mkdir -p "$D"
# Its own state directory (history.db, an embedded registry), never the
# user's default one.
export EJOB_STATE_DIR=$D/state
cat >"$D/jobs.yaml" <<EOF
regCenter:
  serverLists: $ZKF_CONNECT
  namespace: secure
  sessionTimeoutMilliseconds: 4000
  digest: ops:s3cret
jobs:
  secJob:
    elasticJobType: SCRIPT
    cron: "0 0 0 1 1 ? 2099"
    shardingTotalCount: 1
    overwrite: true
    props:
      script.command.line: /bin/true
EOF
EJOB_IP=127.0.0.71 setpriv --pdeathsig KILL "$E" run -c "$D/jobs.yaml" 2>"$D/daemon.log" &
P=$!; zkf_track $P
wait_for 30 "daemon with a digest started" logged "$D/daemon.log" "running 1 job"

"$E" disable secJob 2>"$D/err"; RC=$?
[ $RC -eq 1 ] && grep -qi "auth" "$D/err" && pass "without the digest: refused, saying why ($(head -c 120 "$D/err"))" || fail "no digest: exit $RC: $(cat "$D/err")"
"$E" disable secJob --digest ops:wrong 2>"$D/err"; RC=$?
[ $RC -eq 1 ] && pass "a wrong digest is refused" || fail "wrong digest: exit $RC"
"$E" disable secJob --digest ops:s3cret >/dev/null 2>"$D/err"; RC=$?
[ $RC -eq 0 ] && pass "--digest: disable works" || fail "--digest: exit $RC"
grep -q "visible to every user in ps" "$D/err" && pass "control commands warn that --digest shows in ps" || fail "no --digest warning: $(cat "$D/err")"
EJOB_DIGEST=ops:s3cret "$E" enable secJob >/dev/null; RC=$?
[ $RC -eq 0 ] && pass "EJOB_DIGEST: enable works" || fail "EJOB_DIGEST: exit $RC"
EJOB_DIGEST=ops:s3cret "$E" status secJob | grep -qE '^127\.0\.0\.71 +ENABLED' && pass "status with the digest" || fail "status with the digest"
"$E" status secJob 2>/dev/null; [ $? -eq 1 ] && pass "status without the digest: refused" || fail "status without the digest"
"$E" status secJob --digest nocolon 2>/dev/null; [ $? -eq 2 ] && pass "a digest without ':' is a usage error" || fail "digest without colon"
# --digest-file: the secret off the command line, under the rule of every
# file holding a secret.
echo "ops:s3cret" >"$D/digest"; chmod 600 "$D/digest"
"$E" status secJob --digest-file "$D/digest" 2>"$D/err" | grep -qE '^127\.0\.0\.71 +ENABLED' \
  && ! grep -q warning "$D/err" && pass "status --digest-file works, without a warning" || fail "status --digest-file: $(cat "$D/err")"
chmod 666 "$D/digest"
"$E" status secJob --digest-file "$D/digest" >/dev/null 2>"$D/err"; RC=$?
[ $RC -eq 2 ] && grep -q "world-writable (mode 666): refused" "$D/err" && ! grep -q s3cret "$D/err" \
  && pass "a world-writable --digest-file is refused without showing the secret" || fail "digest file 666: exit $RC: $(cat "$D/err")"
chmod 600 "$D/digest"
"$E" status secJob --digest-file "$D/digest" --digest ops:s3cret >/dev/null 2>"$D/err"; RC=$?
[ $RC -eq 2 ] && grep -q "not both" "$D/err" && pass "--digest with --digest-file is a usage error" || fail "both: exit $RC"

kill -TERM $P; wait $P; RC=$?
[ $RC -eq 0 ] && pass "SIGTERM: exit 0" || fail "exit $RC"
echo "$FAILS failure(s)"
exit $((FAILS > 0))
