#!/usr/bin/env bash
# tetra generate on the tiny served model: greedy output is reproducible and equal streamed or
# not and with speculation, a seed fixes sampled output (speculating or not, with the experts
# split over ranks or not), chat turns come
# back as an assistant message, and bad flags are usage errors (exit 2).
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
for method in mtp ngram; do
  c=$("$tetra" generate --model "$model" --prompt "the answer is" --max-tokens 12 --temperature 0 --speculative $method)
  [ "$a" = "$c" ] || fail "greedy output differs with --speculative $method: '$a' vs '$c'"
  s3=$("$tetra" generate --model "$model" --prompt "the answer is" --max-tokens 12 --seed 7 --temperature 1 --speculative $method)
  [ "$s1" = "$s3" ] || fail "seeded output differs with --speculative $method: '$s1' vs '$s3'"
done
for ranks in 2 3; do
  c=$("$tetra" generate --model "$model" --prompt "the answer is" --max-tokens 12 --temperature 0 --expert-parallel $ranks)
  [ "$a" = "$c" ] || fail "greedy output differs with --expert-parallel $ranks: '$a' vs '$c'"
  for method in mtp ngram; do
    s3=$("$tetra" generate --model "$model" --prompt "the answer is" --max-tokens 12 --seed 7 --temperature 1 \
      --expert-parallel $ranks --speculative $method)
    [ "$s1" = "$s3" ] || fail "seeded output differs with --expert-parallel $ranks --speculative $method: '$s1' vs '$s3'"
  done
done

echo '[{"role": "user", "content": "Hello"}]' >"$work/messages.json"
"$tetra" generate --model "$model" --messages "$work/messages.json" --max-tokens 6 --temperature 0 --thinking >"$work/turn.json"
python3 -c "import json,sys; d=json.load(open('$work/turn.json')); assert d['role'] == 'assistant' and 'reasoning_content' in d, d"

rc=0
"$tetra" generate --model "$model" --prompt x --temperature hot 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q temperature "$work/err" || fail "bad --temperature: exit $rc, $(cat "$work/err")"
rc=0
"$tetra" generate --model "$model" --prompt x --expert-parallel 1000 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q "expert-parallel" "$work/err" || fail "--expert-parallel 1000: exit $rc, $(cat "$work/err")"
rc=0
"$tetra" generate --model "$model" --prompt x --max-tokens 0 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q max_tokens "$work/err" || fail "--max-tokens 0: exit $rc, $(cat "$work/err")"
rc=0
"$tetra" generate --model "$work/none" --prompt x --speculative eagle 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q "speculative must be off, mtp or ngram" "$work/err" || fail "--speculative eagle: exit $rc, $(cat "$work/err")"
mkdir "$work/no_mtp"
for f in "$model"/*; do ln -s "$(realpath "$f")" "$work/no_mtp/"; done
python3 - "$model" "$work/no_mtp" <<'PY'
import json, struct, sys
# the served model without its MTP block: the header's mtp.* entries dropped, the data kept
src, dst = sys.argv[1], sys.argv[2]
import os, glob
for path in glob.glob(os.path.join(src, "*.safetensors")):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    kept = {k: v for k, v in header.items() if not k.startswith("mtp.")}
    body = json.dumps(kept).encode()
    body += b" " * (-len(body) % 8)
    out = os.path.join(dst, os.path.basename(path))
    os.remove(out)
    open(out, "wb").write(struct.pack("<Q", len(body)) + body + raw[8 + n:])
PY
rc=0
"$tetra" generate --model "$work/no_mtp" --prompt x --speculative mtp 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q "MTP block" "$work/err" || fail "--speculative mtp without MTP weights: exit $rc, $(cat "$work/err")"
"$tetra" generate --model "$work/no_mtp" --prompt x --max-tokens 3 --speculative ngram >/dev/null || fail "--speculative ngram without MTP weights"
rc=0
"$tetra" generate --model "$work/none" --prompt x 2>"$work/err" || rc=$?
[ "$rc" = 3 ] && grep -q "$work/none" "$work/err" || fail "missing model dir: exit $rc, $(cat "$work/err")"
echo "generate CLI test: all checks passed"
