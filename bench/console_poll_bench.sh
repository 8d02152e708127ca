#!/bin/bash
# What the console's job list costs a browser tab that polls it (every
# 1.5 s) with many jobs: bytes and ms per refresh.
#
#   bench/console_poll_bench.sh [EJOB_BINARY] [JOBS] [POLLS]
#       (default: build/ejob, 1500 jobs, 10 polls 1.5 s apart)
#
# A private ZooKeeper is filled with JOBS jobs (build/ej_zkfill: a running
# job's nodes each, 6 in 7 firing every 5 s), `ejob console` serves them,
# and curl polls as the page does:
#   whole list      GET .../jobs, what the page fetched before paging
#   page of 50      GET .../jobs?limit=50&sort=name, without and with
#                   If-None-Match (the page sends its last ETag back)
# Run it with an older binary to get the figures from before (it ignores
# the query and has no ETag: every poll is the whole list).
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)
EJOB=${1:-$HERE/build/ejob}
JOBS=${2:-1500}
POLLS=${3:-10}
FILL=${EJ_BUILD_DIR:-$HERE/build}/ej_zkfill
[ -x "$EJOB" ] && [ -x "$FILL" ] || { echo "need $EJOB and $FILL (build first)" >&2; exit 1; }
source "$HERE/tests/support/zkfixture.sh"
zkf_start || exit 1
t0=$(date +%s%N)
"$FILL" "$ZKF_CONNECT" bench "$JOBS" || exit 1
echo "filled $JOBS jobs in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
setpriv --pdeathsig KILL "$EJOB" console --no-auth --listen 127.0.0.1:0 \
  --registry "$ZKF_CONNECT/bench" >"$ZKF_DIR/console.log" 2>&1 &
zkf_track $!
URL=
for _ in $(seq 1 600); do
  URL=$(sed -n 's|^ejob console: serving \(http://[^ ]*\)/ .*|\1|p' "$ZKF_DIR/console.log")
  [ -n "$URL" ] && break
  sleep 0.1
done
[ -n "$URL" ] || { echo "console did not start: $(cat "$ZKF_DIR/console.log")" >&2; exit 1; }
JOBS_URL=$URL/api/registries/bench/jobs

# poll NAME URL USE_ETAG: POLLS polls 1.5 s apart; prints bytes and ms per poll.
poll() {
  local name=$1 url=$2 use_etag=$3 etag= bytes=0 ms=0 not_modified=0 i out code size time
  for i in $(seq 1 "$POLLS"); do
    out=$(curl -s -D "$ZKF_DIR/h" -o /dev/null -w '%{http_code} %{size_download} %{time_total}' \
      ${etag:+-H "If-None-Match: $etag"} "$url")
    read -r code size time <<<"$out"
    [ "$code" = 304 ] && not_modified=$((not_modified + 1))
    [ "$use_etag" = yes ] && [ "$code" = 200 ] &&
      etag=$(sed -n 's/^[Ee][Tt][Aa][Gg]: \(.*\)\r$/\1/p' "$ZKF_DIR/h")
    bytes=$((bytes + size))
    ms=$(python3 -c "print($ms + $time * 1000)")
    sleep 1.5
  done
  python3 -c "print('%-30s %8.0f bytes  %7.1f ms per refresh  (%d polls, %d answered 304)' % ('$name', $bytes / $POLLS, $ms / $POLLS, $POLLS, $not_modified))"
}
echo "$EJOB, $JOBS jobs:"
poll "whole list" "$JOBS_URL" no
poll "page of 50, no ETag" "$JOBS_URL?limit=50&sort=name" no
poll "page of 50, ETag sent back" "$JOBS_URL?limit=50&sort=name" yes
