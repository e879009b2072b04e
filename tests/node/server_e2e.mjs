// tetra serve end to end through the official OpenAI Node SDK, over loopback: chat and
// completions (whole and streamed), usage, stop strings, logprobs, seeds, n choices, reasoning, tools
// (DSML prompt round trip), batching invariance with 32 concurrent streams, and cancellation
// when a client disconnects mid-stream.
// usage: node server_e2e.mjs TETRA MODEL_DIR (TETRA_SERVE_ARGS adds serve options, e.g. --device cuda)
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

const [tetra, modelDir] = process.argv.slice(2);
const work = mkdtempSync(join(tmpdir(), 'tetra-e2e-'));

function startServer() {
  const extra = (process.env.TETRA_SERVE_ARGS ?? '').split(' ').filter((a) => a);
  const child = spawn(tetra, ['serve', '--model', modelDir, '--port', '0', '--served-model-name', 'tiny', '--api-key', 'k', ...extra],
                      { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) resolve({ child, base: m[1] });
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
}

const { child, base } = await startServer();
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'k', maxRetries: 0 });
const results = [];
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.push([name, 'ok', Date.now() - t0]);
  } catch (e) {
    results.push([name, 'FAIL', Date.now() - t0]);
    console.error(`FAIL ${name}:`, e);
  }
}
const user = (content) => [{ role: 'user', content }];

async function streamChat(params, onChunk) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const out = { content: '', reasoning: '', finish: null, usage: null, logprobs: [], toolCalls: [] };
  for await (const chunk of stream) {
    if (onChunk && onChunk(chunk, stream) === false) break;
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      out.content += c.delta.content ?? '';
      out.reasoning += c.delta.reasoning_content ?? '';
      if (c.delta.tool_calls) out.toolCalls.push(...c.delta.tool_calls);
      if (c.logprobs?.content) out.logprobs.push(...c.logprobs.content);
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  }
  return out;
}

async function streamCompletion(params) {
  const stream = await client.completions.create({ ...params, stream: true });
  let text = '', finish = null;
  for await (const chunk of stream) for (const c of chunk.choices) {
    text += c.text;
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish };
}

async function metric(name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return Number(line.split(' ')[1]);
}

function renderChat(request) {
  const file = join(work, 'request.json');
  writeFileSync(file, JSON.stringify(request));
  return execFileSync(tetra, ['render-chat', '--request', file]).toString();
}
function countTokens(text) {
  return JSON.parse(execFileSync(tetra, ['tokenize', '--tokenizer', join(modelDir, 'tokenizer.json'), '--special', '--text', text])).length;
}

await check('models lists the served name', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['tiny']);
});

await check('chat: whole answer equals the stream, with usage', async () => {
  const params = { model: 'tiny', messages: user('Tell me about the weather'), max_tokens: 16, temperature: 0 };
  const whole = await client.chat.completions.create(params);
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.usage.completion_tokens <= 16, true);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
  const streamed = await streamChat({ ...params, stream_options: { include_usage: true } });
  assert.equal(streamed.content, whole.choices[0].message.content);
  assert.equal(streamed.finish, whole.choices[0].finish_reason);
  assert.deepEqual(streamed.usage, whole.usage);
});

await check('completions: text and token-id prompts, whole and streamed', async () => {
  const params = { model: 'tiny', prompt: 'Once upon a time', max_tokens: 12, temperature: 0 };
  const whole = await client.completions.create(params);
  assert.equal(whole.object, 'text_completion');
  const streamed = await streamCompletion(params);
  assert.equal(streamed.text, whole.choices[0].text);
  const ids = JSON.parse(execFileSync(tetra, ['tokenize', '--tokenizer', join(modelDir, 'tokenizer.json'), '--text', 'Once upon a time']));
  const byIds = await client.completions.create({ ...params, prompt: ids });
  assert.equal(byIds.choices[0].text, whole.choices[0].text);
  assert.equal(byIds.usage.prompt_tokens, ids.length);
});

await check('seeds: same seed same text, other seeds differ', async () => {
  const params = { model: 'tiny', prompt: 'Random words:', max_tokens: 24, temperature: 1.0, top_p: 0.95 };
  const a = await client.completions.create({ ...params, seed: 11 });
  const b = await client.completions.create({ ...params, seed: 11 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  const others = await Promise.all([12, 13, 14].map((seed) => client.completions.create({ ...params, seed })));
  assert.ok(others.some((o) => o.choices[0].text !== a.choices[0].text));
});

await check('n choices: seeded choice i is the single request with seed + i, whole and streamed', async () => {
  const params = { model: 'tiny', messages: user('Pick a word'), max_tokens: 8, temperature: 1.0 };
  const three = await client.chat.completions.create({ ...params, n: 3, seed: 21 });
  assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
  const singles = await Promise.all([21, 22, 23].map((seed) => client.chat.completions.create({ ...params, seed })));
  singles.forEach((one, i) => assert.equal(three.choices[i].message.content, one.choices[0].message.content));
  assert.equal(three.usage.completion_tokens, singles.reduce((sum, one) => sum + one.usage.completion_tokens, 0));
  const stream = await client.chat.completions.create({ ...params, n: 3, seed: 21, stream: true });
  const content = ['', '', ''], finish = [null, null, null];
  for await (const chunk of stream) for (const c of chunk.choices) {
    content[c.index] += c.delta.content ?? '';
    if (c.finish_reason) finish[c.index] = c.finish_reason;
  }
  assert.deepEqual(content, three.choices.map((c) => c.message.content));
  assert.ok(finish.every((f) => f !== null), JSON.stringify(finish));
});

await check('stop strings end the text before them, whole and streamed', async () => {
  const params = { model: 'tiny', prompt: 'The list:', max_tokens: 40, temperature: 0 };
  const full = (await client.completions.create(params)).choices[0].text;
  // A stop string from the middle of the greedy text; generation ends at its first occurrence
  // (which may come earlier when the text repeats itself).
  assert.ok(full.length >= 9, `greedy text too short for the test: ${JSON.stringify(full)}`);
  const stop = full.slice(6, 9);
  const at = full.indexOf(stop);
  const cut = await client.completions.create({ ...params, stop: [stop] });
  assert.equal(cut.choices[0].text, full.slice(0, at));
  assert.equal(cut.choices[0].finish_reason, 'stop');
  assert.equal((await streamCompletion({ ...params, stop })).text, full.slice(0, at));
  const chatParams = { model: 'tiny', messages: user('Write a list'), max_tokens: 30, temperature: 0 };
  const chatFull = (await client.chat.completions.create(chatParams)).choices[0].message.content;
  const chatStop = chatFull.slice(4, 6);
  const expected = chatFull.slice(0, chatFull.indexOf(chatStop));
  assert.equal((await client.chat.completions.create({ ...chatParams, stop: chatStop })).choices[0].message.content, expected);
  assert.equal((await streamChat({ ...chatParams, stop: chatStop })).content, expected);
});

await check('logprobs: greedy tokens are their own top alternative; bytes rebuild the text', async () => {
  const params = { model: 'tiny', messages: user('Count'), max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 3 };
  const r = await client.chat.completions.create(params);
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    assert.ok(t.top_logprobs[1].logprob <= t.top_logprobs[0].logprob);
  }
  const text = new TextDecoder().decode(new Uint8Array(lp.flatMap((t) => t.bytes)));
  assert.equal(text, r.choices[0].message.content);
  const streamed = await streamChat(params);
  assert.deepEqual(streamed.logprobs, lp);
  const c = await client.completions.create({ model: 'tiny', prompt: 'Count', max_tokens: 6, temperature: 0, logprobs: 2 });
  assert.equal(c.choices[0].logprobs.tokens.length, 6);
  assert.equal(c.choices[0].logprobs.top_logprobs[0] && Object.keys(c.choices[0].logprobs.top_logprobs[0]).length >= 1, true);
});

await check('reasoning: thinking output splits at </think> exactly as the raw completion does', async () => {
  const thinkEnd = JSON.parse(execFileSync(tetra, ['tokenize', '--tokenizer', join(modelDir, 'tokenizer.json'), '--special', '--text', '</think>']))[0];
  const messages = user('Why is the sky blue?');
  const prompt = renderChat({ messages, thinking_mode: 'thinking', reasoning_effort: 'high' });
  let splits = 0;
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const sampling = { max_tokens: 24, temperature: 1, seed, logit_bias: { [thinkEnd]: 4 } };
    const chat = await client.chat.completions.create({ model: 'tiny', messages, reasoning_effort: 'high', ...sampling });
    const raw = (await client.completions.create({ model: 'tiny', prompt, ...sampling })).choices[0].text;
    assert.equal(chat.usage.prompt_tokens, countTokens(prompt));
    const m = chat.choices[0].message;
    const end = raw.indexOf('</think>');
    if (end >= 0) ++splits;
    assert.equal(m.reasoning_content, end >= 0 ? raw.slice(0, end) : raw);
    assert.equal(m.content, end >= 0 ? raw.slice(end + 8) : '');
    // reasoning_effort "high" adds no prompt text, so thinking through chat_template_kwargs matches.
    const streamed = await streamChat({ model: 'tiny', messages, chat_template_kwargs: { thinking: true }, ...sampling });
    assert.equal(streamed.reasoning, m.reasoning_content);
    assert.equal(streamed.content, m.content);
  }
  assert.ok(splits > 0, 'no sample reached </think>: the split was not exercised');
  const plain = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 4 });
  assert.equal(plain.choices[0].message.reasoning_content, undefined);
});

await check('tools: definitions and a call/result history reach the prompt as DSML', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
                   parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const messages = [{ role: 'system', content: 'You are helpful.' }, ...user('Weather in Paris?')];
  const first = await client.chat.completions.create({ model: 'tiny', messages, tools, tool_choice: 'auto', max_tokens: 8, temperature: 0 });
  assert.equal(first.usage.prompt_tokens, countTokens(renderChat({ messages: [{ ...messages[0], tools }, messages[1]] })));
  const history = [...messages,
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 21}' }];
  const second = await client.chat.completions.create({ model: 'tiny', messages: history, tools, max_tokens: 8, temperature: 0 });
  const rendered = renderChat({ messages: [{ ...history[0], tools }, ...history.slice(1)] });
  assert.ok(rendered.includes('｜DSML｜invoke name="get_weather"'));
  assert.equal(second.usage.prompt_tokens, countTokens(rendered));
  const none = await client.chat.completions.create({ model: 'tiny', messages, tools, tool_choice: 'none', max_tokens: 2 });
  assert.equal(none.usage.prompt_tokens, countTokens(renderChat({ messages })));
  await assert.rejects(client.chat.completions.create({ model: 'tiny', messages, tools, tool_choice: 'required' }),
                       (e) => e.status === 400 && /tool_choice/.test(e.message));
});

await check('32 concurrent streams at temperature 0 equal each request served alone', async () => {
  // Tokens and their logprobs must match bit for bit: a random model's greedy text alone can
  // coincide across prompts, its probabilities do not.
  const requests = Array.from({ length: 32 }, (_, i) => ({
    model: 'tiny', max_tokens: 20, temperature: 0, logprobs: true,
    messages: user(`Request ${i}: ` + 'tell me something new '.repeat(1 + (i % 7) * 3)),
  }));
  const alone = [];
  for (const r of requests) alone.push(await streamChat(r));
  const together = await Promise.all(requests.map((r) => streamChat(r)));
  together.forEach((t, i) => {
    assert.equal(t.content, alone[i].content, `request ${i}`);
    assert.deepEqual(t.logprobs, alone[i].logprobs, `request ${i}`);
  });
  assert.ok(new Set(alone.map((a) => JSON.stringify(a.logprobs))).size > 16);
});

await check('a client that disconnects mid-stream cancels its sequence', async () => {
  const eos = JSON.parse(execFileSync(tetra, ['tokenize', '--tokenizer', join(modelDir, 'tokenizer.json'), '--special', '--text', '<｜end▁of▁sentence｜>']))[0];
  const before = await metric('tetra_generation_tokens_total');
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model: 'tiny', messages: user('Go on forever'), max_tokens: 3000, temperature: 1, logit_bias: { [eos]: -100 }, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const chunk of stream) if (++chunks === 5) controller.abort();
  } catch (e) {
    assert.match(String(e.name + e.message), /abort/i);
  }
  assert.ok(chunks >= 5);
  const deadline = Date.now() + 5000;
  while ((await metric('tetra_requests_running')) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await metric('tetra_requests_running'), 0);
  assert.equal(await metric('tetra_cache_blocks_in_use'), 0);
  assert.ok((await metric('tetra_generation_tokens_total')) - before < 3000);
});

child.kill('SIGTERM');
const code = await new Promise((resolve) => child.on('exit', resolve));
results.push(['SIGTERM ends the server cleanly', code === 0 ? 'ok' : 'FAIL', 0]);
for (const [name, status, ms] of results) console.log(`${status.padEnd(4)} ${name} (${ms} ms)`);
process.exit(results.every((r) => r[1] === 'ok') ? 0 : 1);
