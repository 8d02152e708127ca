# Source this from a shell test: its checks and their count.
#   pass WHAT              prints "ok: WHAT"
#   fail WHAT              prints "FAIL: WHAT" on stderr and counts it in FAILS
#   wait_for SECS WHAT CMD...  runs CMD every 0.1 s until it succeeds (pass)
#                          or SECS have gone (fail); returns CMD's verdict
#   logged FILE TEXT       FILE (a log) holds TEXT
# The test ends with: echo "$FAILS failure(s)"; [ "$FAILS" = 0 ]
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
wait_for() {
  local secs=$1 what=$2; shift 2
  local end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do "$@" && { pass "$what"; return 0; }; sleep 0.1; done
  fail "$what (not within ${secs}s)"; return 1
}
logged() { grep -q -- "$2" "$1" 2>/dev/null; }
