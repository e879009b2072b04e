#!/usr/bin/env bash
# The text commands of the CLI contract: outputs and exit codes.
# Usage: cli_test.sh TETRA DEEPSEEK_TOKENIZER_JSON CHAT_CASES_JSON
set -uo pipefail
tetra=$1 tokenizer=$2 cases=$3
failures=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; failures=$((failures + 1)); fi
}

check "tokenize plain" "[19923,818,28217,8277,5487,226,2154,5487,226,85,51015,28217,32,223,30594]" \
  "$("$tetra" tokenize --tokenizer "$tokenizer" --text "Hello <｜begin▁of▁sentence｜> 你好")"
check "tokenize special" "[19923,223,0,223,30594]" \
  "$("$tetra" tokenize --tokenizer "$tokenizer" --special --text "Hello <｜begin▁of▁sentence｜> 你好")"
printf 'a\nb' > "$TMPDIR_CLI/in.txt"
check "tokenize file" "$("$tetra" tokenize --tokenizer "$tokenizer" --text $'a\nb')" \
  "$("$tetra" tokenize --tokenizer "$tokenizer" --file "$TMPDIR_CLI/in.txt")"
check "detokenize" "Hello <｜begin▁of▁sentence｜> 你好" "$("$tetra" detokenize --tokenizer "$tokenizer" --ids '[19923,223,0,223,30594]')"

"$tetra" tokenize --tokenizer "$tokenizer" --text $'\xff' 2>/dev/null; check "invalid utf-8 exit" 2 $?
"$tetra" tokenize --tokenizer "$tokenizer" 2>/dev/null; check "no text exit" 2 $?
"$tetra" tokenize --tokenizer /nonexistent/tokenizer.json --text x 2>/dev/null; check "missing tokenizer exit" 3 $?
"$tetra" detokenize --tokenizer "$tokenizer" --ids '[-1]' 2>/dev/null; check "bad id exit" 2 $?

python3 - "$cases" "$TMPDIR_CLI" <<'PY'
import json, sys
case = json.load(open(sys.argv[1]))["encode"][24]
json.dump({k: case[k] for k in ("messages", "thinking_mode", "reasoning_effort", "drop_thinking")},
          open(sys.argv[2] + "/request.json", "w"), ensure_ascii=False)
open(sys.argv[2] + "/prompt.txt", "w").write(case["prompt"])
PY
"$tetra" render-chat --request "$TMPDIR_CLI/request.json" > "$TMPDIR_CLI/rendered.txt"
cmp -s "$TMPDIR_CLI/prompt.txt" "$TMPDIR_CLI/rendered.txt"; check "render-chat byte-identical" 0 $?
"$tetra" render-chat --request /nonexistent.json 2>/dev/null; check "render-chat missing file exit" 2 $?

check "parse-completion" '{"role": "assistant", "content": "The answer is 4.", "reasoning_content": "Let me think.", "tool_calls": []}' \
  "$(printf '%s' 'Let me think.</think>The answer is 4.<｜end▁of▁sentence｜>' | "$tetra" parse-completion --thinking-mode thinking)"
check "parse-completion malformed" '{"role": "assistant", "content": "cut off", "reasoning_content": "", "tool_calls": [], "error": "Invalid format: missing EOS token"}' \
  "$(printf 'cut off' | "$tetra" parse-completion --thinking-mode chat)"
printf x | "$tetra" parse-completion --thinking-mode fast 2>/dev/null; check "bad thinking mode exit" 2 $?

echo "$((16 - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
