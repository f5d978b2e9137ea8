#!/usr/bin/env bash
# Start / stop the project's Neo4j (Community 5.26 LTS, embedded launcher, Bolt on 127.0.0.1).
#   tests/neo4j_server/neo4j.sh up     build if needed, start in the background, wait until a
#                                      driver logs in (NEO4J_PORT, NEO4J_PASSWORD, NEO4J_HOME_DIR)
#   tests/neo4j_server/neo4j.sh down   stop it (SIGTERM, clean shutdown)
#   tests/neo4j_server/neo4j.sh status
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export NEO4J_PORT="${NEO4J_PORT:-7687}"
export NEO4J_PASSWORD="${NEO4J_PASSWORD:-graphroute-dev}"
export NEO4J_HOME_DIR="${NEO4J_HOME_DIR:-$HERE/run}"
PIDFILE="$NEO4J_HOME_DIR/pid"
LOG="$NEO4J_HOME_DIR/server.log"
PY="${PY:-$ROOT/.venv/bin/python}"
TIMEOUT="${NEO4J_START_TIMEOUT:-180}"

running() { [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

can_login() {
  "$PY" - <<'PY'
import os, sys
from neo4j import GraphDatabase
uri = f"bolt://127.0.0.1:{os.environ['NEO4J_PORT']}"
try:
    with GraphDatabase.driver(uri, auth=("neo4j", os.environ["NEO4J_PASSWORD"]), connection_timeout=3) as d:
        d.verify_connectivity()
except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
    print(f"not ready: {type(exc).__name__}", file=sys.stderr)
    sys.exit(1)
PY
}

build() {
  if [[ ! -d "$HERE/target/lib" || "$HERE/pom.xml" -nt "$HERE/target/lib" \
        || -n "$(find "$HERE/src" -newer "$HERE/target/lib" -type f 2>/dev/null)" ]]; then
    echo "building the Neo4j launcher (mvn -q package; jars cached in ~/.m2)"
    (cd "$HERE" && mvn -q -B package -DskipTests)
    touch "$HERE/target/lib"
  fi
}

up() {
  local t0; t0=$(date +%s.%N)
  if running && can_login 2>/dev/null; then echo "neo4j already running (pid $(cat "$PIDFILE"))"; return 0; fi
  # A server started from another checkout already answers with our credentials: use it.
  if ! running && can_login 2>/dev/null; then echo "neo4j already answering on bolt://127.0.0.1:$NEO4J_PORT"; return 0; fi
  build
  mkdir -p "$NEO4J_HOME_DIR"
  rm -f "$NEO4J_HOME_DIR/ready"
  nohup java -Xms256m -Xmx1g -XX:+UseSerialGC -cp "$HERE/target/classes:$HERE/target/lib/*" \
    graphroute.Neo4jDevServer >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  local deadline=$(( $(date +%s) + TIMEOUT ))
  until [[ -f "$NEO4J_HOME_DIR/ready" ]] && can_login 2>/dev/null; do
    if ! running; then echo "neo4j exited during start-up; log: $LOG" >&2; tail -30 "$LOG" >&2; exit 1; fi
    if (( $(date +%s) > deadline )); then echo "neo4j not ready after ${TIMEOUT}s; log: $LOG" >&2; exit 1; fi
    sleep 0.5
  done
  printf 'neo4j up on bolt://127.0.0.1:%s (pid %s) in %.1f s\n' "$NEO4J_PORT" "$(cat "$PIDFILE")" \
    "$(echo "$(date +%s.%N) - $t0" | bc)"
}

down() {
  if ! running; then echo "neo4j not running"; rm -f "$PIDFILE"; return 0; fi
  local pid; pid=$(cat "$PIDFILE")
  kill -TERM "$pid"
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then echo "neo4j (pid $pid) did not stop; sending SIGKILL" >&2; kill -KILL "$pid"; fi
  rm -f "$PIDFILE" "$NEO4J_HOME_DIR/ready"
  echo "neo4j stopped"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) if running; then echo "running (pid $(cat "$PIDFILE"))"; else echo "stopped"; fi ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
