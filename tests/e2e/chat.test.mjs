// Chat completions through the official OpenAI SDK: JSON and streaming answers, usage,
// max_tokens, stop strings, concurrency, and every validation error.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import OpenAI from 'openai';
import { startServer, errorOf } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

const NO_EOS = { 2: -100 };
const user = (content) => [{ role: 'user', content }];

// A 1×1 PNG built here (zlib from Node), so the image tests need no fixture file.
function tinyPng() {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const c = Buffer.alloc(4);
    c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const ihdr = Buffer.from([0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0]);
  const idat = zlib.deflateSync(Buffer.from([0, 255, 0, 0]));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', idat), chunk('IEND', Buffer.alloc(0))]);
}

describe('chat completions', () => {
  let srv, client;
  before(async () => {
    const small = synthModel('small', SMALL);
    srv = await startServer(['--threads', '1', '-m', small, '--alias', 'small', '-np', '4']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await srv.stop();
  });

  test('non-streaming answer with usage and timings; max_tokens gives length', async () => {
    const r = await client.chat.completions.create({ model: 'small', messages: user('Hello there'),
      max_tokens: 12, temperature: 0, logit_bias: NO_EOS });
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.model, 'small');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(r.choices[0].message.content.length > 0);
    assert.deepEqual(r.choices[0].message.tool_calls, []);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 12);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    assert.ok(r.usage.prompt_tokens > 3);
    assert.equal(r.timings.predicted_n, 12);
    assert.equal(r.timings.prompt_n + r.timings.cache_n, r.usage.prompt_tokens);
  });

  test('greedy answers are reproducible, and max_completion_tokens wins over max_tokens', async () => {
    const ask = (extra) => client.chat.completions.create({ model: 'small', messages: user('Hello there'),
      temperature: 0, logit_bias: NO_EOS, ...extra });
    const a = await ask({ max_tokens: 20 });
    const b = await ask({ max_tokens: 20 });
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const c = await ask({ max_tokens: 20, max_completion_tokens: 4 });
    assert.equal(c.usage.completion_tokens, 4);
    const rep = await ask({ max_tokens: 20 });
    // Sequential requests take the lowest idle instance, which holds this prompt already.
    assert.ok(rep.usage.prompt_tokens_details.cached_tokens > 0, 'the prompt cache is reused');
    assert.equal(rep.timings.cache_n, rep.usage.prompt_tokens_details.cached_tokens);
  });

  test('streaming: role first, content deltas, finish chunk, usage chunk, [DONE]', async () => {
    const whole = await client.chat.completions.create({ model: 'small', messages: user('Hello there'),
      max_tokens: 16, temperature: 0, logit_bias: NO_EOS });
    const stream = await client.chat.completions.create({ model: 'small', messages: user('Hello there'),
      max_tokens: 16, temperature: 0, logit_bias: NO_EOS, stream: true });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    const text = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? '')).join('');
    assert.equal(text, whole.choices[0].message.content, 'streamed text equals the JSON answer');
    const fin = chunks.find((c) => c.choices[0]?.finish_reason);
    assert.equal(fin.choices[0].finish_reason, 'length');
    assert.deepEqual(fin.choices[0].delta, {});
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, []);
    assert.equal(usage.usage.completion_tokens, 16);
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
  });

  test('raw SSE framing ends with data: [DONE]', async () => {
    const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
      body: JSON.stringify({ model: 'small', messages: user('Hi'), max_tokens: 3, stream: true }) });
    assert.match(r.headers.get('content-type'), /^text\/event-stream/);
    const text = await r.text();
    assert.ok(text.trimEnd().endsWith('data: [DONE]'));
    for (const block of text.trim().split('\n\n')) assert.match(block, /^data: /);
  });

  test('a stop string ends the answer and is not emitted, streaming or not', async () => {
    const base = await client.chat.completions.create({ model: 'small', messages: user('Hello there'),
      max_tokens: 30, temperature: 0, logit_bias: NO_EOS });
    const full = base.choices[0].message.content;
    const at = Math.floor(full.length / 2);
    const stop = full.slice(at, at + 2);
    const cut = full.slice(0, full.indexOf(stop));
    const r = await client.chat.completions.create({ model: 'small', messages: user('Hello there'),
      max_tokens: 30, temperature: 0, logit_bias: NO_EOS, stop: [stop] });
    assert.equal(r.choices[0].message.content, cut);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const s = await client.chat.completions.create({ model: 'small', messages: user('Hello there'),
      max_tokens: 30, temperature: 0, logit_bias: NO_EOS, stop, stream: true });
    let text = '';
    let finish = null;
    for await (const c of s) {
      text += c.choices[0]?.delta?.content ?? '';
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(text, cut);
    assert.equal(finish, 'stop');
  });

  test('logprobs: one entry per completion token, top_logprobs alternatives, streaming equal', async () => {
    const ask = { model: 'small', messages: user('Hello there'), max_tokens: 12, temperature: 0,
      logit_bias: NO_EOS, logprobs: true, top_logprobs: 3 };
    const r = await client.chat.completions.create(ask);
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, r.usage.completion_tokens);
    for (const e of lp) {
      assert.equal(e.top_logprobs.length, 3);
      assert.ok(e.logprob <= 0);
      const tops = e.top_logprobs.map((t) => t.logprob);
      assert.deepEqual(tops, [...tops].sort((a, b) => b - a), 'alternatives are most likely first');
      // Greedy: the chosen token is the most likely one.
      assert.equal(e.token, e.top_logprobs[0].token);
      assert.ok(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6);
    }
    const content = Buffer.from(r.choices[0].message.content).toString();
    assert.equal(Buffer.from(lp.flatMap((e) => e.bytes)).toString(), content);

    const s = await client.chat.completions.create({ ...ask, stream: true });
    const streamed = [];
    for await (const c of s) streamed.push(...(c.choices[0]?.logprobs?.content ?? []));
    assert.deepEqual(streamed.map((e) => e.token), lp.map((e) => e.token));

    const plain = await client.chat.completions.create({ ...ask, logprobs: undefined, top_logprobs: undefined });
    assert.equal(plain.choices[0].logprobs, null, 'no logprobs unless asked');
    const none = await client.chat.completions.create({ ...ask, top_logprobs: 0 });
    assert.deepEqual(none.choices[0].logprobs.content.map((e) => e.top_logprobs.length),
      Array(none.usage.completion_tokens).fill(0));
  });

  test('four concurrent streams all complete', async () => {
    const one = async () => {
      const s = await client.chat.completions.create({ model: 'small', messages: user('Hello there'),
        max_tokens: 40, temperature: 0, logit_bias: NO_EOS, stream: true });
      let text = '';
      let finish = null;
      for await (const c of s) {
        text += c.choices[0]?.delta?.content ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      return { text, finish };
    };
    const results = await Promise.all([one(), one(), one(), one()]);
    for (const r of results) {
      assert.equal(r.finish, 'length');
      assert.equal(r.text, results[0].text, 'greedy streams agree whatever instance ran them');
      assert.ok(r.text.length > 10);
    }
  });

  test('seeded sampling is reproducible', async () => {
    const ask = () => client.chat.completions.create({ model: 'small', messages: user('Hello there'),
      max_tokens: 20, temperature: 1, seed: 1234, logit_bias: NO_EOS });
    const [a, b] = [await ask(), await ask()];
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  });

  const bad = async (body, status, code, param) => {
    const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(body) });
    assert.equal(r.status, status, JSON.stringify(body).slice(0, 200));
    const e = errorOf(await r.json());
    assert.equal(e.code, code);
    if (param !== undefined) assert.equal(e.param, param);
    return e;
  };

  test('validation errors name the param', async () => {
    const ok = { model: 'small', messages: user('hi') };
    // As llama-server: no model (or null) gets the first chat model, and with one -m model any
    // name is served by it (a name no model has is 404 once several are loaded).
    for (const body of [{ messages: user('hi'), max_tokens: 2 }, { ...ok, model: null, max_tokens: 2 },
      { ...ok, model: 'nope', max_tokens: 2 }]) {
      const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(body) });
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.equal((await r.json()).model, 'small');
    }
    await bad({ ...ok, model: 7 }, 400, 'invalid_type', 'model');
    await bad({ model: 'small' }, 400, 'missing_required_parameter', 'messages');
    await bad({ model: 'small', messages: [] }, 400, 'invalid_value', 'messages');
    await bad({ model: 'small', messages: 'hi' }, 400, 'invalid_type', 'messages');
    await bad({ model: 'small', messages: [{ role: 'wizard', content: 'x' }] }, 400, 'invalid_value', 'messages[0].role');
    await bad({ model: 'small', messages: [{ role: 'user' }] }, 400, 'invalid_value', 'messages[0].content');
    await bad({ model: 'small', messages: [{ role: 'user', content: 5 }] }, 400, 'invalid_type', 'messages[0].content');
    await bad({ ...ok, temperature: 'hot' }, 400, 'invalid_type', 'temperature');
    await bad({ ...ok, temperature: 3 }, 400, 'invalid_value', 'temperature');
    await bad({ ...ok, top_p: -1 }, 400, 'invalid_value', 'top_p');
    await bad({ ...ok, top_k: 1.5 }, 400, 'invalid_type', 'top_k');
    await bad({ ...ok, max_tokens: 0 }, 400, 'invalid_value', 'max_tokens');
    await bad({ ...ok, max_tokens: 2 ** 31 }, 400, 'invalid_value', 'max_tokens');
    await bad({ ...ok, max_completion_tokens: 'x' }, 400, 'invalid_type', 'max_completion_tokens');
    await bad({ ...ok, stream: 'yes' }, 400, 'invalid_type', 'stream');
    await bad({ ...ok, stop: 7 }, 400, 'invalid_type', 'stop');
    await bad({ ...ok, top_logprobs: 2 }, 400, 'invalid_value', 'top_logprobs');
    await bad({ ...ok, logprobs: true, top_logprobs: 21 }, 400, 'invalid_value', 'top_logprobs');
    await bad({ ...ok, logprobs: 'yes' }, 400, 'invalid_type', 'logprobs');
    await bad({ ...ok, stop: Array(17).fill('x') }, 400, 'invalid_value', 'stop');
    await bad({ ...ok, seed: 'x' }, 400, 'invalid_type', 'seed');
    await bad({ ...ok, n: 17 }, 400, 'invalid_value', 'n');
    await bad({ ...ok, n: 2, stream: true }, 400, 'unsupported_value', 'n');
    await bad({ ...ok, logit_bias: { 999999: 1 } }, 400, 'invalid_value', 'logit_bias');
    await bad({ ...ok, tools: {} }, 400, 'invalid_type', 'tools');
    await bad({ ...ok, tool_choice: 'sometimes' }, 400, 'invalid_value', 'tool_choice');
    await bad({ ...ok, frequency_penalty: 5 }, 400, 'invalid_value', 'frequency_penalty');
    // unknown fields are ignored
    const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
      body: JSON.stringify({ ...ok, max_tokens: 2, some_future_field: { a: 1 } }) });
    assert.equal(r.status, 200);
  });

  test('content parts: text works, media is checked, unsupported types are refused', async () => {
    const part = (p) => ({ model: 'small', max_tokens: 2, messages: [{ role: 'user', content: [p] }] });
    const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
      body: JSON.stringify(part({ type: 'text', text: 'Hello' })) });
    assert.equal(r.status, 200);
    await bad(part({ type: 'video', video: {} }), 400, 'unsupported_content_part_type', 'messages[0].content[0]');
    await bad(part({ type: 'file', file: {} }), 400, 'unsupported_content_part_type');
    await bad(part({ type: 'image_url', image_url: { url: 'data:image/png;base64,!!!!' } }), 400, 'invalid_content_part');
    await bad(part({ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }), 400, 'invalid_content_part');
    await bad(part({ type: 'image_url', image_url: { url: 'file:///etc/passwd' } }), 400, 'invalid_content_part');
    const png = tinyPng().toString('base64');
    await bad(part({ type: 'image_url', image_url: { url: `data:image/png;base64,${png.slice(0, 20)}` } }), 400,
      'invalid_content_part');
    const e = await bad(part({ type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }), 400,
      'unsupported_content_part_type');
    assert.match(e.message, /small/);
    assert.match(e.message, /image/);
    await bad(part({ type: 'input_audio', input_audio: { format: 'ogg', data: 'AAAA' } }), 400, 'invalid_content_part');
  });

  test('a prompt longer than the context is context_length_exceeded with both numbers', async () => {
    const e = await bad({ model: 'small', messages: user('hello '.repeat(5000)) }, 400, 'context_length_exceeded');
    assert.match(e.message, /4096/);
  });

  test('the server keeps serving after the errors', async () => {
    const r = await client.chat.completions.create({ model: 'small', messages: user('Hi'), max_tokens: 2 });
    assert.equal(r.choices.length, 1);
  });
});

describe('local image paths under --media-path', () => {
  let srv, dir;
  before(async () => {
    const { mkdirSync, writeFileSync, symlinkSync } = await import('node:fs');
    const path = await import('node:path');
    const { tmpDir } = await import('./lib/models.mjs');
    dir = path.join(tmpDir, 'media');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'dot.png'), tinyPng());
    symlinkSync('/etc/hostname', path.join(dir, 'escape.png'));
    srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '--alias', 'small',
      '--media-path', dir]);
  });
  after(async () => srv.stop());

  const ask = (url) => fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({
    model: 'small', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }] }) })
    .then(async (r) => ({ status: r.status, e: errorOf(await r.json()) }));

  test('a file inside the root is read and checked; escapes are refused', async () => {
    let r = await ask(`file://${dir}/dot.png`);
    assert.equal(r.status, 400);
    assert.equal(r.e.code, 'unsupported_content_part_type', 'a real image: only the modality is missing');
    r = await ask('file://dot.png');
    assert.equal(r.e.code, 'unsupported_content_part_type', 'relative to the root');
    for (const url of ['file:///etc/passwd', `file://${dir}/../../etc/passwd`, `file://${dir}/escape.png`,
      'file://../secret.png', `file://${dir}/missing.png`]) {
      r = await ask(url);
      assert.equal(r.status, 400, url);
      assert.equal(r.e.code, 'invalid_content_part', url);
    }
  });
});
