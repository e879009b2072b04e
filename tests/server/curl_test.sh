#!/usr/bin/env bash
# The server over loopback with curl: answers, streams, n choices, auth, every malformed request
# class with its status and the parameter named, the body limit, metrics, speculation, and a
# clean SIGTERM.
# usage: curl_test.sh TETRA MODEL_DIR
set -euo pipefail
tetra=$1 model=$2
. "$(dirname "$0")/start_server.sh"
work=$(mktemp -d)
trap 'kill $SERVER_PID 2>/dev/null || true; rm -rf "$work"' EXIT
start_server "$tetra" "$model" --api-key sekret --served-model-name tiny --max-body-bytes 65536

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# call NAME METHOD PATH [BODY-FILE] [KEY]: writes $work/NAME.json, prints the HTTP status.
call() {
  local name=$1 method=$2 path=$3 body=${4:-} key=${5-sekret}
  local args=(-s -o "$work/$name.json" -w '%{http_code}' -X "$method" "$BASE$path")
  [ -n "$key" ] && args+=(-H "Authorization: Bearer $key")
  [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "@$body")
  curl "${args[@]}"
}
# json NAME EXPR: a Python expression over the answer `d`.
json() { python3 -c "import json,sys; d=json.load(open('$work/$1.json')); print($2)"; }
body() { printf '%s' "$2" >"$work/$1.req"; echo "$work/$1.req"; }

expect_status() {  # NAME WANT GOT
  [ "$3" = "$2" ] || fail "$1: status $3, want $2: $(cat "$work/$1.json" 2>/dev/null | head -c 300)"
}
# expect_error NAME STATUS PARAM BODY-TEXT: a 4xx whose error names PARAM (or mentions it).
expect_error() {
  local name=$1 want=$2 param=$3
  local got
  got=$(call "$name" POST /v1/chat/completions "$(body "$name" "$4")")
  expect_status "$name" "$want" "$got"
  local p m
  p=$(json "$name" "d['error']['param']") || { fail "$name: no OpenAI error body"; return; }
  m=$(json "$name" "d['error']['message']")
  [ "$p" = "$param" ] || [[ "$m" == *"$param"* ]] || fail "$name: error '$m' (param $p) does not name $param"
}

# --- health, models, auth
[ "$(call health GET /health "" "")" = 200 ] || fail "health"
expect_status models_nokey 401 "$(call models_nokey GET /v1/models "" "")"
expect_status models_wrongkey 401 "$(call models_wrongkey GET /v1/models "" wrong)"
[ "$(json models_wrongkey "d['error']['code']")" = invalid_api_key ] || fail "401 body"
expect_status models 200 "$(call models GET /v1/models)"
[ "$(json models "d['data'][0]['id']")" = tiny ] || fail "models id"

# --- a chat answer and a completion from token ids
got=$(call chat POST /v1/chat/completions "$(body chat '{"model":"tiny","messages":[{"role":"user","content":"Hello there"}],"max_tokens":8,"temperature":0}')")
expect_status chat 200 "$got"
[ "$(json chat "d['object']")" = chat.completion ] || fail "chat object"
[ "$(json chat "d['choices'][0]['message']['role']")" = assistant ] || fail "chat role"
[ "$(json chat "d['usage']['total_tokens'] == d['usage']['prompt_tokens'] + d['usage']['completion_tokens'] and d['usage']['prompt_tokens'] > 3")" = True ] || fail "chat usage"
[ "$(json chat "d['choices'][0]['finish_reason'] in ('stop', 'length')")" = True ] || fail "chat finish_reason"
# OpenAI's content parts (text) and an explicit text response_format are a chat request like any other.
got=$(call parts POST /v1/chat/completions "$(body parts '{"messages":[{"role":"user","content":[{"type":"text","text":"Hello"},{"type":"text","text":" there"}]}],"max_tokens":3,"response_format":{"type":"text"}}')")
expect_status parts 200 "$got"
got=$(call cmpl POST /v1/completions "$(body cmpl '{"prompt":[10,20,30,40],"max_tokens":5,"temperature":0}')")
expect_status cmpl 200 "$got"
[ "$(json cmpl "d['usage']['prompt_tokens']")" = 4 ] || fail "token-id prompt usage"

# --- a stream ends with usage and [DONE]
curl -sN -H "Authorization: Bearer sekret" -H 'Content-Type: application/json' "$BASE/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' \
  >"$work/stream.txt"
[ "$(tail -n 2 "$work/stream.txt" | head -n 1)" = "data: [DONE]" ] || fail "stream does not end with [DONE]"
grep -q '"usage":{"prompt_tokens"' "$work/stream.txt" || fail "stream has no usage chunk"
grep -q '"finish_reason":"\(stop\|length\)"' "$work/stream.txt" || fail "stream has no finish_reason"

# --- malformed requests: the right 4xx, the parameter named
expect_error bad_json 400 JSON '{"messages": ['
expect_error wrong_type 400 temperature '{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}'
expect_error wrong_type_messages 400 messages '{"messages":"hello"}'
expect_error missing_messages 400 messages '{"max_tokens":3}'
expect_error bad_role 400 messages '{"messages":[{"role":"wizard","content":"x"}]}'
expect_error negative_max 400 max_tokens '{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}'
expect_error huge_max 400 max_tokens '{"messages":[{"role":"user","content":"x"}],"max_tokens":100000000000}'
expect_error float_max 400 max_tokens '{"messages":[{"role":"user","content":"x"}],"max_tokens":2.5}'
expect_error top_logprobs 400 top_logprobs '{"messages":[{"role":"user","content":"x"}],"top_logprobs":3}'
expect_error bias 400 logit_bias '{"messages":[{"role":"user","content":"x"}],"logit_bias":{"999999":1}}'
expect_error stop_type 400 stop '{"messages":[{"role":"user","content":"x"}],"stop":[1]}'
# Request fields the chat encoder reads, of the wrong type: 400 naming messages, not a 500.
expect_error wo_eos_type 400 messages '{"messages":[{"role":"assistant","content":"a","wo_eos":"x"},{"role":"user","content":"b"}]}'
expect_error tool_calls_type 400 messages '{"messages":[{"role":"assistant","content":"","tool_calls":{"function":{"name":"f"}}},{"role":"user","content":"b"}]}'
expect_error tool_name_type 400 messages '{"messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":5}}]},{"role":"user","content":"b"}]}'
# A number JSON cannot hold is invalid JSON (400), and deep nesting is refused before it
# overflows a thread's stack (30,000 levels took the ASan build down, 100,000 a release build).
expect_error number_overflow 400 JSON '{"messages":[{"role":"user","content":"x"}],"temperature":1e400}'
deep=$(python3 -c "print('[' * 30000 + ']' * 30000)")
expect_error deep_nesting 400 JSON "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":$deep}"
# Asked for and not done is refused, not ignored; max_tokens is checked beside max_completion_tokens.
expect_error response_format 400 response_format '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{}}}}'
expect_error json_thinking 400 response_format '{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high","response_format":{"type":"json_object"}}'
expect_error response_format_type 400 response_format '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":5}}'
expect_error best_of 400 best_of '{"messages":[{"role":"user","content":"x"}],"best_of":2}'
expect_error max_tokens_beside 400 max_tokens '{"messages":[{"role":"user","content":"x"}],"max_tokens":-5,"max_completion_tokens":3}'
expect_error tool_type 400 'tools[0]' '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":5,"function":{"name":"f"}}]}'
expect_error image_part 400 messages '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
expect_error unknown_model 404 model '{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}'
[ "$(json unknown_model "d['error']['code']")" = model_not_found ] || fail "404 code"
long=$(python3 -c "print('a ' * 6000)")
expect_error too_long 400 messages "{\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}]}"
printf '{"messages":[{"role":"user","content":"bad \xff\xfe utf8"}]}' >"$work/utf8.req"
got=$(call utf8 POST /v1/chat/completions "$work/utf8.req")
expect_status utf8 400 "$got"
json utf8 "d['error']['message']" | grep -qi "utf-8" || fail "invalid UTF-8 message does not say UTF-8"
python3 -c "print('{\"messages\":[{\"role\":\"user\",\"content\":\"' + 'x' * 70000 + '\"}]}')" >"$work/big.req"
expect_status big 413 "$(call big POST /v1/chat/completions "$work/big.req")"
json big "d['error']['message']" | grep -q "65536" || fail "413 message does not give the limit"
# A chunked body has no Content-Length to hold to the limit: the server counts it as it reads.
got=$(curl -s -o "$work/big_chunked.json" -w '%{http_code}' -H "Authorization: Bearer sekret" -H 'Content-Type: application/json' \
  -H 'Transfer-Encoding: chunked' --data-binary "@$work/big.req" "$BASE/v1/chat/completions")
expect_status big_chunked 413 "$got"
json big_chunked "d['error']['message']" | grep -q "65536" || fail "chunked 413 message does not give the limit"
got=$(curl -s -o "$work/multipart.json" -w '%{http_code}' -H "Authorization: Bearer sekret" -F 'messages=x' "$BASE/v1/chat/completions")
expect_status multipart 400 "$got"
expect_status cmpl_bad_ids 400 "$(call cmpl_bad_ids POST /v1/completions "$(body cmpl_bad_ids '{"prompt":[1,2,99999]}')")"
expect_status nokey_post 401 "$(call nokey_post POST /v1/chat/completions "$(body nokey_post '{"messages":[{"role":"user","content":"x"}]}')" "")"
expect_status no_route 404 "$(call no_route GET /v1/nothing)"

# --- still serving after all that; metrics saw it
expect_status after 200 "$(call after POST /v1/chat/completions "$work/chat.req")"
curl -s "$BASE/metrics" >"$work/metrics.txt"
for m in 'tetra_requests_total{endpoint="/v1/chat/completions",status="400"}' tetra_prompt_tokens_total \
         tetra_generation_tokens_total tetra_time_to_first_token_seconds_bucket tetra_inter_token_latency_seconds_count \
         tetra_requests_running tetra_requests_queued tetra_cache_blocks_in_use; do
  grep -qF "$m" "$work/metrics.txt" || fail "metrics lack $m"
done
grep -q '^tetra_cache_blocks_in_use 0$' "$work/metrics.txt" || fail "blocks still in use when idle"
greedy='{"prompt":"the answer is","max_tokens":16,"temperature":0}'
expect_status greedy 200 "$(call greedy POST /v1/completions "$(body greedy "$greedy")")"

# --- n choices: choice i of a seeded request is the one-choice answer with seed + i; usage adds
# the choices' tokens; a stream carries every index and finishes each
expect_status n3 200 "$(call n3 POST /v1/completions "$(body n3 '{"prompt":"the answer is","max_tokens":6,"temperature":1,"seed":40,"n":3}')")"
[ "$(json n3 "[c['index'] for c in d['choices']]")" = "[0, 1, 2]" ] || fail "n=3: choice indices $(json n3 "d['choices']")"
tokens=0
for i in 0 1 2; do
  expect_status "one$i" 200 "$(call "one$i" POST /v1/completions "$(body "one$i" "{\"prompt\":\"the answer is\",\"max_tokens\":6,\"temperature\":1,\"seed\":$((40 + i))}")")"
  python3 -c "import json,sys; sys.exit(json.load(open('$work/one$i.json'))['choices'][0]['text'] != json.load(open('$work/n3.json'))['choices'][$i]['text'])" ||
    fail "n=3: choice $i is not the answer with seed $((40 + i)) alone"
  tokens=$((tokens + $(json "one$i" "d['usage']['completion_tokens']")))
done
[ "$(json n3 "d['usage']['completion_tokens']")" = "$tokens" ] || fail "n=3: usage $(json n3 "d['usage']"), want $tokens tokens"
curl -sN "$BASE/v1/chat/completions" -H 'Authorization: Bearer sekret' -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"n":2,"stream":true,"stream_options":{"include_usage":true}}' \
  >"$work/n2.sse"
python3 - "$work/n2.sse" <<'PY' || fail "n=2 stream: $(head -c 600 "$work/n2.sse")"
import json, sys
events = [l[6:] for l in open(sys.argv[1]).read().splitlines() if l.startswith("data: ")]
assert events[-1] == "[DONE]", events[-1]
chunks = [json.loads(e) for e in events[:-1]]
choices = [c for chunk in chunks for c in chunk["choices"]]
assert sorted({c["index"] for c in choices}) == [0, 1], choices
assert sorted(c["index"] for c in choices if c["finish_reason"]) == [0, 1], choices
assert chunks[-1]["usage"]["completion_tokens"] > 0 and not chunks[-1]["choices"], chunks[-1]
PY
expect_status n17 400 "$(call n17 POST /v1/completions "$(body n17 '{"prompt":"x","n":17}')")"
[ "$(json n17 "d['error']['param']")" = n ] || fail "n=17: param not n"
expect_status best_of 400 "$(call best_of POST /v1/completions "$(body best_of '{"prompt":"x","n":2,"best_of":3}')")"

# --- JSON mode: an object, and the sequence stops where it closes; cut a token short by
# max_tokens, the text is the start of that object. Bias toward '"' (34) and '}' (125) lets the
# tiny random model close its strings and objects within the budget.
for seed in 1 2 3 4; do
  req="\"prompt\":\"the answer is\",\"response_format\":{\"type\":\"json_object\"},\"temperature\":1,\"seed\":$seed,\"logit_bias\":{\"34\":4,\"125\":1}"
  expect_status "json$seed" 200 "$(call "json$seed" POST /v1/completions "$(body "json$seed" "{$req,\"max_tokens\":300}")")"
  cut=$(($(json "json$seed" "d['usage']['completion_tokens']") - 1))
  expect_status "json_cut$seed" 200 "$(call "json_cut$seed" POST /v1/completions "$(body "json_cut$seed" "{$req,\"max_tokens\":$cut}")")"
  python3 - "$work/json$seed.json" "$work/json_cut$seed.json" <<'PY' || fail "json_object, seed $seed: $(head -c 600 "$work/json$seed.json")"
import json, sys
whole, cut = (json.load(open(f))["choices"][0] for f in sys.argv[1:])
assert whole["finish_reason"] == "stop", whole
assert isinstance(json.loads(whole["text"]), dict), whole["text"]
assert cut["finish_reason"] == "length" and whole["text"].startswith(cut["text"]) and cut["text"] != whole["text"], (cut, whole)
PY
done
chat_json='{"messages":[{"role":"user","content":"Answer in JSON"}],"response_format":{"type":"json_object"},"temperature":1,"seed":5,"max_tokens":300,"logit_bias":{"34":4,"125":1}'
expect_status json_chat 200 "$(call json_chat POST /v1/chat/completions "$(body json_chat "$chat_json}")")"
curl -sN "$BASE/v1/chat/completions" -H 'Authorization: Bearer sekret' -H 'Content-Type: application/json' \
  -d "$chat_json,\"stream\":true}" >"$work/json_chat.sse"
python3 - "$work/json_chat.json" "$work/json_chat.sse" <<'PY' || fail "json_object chat: $(head -c 600 "$work/json_chat.json")"
import json, sys
whole = json.load(open(sys.argv[1]))["choices"][0]
assert whole["finish_reason"] == "stop", whole
assert isinstance(json.loads(whole["message"]["content"]), dict), whole
events = [json.loads(l[6:]) for l in open(sys.argv[2]).read().splitlines() if l.startswith("data: {")]
streamed = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
assert streamed == whole["message"]["content"], (streamed, whole)
assert [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]] == ["stop"], events[-2:]
PY

grep -Eq "cache pool of [0-9]+ blocks \([0-9.]+ GiB on [a-z]+\): [0-9]+ sequences of [0-9]+ tokens" "$SERVER_LOG" ||
  fail "no cache capacity line at start-up: $(head -3 "$SERVER_LOG")"
stop_server || fail "clean shutdown"

# --- speculation by the MTP block: the same answer, and its drafts counted
start_server "$tetra" "$model" --speculative mtp
expect_status greedy_mtp 200 "$(call greedy_mtp POST /v1/completions "$(body greedy_mtp "$greedy")" "")"
[ "$(json greedy_mtp "d['choices'][0]['text']")" = "$(json greedy "d['choices'][0]['text']")" ] ||
  fail "--speculative mtp changed a greedy answer: $(json greedy_mtp "d['choices'][0]['text']")"
curl -s "$BASE/metrics" >"$work/metrics_mtp.txt"
awk '/^tetra_speculative_draft_tokens_total / {exit !($2 > 0)}' "$work/metrics_mtp.txt" ||
  fail "no drafts counted: $(grep speculative "$work/metrics_mtp.txt")"
grep -q '^tetra_speculative_accepted_tokens_total ' "$work/metrics_mtp.txt" || fail "metrics lack the accepted drafts"
stop_server || fail "clean shutdown of the speculating server"

# --- a bad cache memory fraction is a usage error naming the option
for f in 0 1.5 half; do
  rc=0
  "$tetra" serve --model "$model" --port 0 --cache-memory-fraction "$f" >"$work/fraction.txt" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -q -- "--cache-memory-fraction" "$work/fraction.txt" ||
    fail "--cache-memory-fraction $f: exit $rc, $(cat "$work/fraction.txt")"
done

# --- a small server: a bounded queue answers 429, a request larger than the cache pool 400,
# and clients that hang up mid-stream free their sequences and blocks.
# 50 blocks: room for one 3,000-token sequence of the tiny model (47 blocks), not for 4,000 (59).
start_server "$tetra" "$model" --max-running 1 --max-queued 1 --cache-blocks 50
eos=$("$tetra" tokenize --tokenizer "$model/tokenizer.json" --special --text '<｜end▁of▁sentence｜>' | tr -d '[]')
endless="{\"prompt\":\"go\",\"max_tokens\":3000,\"temperature\":1,\"stream\":true,\"logit_bias\":{\"$eos\":-100}}"
curl -sN "$BASE/v1/completions" -H 'Content-Type: application/json' -d "$endless" >/dev/null &
first=$!
sleep 0.3
curl -sN "$BASE/v1/completions" -H 'Content-Type: application/json' -d "$endless" >/dev/null &
second=$!
sleep 0.3
expect_status busy 429 "$(call busy POST /v1/completions "$(body busy '{"prompt":"x","max_tokens":5}')" "")"
[ "$(json busy "d['error']['type']")" = rate_limit_error ] || fail "429 body"
expect_status pool 400 "$(call pool POST /v1/completions "$(body pool '{"prompt":"x","max_tokens":4000}')" "")"
# three choices cannot all be admitted (one queued at most): 429, and none of them is left behind
expect_status busy_n 429 "$(call busy_n POST /v1/completions "$(body busy_n '{"prompt":"x","max_tokens":5,"n":3}')" "")"
json pool "d['error']['param']" | grep -q max_tokens || fail "too large for the pool: param not max_tokens"
kill "$first" "$second"
wait "$first" "$second" 2>/dev/null || true
# idle_within FILE: nothing running, queued or cached within 5 s (metrics left in FILE).
idle_within() {
  for _ in $(seq 1 50); do
    curl -s "$BASE/metrics" >"$1"
    if grep -q '^tetra_requests_running 0$' "$1" && grep -q '^tetra_requests_queued 0$' "$1" &&
       grep -q '^tetra_cache_blocks_in_use 0$' "$1"; then return 0; fi
    sleep 0.1
  done
  return 1
}
generated() { awk '/^tetra_generation_tokens_total / {print int($2)}' "$1"; }
idle_within "$work/metrics2.txt" || fail "disconnected clients left work behind: $(grep -E '^tetra_(requests|cache)' "$work/metrics2.txt")"
gen=$(generated "$work/metrics2.txt")
[ "$gen" -lt 3000 ] || fail "disconnected streams ran to the end ($gen tokens)"
# A whole (non-streamed) answer's client that hangs up cancels it too.
curl -s "$BASE/v1/completions" -H 'Content-Type: application/json' -d "${endless/\"stream\":true/\"stream\":false}" >/dev/null &
whole=$!
sleep 0.5
curl -s "$BASE/metrics" | grep -q '^tetra_requests_running 1$' || fail "the whole answer was not running when its client left"
kill "$whole"
wait "$whole" 2>/dev/null || true
idle_within "$work/metrics3.txt" || fail "a whole answer's client left and its sequence ran on: $(grep -E '^tetra_(requests|cache)' "$work/metrics3.txt")"
[ $(($(generated "$work/metrics3.txt") - gen)) -lt 3000 ] || fail "a whole answer ran to the end for a client that left"
stop_server || fail "clean shutdown of the small server"
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "server curl test: all checks passed"
