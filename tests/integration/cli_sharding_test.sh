#!/bin/sh
# `ejob sharding`: exact output for the documented vectors and the error exits.
# Usage: cli_sharding_test.sh PATH/TO/ejob   (or with EJOB=PATH/TO/ejob in the environment)
set -u
EJOB=${1:-${EJOB:-}}
if [ -z "$EJOB" ]; then
    echo "usage: cli_sharding_test.sh PATH/TO/ejob (or set EJOB)" >&2
    exit 2
fi
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
T=$(printf '\t')
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# expect_out "EXPECTED" ARGS...: exit 0 and stdout exactly EXPECTED.
expect_out() {
    want=$1
    shift
    "$EJOB" sharding "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    printf '%s\n' "$want" >"$TMP/want"
    if [ "$rc" -ne 0 ]; then
        fail "ejob sharding $*: exit $rc: $(cat "$TMP/err")"
    elif ! cmp -s "$TMP/out" "$TMP/want"; then
        fail "ejob sharding $*: got:
$(cat "$TMP/out")
want:
$want"
    fi
}

# expect_err CODE "MESSAGE PART" ARGS...: exit CODE, stderr contains MESSAGE PART, no stdout.
expect_err() {
    code=$1
    msg=$2
    shift 2
    "$EJOB" sharding "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" -ne "$code" ]; then
        fail "ejob sharding $*: exit $rc, want $code (stderr: $(cat "$TMP/err"))"
    elif ! grep -qF -- "$msg" "$TMP/err"; then
        fail "ejob sharding $*: stderr lacks '$msg': $(cat "$TMP/err")"
    elif [ -s "$TMP/out" ]; then
        fail "ejob sharding $*: printed on stdout after an error: $(cat "$TMP/out")"
    fi
}

H="host0@-@0 host1@-@0 host2@-@0"

# AverageAllocation (ElasticJob's test vectors).
expect_out "host0@-@0${T}0,1,2" --strategy AVERAGE --job j --count 3 host0@-@0
expect_out "host0@-@0${T}0
host1@-@0${T}1
host2@-@0${T}" --strategy AVERAGE --job j --count 2 $H
expect_out "host0@-@0${T}0,1,2
host1@-@0${T}3,4,5
host2@-@0${T}6,7,8" --strategy AVERAGE --job j --count 9 $H
expect_out "host0@-@0${T}0,1,6
host1@-@0${T}2,3,7
host2@-@0${T}4,5" --job j --count 8 $H
expect_out "host0@-@0${T}0,1,2,9
host1@-@0${T}3,4,5
host2@-@0${T}6,7,8" --strategy=AVG_ALLOCATION --job=j --count=10 $H
expect_out "host0@-@0${T}0,1,6
host1@-@0${T}2,3,7
host2@-@0${T}4,5" --strategy com.dangdang.ddframe.job.lite.api.strategy.impl.AverageAllocationJobShardingStrategy --job j --count 8 $H

# Options may follow the instances; "--" ends the options.
expect_out "host0@-@0${T}0,1,6
host1@-@0${T}2,3,7
host2@-@0${T}4,5" $H --job j --count 8
expect_out "-odd${T}0
host1@-@0${T}1" --job j --count 2 -- -odd host1@-@0

# OdevitySortByName.
expect_out "host0@-@0${T}0
host1@-@0${T}1
host2@-@0${T}" --strategy ODEVITY --job 1 --count 2 $H
expect_out "host0@-@0${T}
host1@-@0${T}1
host2@-@0${T}0" --strategy odevity --job 0 --count 2 $H

# RotateServerByName.
expect_out "host0@-@0${T}
host1@-@0${T}0
host2@-@0${T}1" --strategy ROTATE --job 1 --count 2 $H
expect_out "host0@-@0${T}1
host1@-@0${T}
host2@-@0${T}0" --strategy ROUND_ROBIN --job 2 --count 2 $H
expect_out "host0@-@0${T}0
host1@-@0${T}1
host2@-@0${T}" --strategy io.elasticjob.lite.api.strategy.impl.RotateServerByNameJobShardingStrategy --job 3 --count 2 $H
# Integer.MIN_VALUE hash: Java fails; ejob does not rotate.
for name in polygenelubricants GydZG_ "DESIGNING WORKHOUSES"; do
    expect_out "host0@-@0${T}0,1,6
host1@-@0${T}2,3,7
host2@-@0${T}4,5" --strategy ROTATE --job "$name" --count 8 $H
done

# Sticky: no previous file = average; feed the output back after a join.
expect_out "host0@-@0${T}0,1,2
host1@-@0${T}3,4,5
host2@-@0${T}6,7,8" --strategy STICKY --job j --count 9 $H
"$EJOB" sharding --strategy STICKY --job j --count 9 $H >"$TMP/prev" || fail "sticky run"
expect_out "host0@-@0${T}0,1,2
host1@-@0${T}3,4
host2@-@0${T}6,7
host3@-@0${T}5,8" --strategy STICKY --job j --count 9 --previous "$TMP/prev" $H host3@-@0
# host1 leaves: only its items move.
expect_out "host0@-@0${T}0,1,2,3,4
host2@-@0${T}5,6,7,8" --strategy STICKY --job j --count 9 --previous "$TMP/prev" host0@-@0 host2@-@0
# Items >= count are ignored (the count shrank); blank lines and CRLF are accepted.
printf 'host0@-@0\t0,1,2\r\n\nhost1@-@0\t3,4,5\nhost2@-@0\t6,7,8\n' >"$TMP/crlf"
expect_out "host0@-@0${T}0,1
host1@-@0${T}3,4
host2@-@0${T}2,5" --strategy STICKY --job j --count 6 --previous "$TMP/crlf" $H
# An instance listed with no items.
printf 'host0@-@0\t\nhost1@-@0\t0,1\n' >"$TMP/empty"
expect_out "host0@-@0${T}2
host1@-@0${T}0,1" --strategy STICKY --job j --count 3 --previous "$TMP/empty" host0@-@0 host1@-@0

# Consistent hash: every item once, same result whatever the instance order.
"$EJOB" sharding --strategy CONSISTENT_HASH --job j --count 50 a@-@1 b@-@1 c@-@1 >"$TMP/ch1" ||
    fail "consistent hash run"
"$EJOB" sharding --strategy CONSISTENT_HASH --job j --count 50 c@-@1 a@-@1 b@-@1 >"$TMP/ch2" ||
    fail "consistent hash run 2"
if [ "$(sort "$TMP/ch1")" != "$(sort "$TMP/ch2")" ]; then
    fail "consistent hash depends on instance order"
fi
n_items=$(cut -f2 "$TMP/ch1" | tr ',' '\n' | grep -c .)
[ "$n_items" -eq 50 ] || fail "consistent hash assigned $n_items items, want 50"

# Usage errors: exit 2.
expect_err 2 'unknown sharding strategy "Foo"' --strategy Foo --job j --count 2 a
expect_err 2 '--count must be an integer from 1' --job j --count 0 a
expect_err 2 '--count must be an integer from 1' --job j --count -3 a
expect_err 2 '--count must be an integer from 1' --job j --count 3x a
expect_err 2 '--count must be an integer from 1' --job j --count 99999999999 a
expect_err 2 '--count N is required' --job j a
expect_err 2 '--job JOBNAME is required' --count 2 a
expect_err 2 'no instances given' --job j --count 2
expect_err 2 'option --job needs a value' --count 2 a --job
expect_err 2 'unknown option --bogus' --bogus --job j --count 2 a
expect_err 2 'instance "a" is listed twice' --job j --count 2 a b a

# Failed operations: exit 1.
expect_err 1 "--previous $TMP/missing: No such file or directory" \
    --strategy STICKY --job j --count 2 --previous "$TMP/missing" a
printf 'a\t0\nno tab here\n' >"$TMP/bad1"
expect_err 1 "--previous $TMP/bad1:2: expected INSTANCE<TAB>items" \
    --strategy STICKY --job j --count 2 --previous "$TMP/bad1" a
printf 'a\t0,x\n' >"$TMP/bad2"
expect_err 1 "--previous $TMP/bad2:1: instance \"a\": item \"x\" is not a non-negative integer" \
    --strategy STICKY --job j --count 2 --previous "$TMP/bad2" a
printf 'a\t0,1\nb\t1\n' >"$TMP/bad3"
expect_err 1 "--previous $TMP/bad3:2: item 1 of instance \"b\" is already owned by \"a\"" \
    --strategy STICKY --job j --count 2 --previous "$TMP/bad3" a b
printf 'a\t0,\n' >"$TMP/bad4"
expect_err 1 "--previous $TMP/bad4:1: instance \"a\": item \"\" is not" \
    --strategy STICKY --job j --count 2 --previous "$TMP/bad4" a

# BALANCED: the instance holding items of other jobs (--load) gets fewer;
# the class name is the same strategy; --previous keeps items in balance.
expect_out "host0@-@0${T}
host1@-@0${T}0,2
host2@-@0${T}1,3" --strategy BALANCED --job j --count 4 --load host0@-@0=5 $H
expect_out "host0@-@0${T}
host1@-@0${T}0,2
host2@-@0${T}1,3" --strategy io.ejob.sharding.BalancedShardingStrategy --job j --count 4 \
    --load host0@-@0=5 --load host1@-@0=0 $H
printf 'host0@-@0\t0,1,2\nhost1@-@0\t3\n' >"$TMP/prevb"
expect_out "host0@-@0${T}0,1
host1@-@0${T}3
host2@-@0${T}2" --strategy BALANCED --job j --count 4 --previous "$TMP/prevb" $H
expect_err 2 '--load applies only to BALANCED, not to AVERAGE' --job j --count 2 --load a=1 a
expect_err 2 '--load expects INSTANCE=N (N >= 0), got "a=-1"' --strategy BALANCED --job j \
    --count 2 --load a=-1 a
expect_err 2 '--load b=1: b is not one of the instances given' --strategy BALANCED --job j \
    --count 2 --load b=1 a

# Help.
"$EJOB" sharding --help >"$TMP/out" 2>&1 || fail "--help exit"
grep -q 'Usage: ejob sharding' "$TMP/out" || fail "--help text"

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "cli_sharding: all checks passed"
