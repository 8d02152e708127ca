#!/bin/sh
# The demo job's work for one shard item. ejob runs it once per item with
#   item.sh RUNS_FILE CONTEXT_JSON
# where CONTEXT_JSON is ElasticJob's sharding context, e.g.
#   {"jobName":"demoJob","taskId":"demoJob@-@0,1@-@READY@-@127.0.0.11@-@4242",
#    "shardingTotalCount":6,"jobParameter":"","shardingItem":0,"shardingParameter":"a"}
# It appends one line "EPOCH_MS INSTANCE ITEM" to RUNS_FILE, then works for a
# while (so a run can be caught in the middle by a crash and failed over).
# What it prints is kept in the execution history (`ejob history show`).
runs=$1
ctx=$2
item=$(printf '%s' "$ctx" | sed -n 's/.*"shardingItem":\([0-9]*\).*/\1/p')
task=$(printf '%s' "$ctx" | sed -n 's/.*"taskId":"\([^"]*\)".*/\1/p')
instance=${task##*@-@READY@-@}
now=$(date +%s%3N)
echo "$now $instance $item" >>"$runs"
echo "item $item (parameter $(printf '%s' "$ctx" | sed -n 's/.*"shardingParameter":"\([^"]*\)".*/\1/p')) on $instance"
sleep "${DEMO_ITEM_SECONDS:-0.8}"
