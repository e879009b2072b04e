#!/usr/bin/env bash
# tetra generate on the tiny served model: greedy output is reproducible and equal streamed or
# not, a seed fixes sampled output, chat turns come back as an assistant message, and bad flags
# are usage errors (exit 2).
# usage: generate_test.sh TETRA MODEL_DIR
set -euo pipefail
tetra=$1 model=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

a=$("$tetra" generate --model "$model" --prompt "the answer is" --max-tokens 12 --temperature 0)
b=$("$tetra" generate --model "$model" --prompt "the answer is" --max-tokens 12 --temperature 0 --stream)
[ "$a" = "$b" ] || fail "greedy output differs streamed: '$a' vs '$b'"
[ -n "$a" ] || fail "no output"
s1=$("$tetra" generate --model "$model" --prompt "the answer is" --max-tokens 12 --seed 7 --temperature 1)
s2=$("$tetra" generate --model "$model" --prompt "the answer is" --max-tokens 12 --seed 7 --temperature 1)
[ "$s1" = "$s2" ] || fail "same seed, different output"

echo '[{"role": "user", "content": "Hello"}]' >"$work/messages.json"
"$tetra" generate --model "$model" --messages "$work/messages.json" --max-tokens 6 --temperature 0 --thinking >"$work/turn.json"
python3 -c "import json,sys; d=json.load(open('$work/turn.json')); assert d['role'] == 'assistant' and 'reasoning_content' in d, d"

rc=0
"$tetra" generate --model "$model" --prompt x --temperature hot 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q temperature "$work/err" || fail "bad --temperature: exit $rc, $(cat "$work/err")"
rc=0
"$tetra" generate --model "$model" --prompt x --max-tokens 0 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q max_tokens "$work/err" || fail "--max-tokens 0: exit $rc, $(cat "$work/err")"
rc=0
"$tetra" generate --model "$work/none" --prompt x 2>"$work/err" || rc=$?
[ "$rc" = 3 ] && grep -q "$work/none" "$work/err" || fail "missing model dir: exit $rc, $(cat "$work/err")"
echo "generate CLI test: all checks passed"
