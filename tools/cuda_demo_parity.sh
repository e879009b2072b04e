#!/usr/bin/env bash
# On the GPU machine, after a CUDA build in build-gpu/: the trained demo model on CUDA against
# the CPU reference on the same held-out tokens (issue 7's end-to-end check): perplexity for
# both quantized layouts and both cache settings, and next-token argmax agreement.
set -euo pipefail
cd "$(dirname "$0")/.."
tetra=${TETRA:-build-gpu/src/tetra}
ids=models/demo/heldout_ids.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -c "import json; ids=json.load(open('$ids')); json.dump([ids[i*512:(i+1)*512] for i in range(4)], open('$work/batch.json','w'))"
printf '%-10s %-8s %12s %12s %10s %10s\n' model caches "ppl cpu" "ppl cuda" "ppl diff" "argmax"
for model in nvfp4 fp8-mxfp4; do
  for caches in "f32 f32" "fp8 fp4"; do
    set -- $caches
    for device in cpu cuda; do
      "$tetra" perplexity --model models/demo/$model --tokens-file $ids --context 512 --chunks 4 \
        --kv-cache-dtype $1 --indexer-cache-dtype $2 --device $device --json > "$work/ppl_$device.json"
      "$tetra" logits --model models/demo/$model --tokens-file "$work/batch.json" --out "$work/logits_$device.f32" \
        --kv-cache-dtype $1 --indexer-cache-dtype $2 --device $device
    done
    python3 - "$work" "$model" "$1/$2" <<'PY'
import json, sys
import numpy as np
work, model, caches = sys.argv[1:]
p = {d: json.load(open(f"{work}/ppl_{d}.json"))["perplexity"] for d in ("cpu", "cuda")}
vocab = json.load(open(f"models/demo/{model}/config.json"))["vocab_size"]
a, b = (np.fromfile(f"{work}/logits_{d}.f32", dtype="<f4").reshape(-1, vocab) for d in ("cpu", "cuda"))
agree = float((a.argmax(1) == b.argmax(1)).mean())
print(f"{model:10s} {caches:8s} {p['cpu']:12.4f} {p['cuda']:12.4f} {abs(p['cuda'] / p['cpu'] - 1):10.2%} {agree:10.2%}")
PY
  done
done
