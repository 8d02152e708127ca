#!/bin/bash
# The config form and the shut-down state in a real headless browser
# (Debian's chromium, playwright-core from tests/browser): the form is
# generated from the field table (GET /api/fields): typed inputs, help
# lines, Java-only fields folded, every validation problem at once; a
# shut-down instance reads "shut down: restart needed" with a Restart
# button that brings it back. Before the browser, the API: a value of the
# wrong type, a bad cron and an unknown zone are three errors of one PUT.
set -u
source "$EJ_SOURCE_DIR/tests/support/zkfixture.sh"
source "$EJ_SOURCE_DIR/tests/integration/console_env.sh"
cenv_need_browser
source "$EJ_SOURCE_DIR/tests/support/checks.sh"
zkf_start || exit 1
D=$ZKF_DIR
ART=${EJ_BUILD_DIR:-$D}/form-screenshots
rm -rf "$ART"; mkdir -p "$ART"

cenv_job_yaml "$D/f.yaml" cform formJob 2
cenv_daemon 127.0.0.71 "$D/f.yaml"
cat >"$D/console.yaml" <<YAML
listen: 127.0.0.1:0
registries:
  - {name: cform, serverLists: "$ZKF_CONNECT", namespace: cform}
accounts:
  - {name: alice, role: admin, passwordHash: "$(cenv_hash 'adm1n pass')"}
YAML
chmod 600 "$D/console.yaml"
cenv_console "$D/console.log" -c "$D/console.yaml" || exit 1
wait_for 30 "formJob registered" eval "zkf_cli ls /cform/formJob/instances | grep -q 127.0.0.71"

# ------------------------------------------------ the API: every error at once
LOGIN=$(curl -s -c "$D/cookies" -H 'Content-Type: application/json' \
  --data '{"user":"alice","password":"adm1n pass"}' "$CENV_URL/api/login")
CSRF=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["csrfToken"])' "$LOGIN")
CFG_URL=$CENV_URL/api/registries/cform/jobs/formJob/config
VERSION=$(curl -s -b "$D/cookies" "$CFG_URL" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
BAD='{"jobName":"formJob","jobType":"SCRIPT","scriptCommandLine":"/bin/true","shardingTotalCount":"abc","cron":"0 0 0 1 1 ? 2001","timeZone":"Mars/Base"}'
code=$(curl -s -b "$D/cookies" -o "$D/put.json" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
  -H "X-CSRF-Token: $CSRF" --data "{\"version\":$VERSION,\"config\":$BAD}" "$CFG_URL")
errs=$(python3 -c 'import json,sys; print(sorted((e["field"], e["message"]) for e in json.load(open(sys.argv[1]))["errors"]))' "$D/put.json")
want="[('cron', 'has no fire time ahead'), ('shardingTotalCount', 'expected an integer, got \"abc\"'), ('timeZone', 'unknown time zone \"Mars/Base\"')]"
[ "$code" = 422 ] && [ "$errs" = "$want" ] && pass "a type error, a bad cron and an unknown zone: three errors" \
  || fail "PUT: $code $errs"
curl -s -b "$D/cookies" "$CENV_URL/api/fields" >"$D/fields.json"
python3 - "$D/fields.json" <<'PY' && pass "GET /api/fields: the table with help lines and the zones" || fail "fields: $(head -c 300 "$D/fields.json")"
import json, sys
d = json.load(open(sys.argv[1]))
f = {x["name"]: x for x in d["fields"]}
assert f["jobType"]["type"] == "enum" and f["jobType"]["choices"] == ["SIMPLE", "DATAFLOW", "SCRIPT", "HTTP"]
assert f["shardingTotalCount"]["type"] == "integer" and f["cron"]["help"]
assert f["jobClass"]["form"] == "java" and f["monitorPort"]["form"] == "java"
assert f["jobProperties.job_exception_handler"]["inProps"]
assert f["timeZone"]["timeZone"] and "Asia/Shanghai" in d["timeZones"]
PY

# ------------------------------------------------------------- the browser
CONSOLE_URL=$CENV_URL ARTIFACTS=$ART USER_DATA_DIR=$D/chromium-profile \
  NODE_PATH=$NODE_MODULES timeout 300 node "$EJ_SOURCE_DIR/tests/browser/form.e2e.js" || FAILS=$((FAILS + 1))
echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
