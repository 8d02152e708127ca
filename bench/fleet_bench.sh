#!/bin/bash
# Fleet benchmark: several `ejob run` daemons share one set of one-item
# SCRIPT jobs on a 3-server ZooKeeper ensemble on loopback, and it prints
#   - how long until every daemon is registered (/readyz 200), and how many
#     daemons exited on their own meanwhile;
#   - CPU seconds of the ZooKeeper servers, of the daemons and of the rest
#     (item scripts, the harness), and how busy the machine was, during the
#     registration and during the steady window;
#   - over a steady window: ZooKeeper requests/s and watches (mntr, summed
#     over the servers), requests per fire (all daemons' requests over the
#     item runs started), fires run vs due, lateness percentiles (item start
#     minus fire time), RSS and threads per daemon;
#   - failover: KILL daemons killed with -9 at once while their items run;
#     how long until each of their running items ran elsewhere, and the
#     ZooKeeper requests of the whole fleet from the kill to the end;
#   - overlaps: two runs of one job's item alive at once (never allowed).
#
#   bench/fleet_bench.sh [--daemons N] [--jobs J] [--period S] [--window S]
#                        [--kill K] [--session-ms MS] [--stagger-ms MS]
#                        [--strategy S] [--ejob PATH]
# Defaults are small (5 daemons x 20 jobs); the issue's figures are
# --daemons 30 --jobs 100 and --daemons 50 --jobs 100 (heavy: run them on a
# quiet machine). Items run 2..3 s (tests/chaos/item.sh). --strategy is
# the jobs' jobShardingStrategyType (default ROTATE, which spreads one-item
# jobs over the daemons; AVERAGE_ALLOCATION puts every one on the same). Every process is
# killed by pid at exit; the work directory is removed (FLEET_KEEP=1 keeps it).
set -u
N=5 J=20 PERIOD=10 WINDOW=60 KILL=2 SESSION=5000 STAGGER=0 STRATEGY=ROTATE
HERE=$(cd "$(dirname "$0")/.." && pwd)
E=${EJOB:-$HERE/build/ejob}
while [ $# -gt 0 ]; do
  case "$1" in
  --daemons) N=$2; shift 2 ;;
  --jobs) J=$2; shift 2 ;;
  --period) PERIOD=$2; shift 2 ;;
  --window) WINDOW=$2; shift 2 ;;
  --kill) KILL=$2; shift 2 ;;
  --session-ms) SESSION=$2; shift 2 ;;
  --stagger-ms) STAGGER=$2; shift 2 ;;
  --strategy) STRATEGY=$2; shift 2 ;;
  --ejob) E=$2; shift 2 ;;
  *) echo "usage: $0 [--daemons N] [--jobs J] [--period S] [--window S] [--kill K] [--session-ms MS] [--stagger-ms MS] [--strategy S] [--ejob PATH]" >&2; exit 2 ;;
  esac
done
[ -x "$E" ] || { echo "no ejob binary at $E (--ejob PATH)" >&2; exit 2; }
[ "$KILL" -lt "$N" ] || { echo "--kill must be below --daemons" >&2; exit 2; }

source "$HERE/tests/support/zkfixture.sh"
DPID=()
WATCH_PID=""
fleet_cleanup() {
  local p
  for p in "${DPID[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for p in "${DPID[@]}"; do wait "$p" 2>/dev/null; done
  [ -n "$WATCH_PID" ] && { kill -KILL "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null; }
  [ -n "${FLEET_KEEP:-}" ] && ZKF_KEEP_DATA=1 && echo "kept $ZKF_DIR" >&2
  zkf_cleanup
}
trap fleet_cleanup EXIT
now_ms() { date +%s%3N; }
say() { echo "[$(date +%T)] $*" >&2; }

zkf_ensemble_start 3 || exit 1
D=$ZKF_DIR/fleet
mkdir -p "$D"
LOG=$D/exec.log GONE=$D/gone.log
: >"$LOG"
{
  echo "regCenter:"
  echo "  serverLists: $ZKF_CONNECT"
  echo "  namespace: fleet"
  echo "  sessionTimeoutMilliseconds: $SESSION"
  echo "tracing:"
  echo "  type: NONE"
  echo "jobs:"
  for j in $(seq 0 $((J - 1))); do
    echo "  p$j:"
    echo "    elasticJobType: SCRIPT"
    echo "    cron: \"0/$PERIOD * * * * ?\""
    echo "    shardingTotalCount: 1"
    echo "    failover: true"
    echo "    jobShardingStrategyType: $STRATEGY"
    echo "    overwrite: true"
    echo "    props:"
    echo "      script.command.line: $HERE/tests/chaos/item.sh $LOG 2 3"
  done
} >"$D/fleet.yaml"

mntr_sum() { # KEY: the sum over the servers
  local i s=0 v
  for i in "${!ZKF_ENS_PORTS[@]}"; do
    v=$(echo mntr | timeout 2 nc -q1 127.0.0.1 "${ZKF_ENS_PORTS[$i]}" 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }')
    s=$((s + ${v:-0}))
  done
  echo $s
}

# CPU: seconds a set of processes used (utime + stime, not their children),
# and seconds the whole machine was busy (/proc/stat: all but idle and
# iowait), so a run shows how much of the machine ZooKeeper, the daemons
# and the rest (item scripts, this harness) took.
HZ=$(getconf CLK_TCK)
cpu_ticks() {
  local t=0 p v
  for p in "$@"; do
    v=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null)
    t=$((t + ${v:-0}))
  done
  echo $t
}
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
cpu_line() { # LABEL ZK0 D0 BUSY0 MS: the CPU seconds since those readings
  awk -v l="$1" -v z=$(( $(cpu_ticks "${ZKF_ENS_PIDS[@]}") - $2 )) -v d=$(( $(cpu_ticks "${DPID[@]}") - $3 )) \
    -v b=$(( $(busy_ticks) - $4 )) -v ms="$5" -v hz="$HZ" -v n="$(nproc)" 'BEGIN {
    printf "cpu (%s): zookeeper %.1f s, daemons %.1f s, other %.1f s; machine busy %.0f%% of %d cores x %.1f s\n",
      l, z / hz, d / hz, (b - z - d) / hz, 100 * b / hz / (n * ms / 1000), n, ms / 1000 }'
}

ip_of() { echo "127.0.1.$(($1 + 1))"; }
PORT=()
python3 "$HERE/tests/chaos/chaos_check.py" watch "$LOG" "$GONE" "$D/stop-watch" &
WATCH_PID=$!
Q0=$(mntr_sum zk_packets_received)
ZC0=$(cpu_ticks "${ZKF_ENS_PIDS[@]}") BC0=$(busy_ticks) DC0=0
T0=$(now_ms)
say "starting $N daemons x $J jobs (period $PERIOD s, session $SESSION ms) on $ZKF_CONNECT"
mapfile -t FREE < <(zkf_free_ports "$N")
for i in $(seq 1 "$N"); do
  PORT[$i]=${FREE[$((i - 1))]}
  mkdir -p "$D/s$i"
  EJOB_STATE_DIR=$D/s$i EJOB_IP=$(ip_of "$i") setpriv --pdeathsig KILL \
    "$E" run -c "$D/fleet.yaml" --metrics-listen "127.0.0.1:${PORT[$i]}" --drain-timeout-ms 2000 \
    2>"$D/daemon$i.log" &
  DPID[$i]=$!
  [ "$STAGGER" -gt 0 ] && sleep "$(awk -v ms="$STAGGER" 'BEGIN { printf "%.3f", ms / 1000 }')"
done
inst_of() { echo "$(ip_of "$1")@-@${DPID[$1]}"; }

# ------------------------------------------------------------ registration
# One curl per round for every daemon not ready yet: a process per daemon
# every half second took a visible share of the machine being measured.
declare -A READY_AT
EXITED=0
deadline=$((SECONDS + 600))
while [ $SECONDS -lt $deadline ]; do
  ask=()
  for i in $(seq 1 "$N"); do
    [ -n "${READY_AT[$i]:-}" ] && continue
    if ! kill -0 "${DPID[$i]}" 2>/dev/null; then
      READY_AT[$i]=exited
      EXITED=$((EXITED + 1))
      say "daemon $i exited: $(grep -m1 -E 'error' "$D/daemon$i.log")"
      continue
    fi
    ask+=(-o /dev/null "http://127.0.0.1:${PORT[$i]}/readyz?d=$i")
  done
  [ ${#ask[@]} = 0 ] && break
  answers=$(curl -s --max-time 2 -w '%{http_code} %{url_effective}\n' "${ask[@]}")
  t=$(now_ms) # after the answers: a time no earlier than the readiness
  while read -r code url; do
    [ "$code" = 200 ] && READY_AT[${url##*d=}]=$t
  done <<<"$answers"
  sleep 0.5
done
T_REG=$(now_ms)
CPU_REG=$(cpu_line registration "$ZC0" "$DC0" "$BC0" $((T_REG - T0)))
Q_REG=$(( $(mntr_sum zk_packets_received) - Q0 ))
W_REG=$(mntr_sum zk_watch_count)
NREADY=0 LAST=0
for i in $(seq 1 "$N"); do
  v=${READY_AT[$i]:-}
  case "$v" in "" | exited) continue ;; esac
  NREADY=$((NREADY + 1))
  [ "$v" -gt "$LAST" ] && LAST=$v
done
RETRIED=$(grep -l "not started (attempt" "$D"/daemon*.log 2>/dev/null | wc -l)
echo "registered: $NREADY of $N daemons ready in $(( (LAST - T0) )) ms (last one); $EXITED exited on their own; $RETRIED retried a job start"
echo "registration: $Q_REG ZooKeeper requests ($(( Q_REG / (N * J) )) per daemon and job), $W_REG watches"
echo "$CPU_REG"

# ------------------------------------------------------------ steady window
sleep 3
A=$(now_ms)
P0=$(mntr_sum zk_packets_received)
ZC0=$(cpu_ticks "${ZKF_ENS_PIDS[@]}") DC0=$(cpu_ticks "${DPID[@]}") BC0=$(busy_ticks)
sleep "$WINDOW"
B=$(now_ms)
CPU_WIN=$(cpu_line "steady window" "$ZC0" "$DC0" "$BC0" $((B - A)))
P1=$(mntr_sum zk_packets_received)
W1=$(mntr_sum zk_watch_count)
C1=$(mntr_sum zk_num_alive_connections)
RSS=() THR=()
for i in $(seq 1 "$N"); do
  [ -r "/proc/${DPID[$i]}/status" ] || continue
  RSS+=("$(awk '/^VmRSS/ { print $2 }' "/proc/${DPID[$i]}/status")")
  THR+=("$(awk '/^Threads/ { print $2 }' "/proc/${DPID[$i]}/status")")
done
echo "zookeeper: $(( (P1 - P0) * 1000 / (B - A) )) requests/s over $((B - A)) ms; $W1 watches; $C1 connections"
echo "$CPU_WIN"
echo "daemons: RSS $(printf '%s\n' "${RSS[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "%d..%d kB (median %d)", a[1], a[NR], a[int((NR + 1) / 2)] }'); threads $(printf '%s\n' "${THR[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "%d..%d", a[1], a[NR] }')"

# ------------------------------------------------------------ failover
# Kill KILL daemons while the items of a fire run (below). The victims are
# chosen first (the owners of the most items in the steady window: sharding
# is stable by then), since on a loaded machine choosing them takes seconds.
started_by_inst() {
  python3 - "$LOG" "$A" <<'PY2'
import sys
count = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) >= 7 and p[0] == "START" and int(p[6]) >= int(sys.argv[2]):
        count[p[3]] = count.get(p[3], 0) + 1
for inst, n in sorted(count.items(), key=lambda x: -x[1]):
    print(inst)
PY2
}
VICTIMS=()
for inst in $(started_by_inst); do
  for i in $(seq 1 "$N"); do
    [ "$(inst_of "$i")" = "$inst" ] && [ ${#VICTIMS[@]} -lt "$KILL" ] && VICTIMS+=("$i")
  done
done
for i in $(seq 1 "$N"); do
  [ ${#VICTIMS[@]} -ge "$KILL" ] && break
  [[ " ${VICTIMS[*]} " == *" $i "* ]] || VICTIMS+=("$i")
done
# The kill comes while the items of a fire run: 1 s after it, or half a
# second after the steady window's median start when items start later
# (a loaded machine starts them up to 1.5 s late, and a kill before its
# items start tests no failover).
PK0=$(mntr_sum zk_packets_received) TP0=$(now_ms) # before the timing below: it takes seconds
LATE50=$(awk -v a="$A" -v b="$B" -v p=$((PERIOD * 1000)) '$1 == "START" && $7 >= a && $7 < b { print $7 % p }' "$LOG" | sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }')
KILL_AFTER=$((LATE50 + 500 > 1000 ? LATE50 + 500 : 1000))
t=$(now_ms)
next=$(((t / 1000 / PERIOD + 1) * PERIOD * 1000))
sleep "$(awk -v ms=$((next - t + KILL_AFTER)) 'BEGIN { printf "%.3f", ms / 1000 }')"
KILLED=""
TK=$(now_ms)
for i in "${VICTIMS[@]}"; do
  KILLED+="$(inst_of "$i") "
  kill -KILL "${DPID[$i]}"
done 2>/dev/null
for i in "${VICTIMS[@]}"; do wait "${DPID[$i]}" 2>/dev/null; done
say "killed $KILL daemons at $TK ($KILL_AFTER ms after a fire; median item start $LATE50 ms after its fire)"
sleep $((SESSION / 1000 + 2 * PERIOD + 3))
PK1=$(mntr_sum zk_packets_received) TK1=$(now_ms)
echo "around the kill: $((PK1 - PK0)) ZooKeeper requests in $((TK1 - TP0)) ms, from $((TK - TP0)) ms before it (the expiries, the failover, the resharding and 3 fires; $(( (PK1 - PK0) * 1000 / (TK1 - TP0) )) requests/s)"
for i in $(seq 1 "$N"); do kill -TERM "${DPID[$i]}" 2>/dev/null; done
for i in $(seq 1 "$N"); do wait "${DPID[$i]}" 2>/dev/null; done
DPID=()
sleep 1
touch "$D/stop-watch"
wait "$WATCH_PID"
WATCH_PID=""

FLEET_DIR=$D FLEET_WIN_REQUESTS=$((P1 - P0)) python3 - "$LOG" "$GONE" "$A" "$B" "$PERIOD" "$J" "$TK" "$SESSION" $KILLED <<'PY'
import sys
log, gone_path, a, b, period, jobs, tk, session = sys.argv[1:9]
a, b, period, jobs, tk, session = int(a), int(b), int(period) * 1000, int(jobs), int(tk), int(session)
killed = set(sys.argv[9:])
gone = {}
for line in open(gone_path):
    p = line.split()
    if p and p[0] == "GONE":
        gone.setdefault(int(p[1]), []).append(int(p[2]))
runs, open_run = [], {}
for line in open(log):
    p = line.split()
    if len(p) < 7:
        continue
    pid = int(p[4])
    if p[0] == "START":
        r = dict(job=p[1], inst=p[3], pid=pid, start=int(p[6]), end=None)
        runs.append(r)
        open_run[pid] = r
    elif p[0] in ("END", "STOP") and pid in open_run:
        open_run.pop(pid)["end"] = int(p[6])
for r in runs:
    if r["end"] is None:
        seen = [t for t in gone.get(r["pid"], []) if t >= r["start"]]
        r["end"] = seen[0] if seen else 1 << 62
by_job = {}
for r in runs:
    by_job.setdefault(r["job"], []).append(r)
# Fires due vs run, and lateness, in the steady window.
due = ran = 0
late = []
first = (a + period - 1) // period * period
for j in range(jobs):
    rs = sorted(x["start"] for x in by_job.get(f"p{j}", []))
    s = first
    while s + period <= b:
        due += 1
        got = [t for t in rs if s <= t < s + period]
        if got:
            ran += 1
            late.append(got[0] - s)
        s += period
late.sort()
def pct(q):
    return late[min(len(late) - 1, int(q * len(late)))] if late else -1
print(f"fires: {ran} of {due} run ({100.0 * ran / due if due else 0:.2f}%); lateness p50 {pct(0.5)} ms, "
      f"p90 {pct(0.9)} ms, p99 {pct(0.99)} ms, max {late[-1] if late else -1} ms")
# ZooKeeper requests of the whole fleet (every daemon, every watch re-armed)
# per item run started in the steady window.
import os
starts = sum(1 for r in runs if a <= r["start"] < b)
if starts:
    print(f"requests per fire: {int(os.environ['FLEET_WIN_REQUESTS']) / starts:.1f} "
          f"(all daemons; {starts} item runs started in the steady window)")
# Failover of the killed daemons' running items.
delays, missing = [], []
for job, rs in by_job.items():
    victims = [r for r in rs if r["inst"] in killed and r["start"] <= tk < r["end"]]
    if not victims:
        continue
    later = [r["start"] for r in rs if r["inst"] not in killed and r["start"] >= tk]
    if later:
        delays.append(min(later) - tk)
    else:
        missing.append(job)
delays.sort()
# Which of them ran as FAILOVER (the others waited for the job's next
# fire): the survivors' logs, "source=FAILOVER ... in N ms" at each run's
# end; its start is the end minus N.
import glob, re, datetime
fo_start = {}
pat = re.compile(r"^(\S+)Z \S+ +\[event\] execution \S+ job=(\S+) item=\d+ source=FAILOVER .* in (\d+) ms$")
for path in glob.glob(os.path.join(os.environ["FLEET_DIR"], "daemon*.log")):
    for line in open(path, errors="replace"):
        m = pat.match(line.rstrip("\n"))
        if m:
            end = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc)
            start = int(end.timestamp() * 1000) - int(m.group(3))
            if start >= tk:
                fo_start[m.group(2)] = min(fo_start.get(m.group(2), 1 << 62), start)
fo = sorted(t - tk for t in fo_start.values())
if delays:
    print(f"failover: {len(delays)} running item(s) of {len(killed)} killed daemon(s) ran elsewhere "
          f"{delays[0]}..{delays[-1]} ms after the kill (median {delays[len(delays) // 2]}; "
          f"session {session} ms, target session + 2000 = {session + 2000} ms); "
          f"{len(missing)} never did")
    if fo:
        rest = ", the others at the job's next fire" if len(fo) < len(delays) else ""
        print(f"failover: {len(fo)} of them ran as FAILOVER {fo[0]}..{fo[-1]} ms after the kill "
              f"(median {fo[len(fo) // 2]}){rest}")
    else:
        print("failover: none of them ran as FAILOVER (all at the job's next fire)")
elif missing:
    print(f"failover: {len(missing)} running item(s) of {len(killed)} killed daemon(s), none of them "
          f"ran elsewhere before the end of the window")
else:
    print("failover: no item of the killed daemons was running at the kill")
# Overlaps.
ov = []
for job, rs in by_job.items():
    rs.sort(key=lambda r: r["start"])
    for i, x in enumerate(rs):
        for y in rs[i + 1:]:
            if y["start"] < x["end"]:
                ov.append((job, min(x["end"], y["end"]) - y["start"]))
print(f"overlaps: {len(ov)}" + (f" (max {max(o[1] for o in ov)} ms)" if ov else ""))
PY
