// The varied strings that tetra's tokenizer is compared on: deterministic (seeded), so every
// run and every machine tests the same 10,000+ strings. Shared by the reference generator and
// the throughput benchmark.

// mulberry32: a small seeded PRNG, so the strings do not depend on Math.random.
export function makeRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  'the of and to in is you that it he was for on are as with his they I at be this have from or one had by ' +
  'word but not what all were we when your can said there use an each which she do how their if will up other ' +
  'about out many then them these so some her would make like him into time has look two more write go see ' +
  "number no way could people my than first water been call who oil its now find long down day did get come " +
  "made may part don't I'm you're we've they'll she'd it's Hello World OpenAI DeepSeek tokenizer BPE Unicode " +
  'internationalization antidisestablishmentarianism naïve café résumé coöperate façade jalapeño Zürich'
).split(' ');
const PUNCT = ['.', ',', '!', '?', ';', ':', '...', ' -', ' —', '"', "'", '(', ')', '[', ']', '{', '}', '«', '»', '“', '”'];
const CODE = [
  'def f(x):\n    return x * 2\n',
  'for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n',
  'const add = (a, b) => a + b;\n',
  '#include <vector>\nint main() { std::vector<int> v{1,2,3}; return v.size(); }\n',
  'if x != None and len(y) >= 3:\n        print(f"{x!r}: {y[0]:>10}")\n',
  'SELECT id, name FROM users WHERE age > 30 ORDER BY name DESC;\n',
  '<div class="main"><a href="https://example.com/?q=1&r=2">link</a></div>\n',
  '{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b"}}\n',
  'fn main() -> Result<(), Box<dyn Error>> { let s = String::from("héllo"); Ok(()) }\n',
  '    x = np.zeros((3, 4), dtype=np.float32)  # comment\r\n',
  'import os\n\n\nclass Foo(object):\n    pass\n',
  '$ ls -la | grep "\\.cpp$" && echo done\n',
];
const SPECIAL = ['<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>', '<｜User｜>', '<｜Assistant｜>', '<think>',
                 '</think>', '<|EOT|>', '<｜tool▁calls▁begin｜>', '<｜fim▁hole｜>', '<｜place▁holder▁no▁17｜>'];
const SPACES = [' ', '  ', '\t', '\n', '\n\n', '\r\n', ' \n', '\u00a0', '\u3000', '\u2003', '\u200b', '\u0085', '\u180e',
                '\u2028', '\v', '\f'];

export function stringsForComparison(count, seed) {
  const rand = makeRandom(seed);
  const int = (n) => Math.floor(rand() * n);
  const pick = (list) => list[int(list.length)];
  const codePoint = (lo, hi) => String.fromCodePoint(lo + int(hi - lo + 1));
  const run = (n, make) => Array.from({length: n}, make).join('');

  const english = () => {
    const n = 1 + int(25);
    let s = '';
    for (let i = 0; i < n; i++) {
      let w = pick(WORDS);
      if (rand() < 0.1) w = w[0].toUpperCase() + w.slice(1);
      s += (i ? ' ' : '') + w;
      if (rand() < 0.12) s += pick(PUNCT);
    }
    return s;
  };
  const chinese = () => run(1 + int(30), () => (rand() < 0.12 ? pick(['，', '。', '！', '？', '、', '：', '“', '”']) : codePoint(0x4e00, 0x9fa5)));
  const japanese = () => run(1 + int(30), () => {
    const r = rand();
    return r < 0.4 ? codePoint(0x3041, 0x3096) : r < 0.7 ? codePoint(0x30a1, 0x30fa) : r < 0.9 ? codePoint(0x4e00, 0x9fa5) : pick(['。', '、', 'ー', '・']);
  });
  const korean = () => run(1 + int(20), () => (rand() < 0.2 ? ' ' : codePoint(0xac00, 0xd7a3)));
  const code = () => run(1 + int(3), () => pick(CODE));
  const digits = () => run(1 + int(4), () => run(1 + int(25), () => String(int(10))) + pick(['', ' ', ',', '.', '-', '/', 'x', '٣', '²']));
  const emoji = () => run(1 + int(8), () => {
    const r = rand();
    if (r < 0.4) return codePoint(0x1f300, 0x1f64f);
    if (r < 0.6) return codePoint(0x1f900, 0x1f9ff) + (rand() < 0.5 ? codePoint(0x1f3fb, 0x1f3ff) : '');
    if (r < 0.75) return '👨\u200d👩\u200d👧\u200d👦';
    if (r < 0.85) return codePoint(0x1f1e6, 0x1f1ff) + codePoint(0x1f1e6, 0x1f1ff);
    return codePoint(0x2600, 0x27bf) + '\ufe0f';
  });
  const whitespace = () => run(1 + int(12), () => (rand() < 0.3 ? pick(WORDS) : run(1 + int(6), () => pick(SPACES))));
  const randomUnicode = () => run(1 + int(20), () => {
    const r = rand();
    let cp;
    if (r < 0.5) cp = int(0x3000);             // Latin, Greek, Cyrillic, Hebrew, Arabic, Indic, ...
    else if (r < 0.8) cp = int(0x10000);       // the rest of the BMP
    else cp = 0x10000 + int(0x20000);          // supplementary planes 1 and 2
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x20 + int(0x5e);  // no lone surrogates
    return String.fromCodePoint(cp);
  });
  const special = () => run(1 + int(4), () => pick([english, code, chinese])().slice(0, 20) + pick(SPECIAL));
  const kinds = [english, chinese, japanese, korean, code, digits, emoji, whitespace, randomUnicode, special];
  const mixed = () => run(2 + int(4), () => pick(kinds)() + (rand() < 0.5 ? pick(SPACES) : ''));

  const strings = [];
  for (let i = 0; i < count; i++) {
    const all = [...kinds, mixed, mixed, mixed];
    strings.push(all[i % all.length]());
  }
  return strings;
}
