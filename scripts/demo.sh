#!/usr/bin/env bash
# Builds tetra, serves the bundled demo model, sends one chat request with curl, prints the
# answer and stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."
model=models/demo/nvfp4
if [ ! -d "$model" ]; then
  echo "demo: the demo model directory $model is missing (it comes with the demo-model branch)" >&2
  exit 1
fi
./scripts/build.sh
. tests/server/start_server.sh
SERVER_START_SECONDS=600 start_server build/src/tetra "$model" --served-model-name demo
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
until curl -sf "$BASE/health" >/dev/null; do sleep 0.2; done
request='{"model": "demo", "messages": [{"role": "user", "content": "Tell me a short story."}], "max_tokens": 64, "temperature": 0}'
echo "POST $BASE/v1/chat/completions $request"
answer=$(curl -s "$BASE/v1/chat/completions" -H 'Content-Type: application/json' -d "$request")
echo "$answer"
python3 -c 'import json, sys; print("\nanswer: " + json.loads(sys.argv[1])["choices"][0]["message"]["content"])' "$answer"
stop_server
