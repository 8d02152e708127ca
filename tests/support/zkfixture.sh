# Source this from a shell test: a private ZooKeeper server for the test.
#   zkf_start            starts one; sets ZKF_PORT, ZKF_CONNECT, ZKF_PID, ZKF_DIR
#   zkf_stop / zkf_restart
#   zkf_cli CMD...       runs zkCli.sh against it (e.g. zkf_cli set /ns/job/servers/ip DISABLED)
#   zkf_track PID        registers another process to be killed (by pid) at exit
# At exit (also on failure or signal) every tracked process and the server are
# killed by pid and the data directory is removed. The server also dies with
# this shell (PR_SET_PDEATHSIG through setpriv) if the shell is killed.
ZKF_PIDS=()
zkf_cleanup() {
  local p
  for p in "${ZKF_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${ZKF_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "${ZKF_PID:-}" ] && { kill -KILL "$ZKF_PID" 2>/dev/null || true; wait "$ZKF_PID" 2>/dev/null || true; }
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

zkf__spawn() {
  setpriv --pdeathsig KILL java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.ZooKeeperServerMain "$ZKF_DIR/zoo.cfg" >>"$ZKF_DIR/zookeeper.log" 2>&1 </dev/null &
  ZKF_PID=$!
  local i
  for i in $(seq 1 600); do
    if [ "$(echo ruok | timeout 2 nc -q1 127.0.0.1 "$ZKF_PORT" 2>/dev/null)" = imok ]; then return 0; fi
    kill -0 "$ZKF_PID" 2>/dev/null || { echo "zkfixture: server exited, see $ZKF_DIR/zookeeper.log" >&2; return 1; }
    sleep 0.05
  done
  echo "zkfixture: server did not start" >&2
  return 1
}

zkf_start() {
  ZKF_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ejob-zk-XXXXXX")
  ZKF_PORT=$(zkf_free_port)
  ZKF_CONNECT="127.0.0.1:$ZKF_PORT"
  mkdir -p "$ZKF_DIR/data"
  cat >"$ZKF_DIR/zoo.cfg" <<CFG
tickTime=${ZKF_TICK_MS:-200}
dataDir=$ZKF_DIR/data
clientPort=$ZKF_PORT
clientPortAddress=127.0.0.1
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
