# Source this from a shell test: a private ZooKeeper server for the test.
#   zkf_start            starts one; sets ZKF_PORT, ZKF_CONNECT, ZKF_PID, ZKF_DIR
#   zkf_stop / zkf_restart
#   zkf_cli CMD...       runs zkCli.sh against it (e.g. zkf_cli set /ns/job/servers/ip DISABLED)
#   zkf_track PID        registers another process to be killed (by pid) at exit
#   ZKF_ADDR=A zkf_start the server listens on address A (default 127.0.0.1;
#                        e.g. the host side of a veth pair the test created)
#   zkf_ensemble_start N [W] N servers on loopback ports (returns once W, default N,
#                        serve with a leader); sets
#                        ZKF_CONNECT (all of them), ZKF_ENS_PIDS[1..N], ZKF_ENS_PORTS[1..N]
#   zkf_ensemble_kill I / zkf_ensemble_restart I / zkf_ensemble_leader (prints I)
#   ZKF_ENS_JVM="FLAGS"  the ensemble servers' JVM flags (default: a small heap
#                        and the quick-starting compiler, for tests; "" gives
#                        the JVM's defaults, as Debian's zkServer.sh runs it)
# At exit (also on failure or signal) every tracked process and the server are
# killed by pid and the data directory is removed. The server also dies with
# this shell (PR_SET_PDEATHSIG through setpriv) if the shell is killed.
ZKF_PIDS=()
ZKF_ENS_PIDS=()
ZKF_ENS_PORTS=()
zkf_cleanup() {
  local p
  for p in "${ZKF_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${ZKF_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "${ZKF_PID:-}" ] && { kill -KILL "$ZKF_PID" 2>/dev/null || true; wait "$ZKF_PID" 2>/dev/null || true; }
  for p in "${ZKF_ENS_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ -n "${ZKF_DIR:-}" ] && [ -z "${ZKF_KEEP_DATA:-}" ] && rm -rf "$ZKF_DIR"
  return 0
}
trap zkf_cleanup EXIT
trap 'exit 130' INT TERM

zkf_track() { ZKF_PIDS+=("$1"); }

zkf_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
    echo $(( 20000 + RANDOM % 20000 ))
}

# N distinct free loopback ports, one per line: one interpreter for all
# (a fleet of daemons would otherwise start one per port).
zkf_free_ports() {
  python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in ss))' "$1" 2>/dev/null ||
    { local i; for i in $(seq 1 "$1"); do echo $(( 20000 + RANDOM % 20000 )); done; }
}

zkf__spawn() {
  setpriv --pdeathsig KILL java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.ZooKeeperServerMain "$ZKF_DIR/zoo.cfg" >>"$ZKF_DIR/zookeeper.log" 2>&1 </dev/null &
  ZKF_PID=$!
  local i
  for i in $(seq 1 600); do
    if [ "$(echo ruok | timeout 2 nc -q1 "${ZKF_ADDR:-127.0.0.1}" "$ZKF_PORT" 2>/dev/null)" = imok ]; then return 0; fi
    kill -0 "$ZKF_PID" 2>/dev/null || { echo "zkfixture: server exited, see $ZKF_DIR/zookeeper.log" >&2; return 1; }
    sleep 0.05
  done
  echo "zkfixture: server did not start" >&2
  return 1
}

zkf_start() {
  ZKF_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ejob-zk-XXXXXX")
  ZKF_PORT=$(zkf_free_port)
  ZKF_CONNECT="${ZKF_ADDR:-127.0.0.1}:$ZKF_PORT"
  mkdir -p "$ZKF_DIR/data"
  cat >"$ZKF_DIR/zoo.cfg" <<CFG
tickTime=${ZKF_TICK_MS:-200}
dataDir=$ZKF_DIR/data
clientPort=$ZKF_PORT
clientPortAddress=${ZKF_ADDR:-127.0.0.1}
maxSessionTimeout=$(( ${ZKF_TICK_MS:-200} * 20 ))
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
CFG
  zkf__spawn
}

zkf_stop() {
  kill -KILL "$ZKF_PID" 2>/dev/null || true
  wait "$ZKF_PID" 2>/dev/null || true
}

zkf_restart() { zkf__spawn; }

zkf_cli() {
  JAVA_OPTS="-Xmx128m" CLIENT_JVMFLAGS="-Dzookeeper.jmx.log4j.disable=true" \
    /usr/share/zookeeper/bin/zkCli.sh -server "$ZKF_CONNECT" "$@" 2>/dev/null | grep -v -E '^(Connecting to|WATCHER::|WatchedEvent|$)'
}

# ------------------------------------------------------------ ensembles
zkf__ens_spawn() { # I
  local i=$1
  # Short election back-off and peer connect timeout: a quorum forms and
  # re-elects in seconds, not the default minute.
  # shellcheck disable=SC2086 # the flags are words
  setpriv --pdeathsig KILL java ${ZKF_ENS_JVM--Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1} \
    -Dzookeeper.fastleader.maxNotificationInterval=800 -Dzookeeper.cnxTimeout=1000 \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZKF_DIR/zoo$i.cfg" >>"$ZKF_DIR/zookeeper$i.log" 2>&1 </dev/null &
  ZKF_ENS_PIDS[$i]=$!
}

# Mode of server I ("leader", "follower") or "" when it does not answer.
zkf_ensemble_mode() {
  echo srvr | timeout 2 nc -q1 127.0.0.1 "${ZKF_ENS_PORTS[$1]}" 2>/dev/null | sed -n 's/^Mode: //p'
}

zkf_ensemble_wait() { # wait until N servers serve, one of them leading
  local i k n=${#ZKF_ENS_PORTS[@]} serving leaders
  for k in $(seq 1 1200); do
    serving=0; leaders=0
    for i in "${!ZKF_ENS_PORTS[@]}"; do
      case "$(zkf_ensemble_mode "$i")" in
        leader) serving=$((serving + 1)); leaders=$((leaders + 1)) ;;
        follower) serving=$((serving + 1)) ;;
      esac
    done
    [ "$serving" -ge "${1:-$n}" ] && [ "$leaders" -eq 1 ] && return 0
    sleep 0.1
  done
  echo "zkfixture: ensemble did not form, see $ZKF_DIR/zookeeper*.log" >&2
  return 1
}

zkf_ensemble_start() { # [N [WAIT_FOR]]: N servers; returns once WAIT_FOR (default N) serve
  local n=${1:-3} i servers="" conn=""
  ZKF_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ejob-zkens-XXXXXX")
  for i in $(seq 1 "$n"); do
    ZKF_ENS_PORTS[$i]=$(zkf_free_port)
    servers+="server.$i=127.0.0.1:$(zkf_free_port):$(zkf_free_port)"$'\n'
    conn+="${conn:+,}127.0.0.1:${ZKF_ENS_PORTS[$i]}"
  done
  for i in $(seq 1 "$n"); do
    mkdir -p "$ZKF_DIR/data$i"
    echo "$i" >"$ZKF_DIR/data$i/myid"
    cat >"$ZKF_DIR/zoo$i.cfg" <<CFG
tickTime=${ZKF_ENS_TICK_MS:-500}
initLimit=40
syncLimit=10
dataDir=$ZKF_DIR/data$i
clientPort=${ZKF_ENS_PORTS[$i]}
clientPortAddress=127.0.0.1
maxSessionTimeout=$(( ${ZKF_ENS_TICK_MS:-500} * 20 ))
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
$servers
CFG
    zkf__ens_spawn "$i"
  done
  ZKF_CONNECT=$conn
  zkf_ensemble_wait "${2:-$n}"
}

zkf_ensemble_leader() {
  local i
  for i in "${!ZKF_ENS_PORTS[@]}"; do
    [ "$(zkf_ensemble_mode "$i")" = leader ] && { echo "$i"; return 0; }
  done
  return 1
}

zkf_ensemble_kill() {
  kill -KILL "${ZKF_ENS_PIDS[$1]}" 2>/dev/null || true
  wait "${ZKF_ENS_PIDS[$1]}" 2>/dev/null || true
}

zkf_ensemble_restart() { zkf__ens_spawn "$1"; }
