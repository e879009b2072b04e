// Load on a running tetra server over loopback: CLIENTS concurrent clients send streamed chat
// and completion requests for SECONDS seconds (bounded by MAX_REQUESTS), a quarter of them
// disconnecting after a random number of chunks. Prints one JSON line: requests/s, statuses,
// time-to-first-token p50/p99. Exits 1 on any 5xx or transport error other than our aborts.
// usage: node load_client.mjs BASE_URL CLIENTS SECONDS MAX_REQUESTS
const [base, clients, seconds, maxRequests] = [process.argv[2], ...process.argv.slice(3).map(Number)];
const words = 'the quick brown fox jumps over a lazy dog while seven wizards quietly hex every jolly bard'.split(' ');
let seed = 12345;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = (n) => Math.floor(random() * n);

const stats = { started: 0, completed: 0, cancelled: 0, statuses: {}, errors: 0, ttft: [] };
const deadline = Date.now() + seconds * 1000;

async function one() {
  const chat = random() < 0.6;
  const text = Array.from({ length: 3 + pick(120) }, () => words[pick(words.length)]).join(' ');
  const body = chat ? { messages: [{ role: 'user', content: text }] } : { prompt: text };
  Object.assign(body, { max_tokens: 4 + pick(60), temperature: random() < 0.5 ? 0 : 0.8, stream: true });
  const cancelAfter = random() < 0.25 ? 1 + pick(10) : -1;
  const controller = new AbortController();
  const t0 = performance.now();
  stats.started++;
  try {
    const res = await fetch(`${base}/v1/${chat ? 'chat/completions' : 'completions'}`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal: controller.signal });
    stats.statuses[res.status] = (stats.statuses[res.status] ?? 0) + 1;
    if (res.status !== 200) {
      await res.text();
      return;
    }
    const reader = res.body.getReader();
    let chunks = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (chunks === 0 && new TextDecoder().decode(value).includes('"finish_reason":null')) stats.ttft.push(performance.now() - t0);
      if (++chunks === cancelAfter) {
        controller.abort();
        stats.cancelled++;
        return;
      }
    }
    stats.completed++;
  } catch (e) {
    if (e.name !== 'AbortError') {
      stats.errors++;
      console.error(e);
    }
  }
}

async function worker() {
  while (Date.now() < deadline && stats.started < maxRequests) await one();
}

const t0 = performance.now();
await Promise.all(Array.from({ length: clients }, worker));
const elapsed = (performance.now() - t0) / 1000;
const sorted = stats.ttft.sort((a, b) => a - b);
const pct = (p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : NaN);
const fivexx = Object.entries(stats.statuses).filter(([s]) => Number(s) >= 500).reduce((n, [, c]) => n + c, 0);
console.log(JSON.stringify({
  seconds: Number(elapsed.toFixed(1)), requests: stats.started, requests_per_s: Number((stats.started / elapsed).toFixed(2)),
  completed: stats.completed, cancelled: stats.cancelled, statuses: stats.statuses, errors: stats.errors,
  ttft_p50_ms: Number(pct(0.5).toFixed(1)), ttft_p99_ms: Number(pct(0.99).toFixed(1)) }));
process.exit(fivexx === 0 && stats.errors === 0 ? 0 : 1);
