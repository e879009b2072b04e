# Sourced by the server tests and scripts: start_server TETRA MODEL [serve options...] starts
# `tetra serve` on a free port (--port 0) and sets SERVER_PID and BASE once it listens (waiting
# up to SERVER_START_SECONDS, default 60, for the model to load); stop_server ends it with
# SIGTERM and checks that it exits cleanly. TETRA_SERVE_ARGS adds options to every server the
# tests start (the GPU machine runs them with --device cuda).
start_server() {
  local tetra=$1 model=$2
  shift 2
  SERVER_LOG=$(mktemp)
  "$tetra" serve --model "$model" --port 0 "$@" ${TETRA_SERVE_ARGS:-} >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  local tries=$((${SERVER_START_SECONDS:-60} * 10))
  for _ in $(seq 1 "$tries"); do
    local port
    port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$SERVER_LOG")
    if [ -n "$port" ]; then
      BASE="http://127.0.0.1:$port"
      return 0
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$SERVER_LOG"; echo "server exited before listening" >&2; return 1; }
    sleep 0.1
  done
  echo "server did not start listening in ${SERVER_START_SECONDS:-60} s" >&2
  return 1
}

stop_server() {
  kill -TERM "$SERVER_PID"
  local rc=0
  wait "$SERVER_PID" || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$SERVER_LOG"
    echo "server exited with $rc after SIGTERM" >&2
    return 1
  fi
}
