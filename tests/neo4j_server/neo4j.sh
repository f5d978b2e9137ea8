#!/usr/bin/env bash
# Start / stop the project's Neo4j (Community 2026.08, embedded launcher, Bolt on 127.0.0.1).
# Needs a JDK 21 or later: NEO4J_JAVA_HOME, else JAVA_HOME, else `java` on PATH, else the
# newest JDK under /usr/lib/jvm (this machine kind ships JDK 17 as `java` and a Temurin 25).
#   tests/neo4j_server/neo4j.sh up     build if needed, start in the background, wait until a
#                                      driver logs in (NEO4J_PORT, NEO4J_PASSWORD, NEO4J_HOME_DIR;
#                                      NEO4J_EXTRA_SETTINGS: more neo4j.conf lines, ';'-separated,
#                                      e.g. to measure a server setting without a rebuild;
#                                      NEO4J_HEAP: the JVM's -Xmx, 1g by default, e.g. 3g with
#                                      server.memory.pagecache.size=4g for a million sentences)
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

VERSION="$(sed -n 's:.*<neo4j.version>\(.*\)</neo4j.version>.*:\1:p' "$HERE/pom.xml")"
MIN_JAVA=21

# The feature version of a JDK home's java (25 for 25.0.3), or nothing.
java_feature() {
  [[ -x "$1/bin/java" ]] || return 0
  "$1/bin/java" -XshowSettings:properties -version 2>&1 \
    | sed -n 's/^ *java.specification.version = \([0-9]*\).*/\1/p' | head -1
}

# The first JDK home of at least MIN_JAVA, in the order above; empty when there is none.
find_java_home() {
  local path_home="" candidates=() home v
  if command -v java >/dev/null 2>&1; then path_home="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"; fi
  candidates=("${NEO4J_JAVA_HOME:-}" "${JAVA_HOME:-}" "$path_home")
  while IFS= read -r home; do candidates+=("$home"); done < <(ls -d /usr/lib/jvm/*/ 2>/dev/null | sed 's:/$::' | sort -rV)
  for home in "${candidates[@]}"; do
    [[ -n "$home" ]] || continue
    v="$(java_feature "$home")"
    if [[ -n "$v" ]] && (( v >= MIN_JAVA )); then echo "$home"; return 0; fi
  done
}

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
    echo "building the Neo4j $VERSION launcher (mvn -q package; jars cached in ~/.m2)"
    # copy-dependencies only adds jars: another release's left in target/lib would share the classpath
    rm -rf "$HERE/target/lib"
    (cd "$HERE" && JAVA_HOME="$1" mvn -q -B package -DskipTests)
    touch "$HERE/target/lib"
  fi
  # graphroute's own procedures (graphroute.push), built from neo4j-procedures/ into the
  # server's plugins directory
  local procs="$ROOT/neo4j-procedures" jar="$NEO4J_HOME_DIR/plugins/graphroute-neo4j-procedures.jar"
  if [[ ! -f "$jar" || "$procs/pom.xml" -nt "$jar" || -n "$(find "$procs/src" -newer "$jar" -type f 2>/dev/null)" ]]; then
    echo "building graphroute's Neo4j procedures (mvn -q package in neo4j-procedures/)"
    (cd "$procs" && JAVA_HOME="$1" mvn -q -B package -DskipTests)
    mkdir -p "$NEO4J_HOME_DIR/plugins"
    cp "$procs/target/graphroute-neo4j-procedures.jar" "$jar"
  fi
}

# A data directory written by another Neo4j release is test data: start it afresh rather
# than have the server refuse (or migrate) it.
fresh_data_for_version() {
  local mark="$NEO4J_HOME_DIR/neo4j-version"
  if [[ -d "$NEO4J_HOME_DIR/data" && "$(cat "$mark" 2>/dev/null)" != "$VERSION" ]]; then
    echo "removing $NEO4J_HOME_DIR/data (written by Neo4j $(cat "$mark" 2>/dev/null || echo 'of an unknown release'), not $VERSION)"
    rm -rf "$NEO4J_HOME_DIR/data" "$NEO4J_HOME_DIR/logs"
  fi
  echo "$VERSION" >"$mark"
}

up() {
  local t0; t0=$(date +%s.%N)
  if running && can_login 2>/dev/null; then echo "neo4j already running (pid $(cat "$PIDFILE"))"; return 0; fi
  # A server started from another checkout already answers with our credentials: use it.
  if ! running && can_login 2>/dev/null; then echo "neo4j already answering on bolt://127.0.0.1:$NEO4J_PORT"; return 0; fi
  local jhome; jhome="$(find_java_home)"
  if [[ -z "$jhome" ]]; then
    echo "Neo4j $VERSION needs a JDK $MIN_JAVA or later; none among NEO4J_JAVA_HOME, JAVA_HOME," \
      "java on PATH and /usr/lib/jvm/*. Install one, or point NEO4J_JAVA_HOME at it." >&2
    exit 1
  fi
  build "$jhome"
  mkdir -p "$NEO4J_HOME_DIR"
  rm -f "$NEO4J_HOME_DIR/ready"
  fresh_data_for_version
  # jdk.incubator.vector: Lucene's SIMD distances for the vector indexes (HNSW inserts and
  # searches); without it Lucene falls back to scalar code and logs a warning.
  nohup "$jhome/bin/java" --add-modules jdk.incubator.vector -Xms256m -Xmx"${NEO4J_HEAP:-1g}" -XX:+UseSerialGC \
    -cp "$HERE/target/classes:$HERE/target/lib/*" graphroute.Neo4jDevServer >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  local deadline=$(( $(date +%s) + TIMEOUT ))
  until [[ -f "$NEO4J_HOME_DIR/ready" ]] && can_login 2>/dev/null; do
    if ! running; then echo "neo4j exited during start-up; log: $LOG" >&2; tail -30 "$LOG" >&2; exit 1; fi
    if (( $(date +%s) > deadline )); then echo "neo4j not ready after ${TIMEOUT}s; log: $LOG" >&2; exit 1; fi
    sleep 0.5
  done
  printf 'neo4j %s up on bolt://127.0.0.1:%s (pid %s, %s) in %.1f s\n' "$VERSION" "$NEO4J_PORT" "$(cat "$PIDFILE")" "$jhome" \
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
