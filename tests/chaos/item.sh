#!/bin/bash
# A chaos-suite item: item.sh LOG MIN_S MAX_S [FAIL_PCT] CONTEXT_JSON
# Appends START, then END (finished) or STOP (got SIGTERM) to LOG, one
# write per line (O_APPEND), and runs MIN_S..MAX_S seconds meanwhile; with
# FAIL_PCT, that percentage of runs exit 1 after their END (EJ_CHAOS_RETRY).
log=$1 min=$2 max=$3 fail=0 ctx=$4
[ $# -ge 5 ] && fail=$4 ctx=$5
# Epoch ms without a subshell: on a loaded machine a fork for $(...) can
# fail, which left a START line without its time (a false overlap).
ms() { now=${EPOCHREALTIME/./}; now=$((now / 1000)); }
[[ $ctx =~ \"jobName\":\"([^\"]*)\" ]] && job=${BASH_REMATCH[1]}
[[ $ctx =~ \"shardingItem\":([0-9]+) ]] && item=${BASH_REMATCH[1]}
[[ $ctx =~ @-@READY@-@([^\"]*)\" ]] && inst=${BASH_REMATCH[1]}
read -r stat </proc/$$/stat
set -- ${stat##*) }
pgid=$3
secs=$((min + RANDOM % (max - min + 1)))
id="$job $item $inst $$ $pgid"
trap 'ms; echo "STOP $id $now" >>"$log"; exit 143' TERM
ms
echo "START $id $now ${EJOB_FENCING_TOKEN:-0} $secs" >>"$log"
sleep "$secs" &
wait $!
ms
echo "END $id $now" >>"$log"
[ $((RANDOM % 100)) -ge "$fail" ]
