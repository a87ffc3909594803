// Ollama's API (/api/…) through the official `ollama` npm client: version, list, ps, show,
// chat whole and streamed, tools (a forced call through llamapi's tool_choice extension, and
// a tool round trip rendered into the prompt), structured output (format "json" and a JSON
// schema), think (a grammar scripts the synthetic model's "<think>…</think>"), options,
// generate (templated, raw, suffix on a vocabulary with FIM tokens, context), embeddings on
// both routes, pull of a model that is here, and Ollama's errors: unknown model 404, bad JSON
// 400, images for a text-only model 400. A disconnect mid-stream frees the instance. With
// ../shared: raw greedy generate on stories260K equals llama-server's golden output, and
// tiny_bert's vectors match the reference on both embedding routes.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { Ollama } from 'ollama';
import { startServer, hasShared, sharedDir } from './lib/server.mjs';
import { synthModel, SLOW } from './lib/models.mjs';
import { toolTemplateModel, TOOL_TEMPLATE } from './lib/tool_template.mjs';

const NO_EOS = { 2: -100 }; // keeps the synthetic model talking until num_predict
const user = (content) => [{ role: 'user', content }];
const NS = /^\d+$/; // durations are integer nanoseconds
const DECODER = ['--layers', '2', '--embd', '64', '--heads', '2', '--heads-kv', '1', '--ffn', '128',
  '--ctx', '1024', '--type', 'f16'];

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] },
  },
};

async function post(srv, route, body, raw = false) {
  const res = await fetch(`${srv.url}${route}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: raw ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* NDJSON or text */ }
  return { status: res.status, type: res.headers.get('content-type'), text, json };
}

// A valid w×h RGB PNG (so the refusal is about the model, not the bytes).
function png(w, h) {
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
    const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const c = Buffer.alloc(4); c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; ihdr[9] = 2; // 8-bit RGB
  const raw = Buffer.alloc((w * 3 + 1) * h, 0x80);
  for (let y = 0; y < h; y++) raw[y * (w * 3 + 1)] = 0;
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

describe('ollama api', () => {
  let srv, ollama, embedName;
  before(async () => {
    const small = toolTemplateModel();
    const embed = synthModel('qwen3-embed', ['--arch', 'qwen3', ...DECODER, '--seed', '9', '--pooling', '3']);
    srv = await startServer(['--threads', '1', '-m', small, '--alias', 'small', '-m', embed, '-np', '2']);
    ollama = new Ollama({ host: srv.url });
    embedName = 'qwen3-embed:latest';
  });
  after(async () => {
    await srv.stop();
  });

  test('version, list and ps in Ollama\'s shapes', async () => {
    const v = await ollama.version();
    assert.match(v.version, /^\d+\.\d+\.\d+$/);
    const list = await ollama.list();
    const names = list.models.map((m) => m.name).sort();
    assert.deepEqual(names, ['qwen3-embed:latest', 'small:latest']);
    const small = list.models.find((m) => m.name === 'small:latest');
    assert.equal(small.model, 'small:latest');
    assert.equal(small.details.format, 'gguf');
    assert.equal(small.details.family, 'llama');
    assert.deepEqual(small.details.families, ['llama']);
    assert.match(small.details.parameter_size, /^\d+(\.\d+)?[KMB]$/);
    assert.match(small.digest, /^[0-9a-f]{64}$/);
    assert.ok(small.size > 0);
    assert.ok(!Number.isNaN(new Date(small.modified_at).getTime()));
    assert.deepEqual(small.capabilities, ['completion', 'tools', 'thinking']);
    assert.deepEqual(list.models.find((m) => m.name === embedName).capabilities, ['embedding']);
    const ps = await ollama.ps();
    const p = ps.models.find((m) => m.name === 'small:latest');
    assert.equal(p.size_vram, 0);
    assert.equal(p.context_length, 4096);
    assert.ok(p.size >= small.size);
    assert.ok(new Date(p.expires_at).getTime() > Date.now());
  });

  test('show: template, details, model_info, capabilities; unknown model is 404', async () => {
    const s = await ollama.show({ model: 'small' });
    assert.equal(s.template, TOOL_TEMPLATE);
    assert.equal(s.details.family, 'llama');
    assert.equal(s.model_info['general.architecture'], 'llama');
    assert.equal(s.model_info['llama.embedding_length'], 128);
    assert.ok(s.capabilities.includes('completion'));
    assert.match(s.modelfile, /FROM .*small-tools\.gguf/);
    const e = await ollama.show({ model: embedName });
    assert.deepEqual(e.capabilities, ['embedding']);
    await assert.rejects(ollama.show({ model: 'missing:7b' }),
      (err) => err.status_code === 404 && err.error === "model 'missing:7b' not found");
  });

  test('chat whole: message, done_reason length, counts and nanosecond durations', async () => {
    const r = await ollama.chat({ model: 'small:latest', messages: user('Hello there'), stream: false,
      options: { temperature: 0, num_predict: 6 }, logit_bias: NO_EOS });
    assert.equal(r.model, 'small:latest'); // the name as sent
    assert.equal(r.message.role, 'assistant');
    assert.ok(r.message.content.length > 0);
    assert.equal(r.done, true);
    assert.equal(r.done_reason, 'length');
    assert.equal(r.eval_count, 6);
    assert.ok(r.prompt_eval_count > 3);
    for (const k of ['total_duration', 'load_duration', 'prompt_eval_duration', 'eval_duration'])
      assert.match(String(r[k]), NS, k);
    assert.ok(r.total_duration >= r.eval_duration);
    assert.ok(Math.abs(new Date(r.created_at).getTime() - Date.now()) < 60000);
  });

  test('chat streamed: NDJSON chunks add up to the whole answer; the last is done', async () => {
    const params = { model: 'small', messages: user('Tell me a story'), options: { temperature: 0, num_predict: 12 },
      logit_bias: NO_EOS };
    const whole = await ollama.chat({ ...params, stream: false });
    const parts = [];
    for await (const part of await ollama.chat({ ...params, stream: true })) parts.push(part);
    assert.ok(parts.length >= 2);
    assert.ok(parts.slice(0, -1).every((p) => p.done === false && p.message.role === 'assistant'));
    const last = parts.at(-1);
    assert.equal(last.done, true);
    assert.equal(last.done_reason, 'length');
    assert.equal(last.eval_count, 12);
    assert.equal(parts.map((p) => p.message.content).join(''), whole.message.content);
    const res = await post(srv, '/api/chat', params); // Ollama streams unless told not to
    assert.equal(res.status, 200);
    assert.equal(res.type, 'application/x-ndjson');
    const lines = res.text.trimEnd().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines.at(-1).done, true);
  });

  test('options: stop ends the answer (done_reason stop), seed repeats it, bad types are 400', async () => {
    const grammar = 'root ::= "Hello world. Goodbye"';
    const r = await ollama.chat({ model: 'small', messages: user('x'), stream: false, grammar,
      options: { stop: ['world'], num_predict: 50 } });
    assert.equal(r.message.content, 'Hello ');
    assert.equal(r.done_reason, 'stop');
    const run = (seed) => ollama.chat({ model: 'small', messages: user('Hi'), stream: false, logit_bias: NO_EOS,
      options: { temperature: 1.5, top_k: 0, top_p: 1, min_p: 0, seed, num_predict: 10, repeat_penalty: 1.1,
        presence_penalty: 0.5, frequency_penalty: 0.5, num_ctx: 2048, num_thread: 1 } });
    assert.equal((await run(42)).message.content, (await run(42)).message.content);
    await assert.rejects(ollama.chat({ model: 'small', messages: user('x'), options: { temperature: 'hot' } }),
      (err) => err.status_code === 400 && /temperature/.test(err.error));
    await assert.rejects(ollama.chat({ model: 'small', messages: user('x'), options: { num_predict: 1.5 } }),
      (err) => err.status_code === 400 && /num_predict/.test(err.error));
    const ka = await ollama.chat({ model: 'small', messages: user('x'), keep_alive: '5m', stream: false,
      options: { num_predict: 1 } });
    assert.equal(ka.done, true);
  });

  test('logprobs: one entry per answer token with its alternatives, whole and streamed', async () => {
    const params = { model: 'small', messages: user('Hi'), logprobs: true, top_logprobs: 3, logit_bias: NO_EOS,
      options: { temperature: 0, num_predict: 7 } };
    const r = await ollama.chat({ ...params, stream: false });
    assert.equal(r.logprobs.length, 7);
    for (const e of r.logprobs) {
      assert.equal(typeof e.token, 'string');
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 3);
      assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[2].logprob);
    }
    let n = 0;
    for await (const p of await ollama.chat({ ...params, stream: true })) n += p.logprobs?.length ?? 0;
    assert.equal(n, 7);
    const g = await ollama.generate({ model: 'small', prompt: 'Hi', raw: true, logprobs: true, stream: false,
      logit_bias: NO_EOS, options: { num_predict: 4 } });
    assert.equal(g.logprobs.length, 4);
    await assert.rejects(ollama.chat({ ...params, top_logprobs: 21 }),
      (err) => err.status_code === 400 && err.error === 'top_logprobs must be between 0 and 20');
  });

  test('tools: a call comes back in Ollama\'s shape (arguments an object), whole and streamed', async () => {
    const params = { model: 'small', messages: user('Weather in Paris?'), tools: [weatherTool],
      tool_choice: 'required', options: { seed: 3, num_predict: 200 } };
    const r = await ollama.chat({ ...params, stream: false });
    assert.equal(r.done_reason, 'stop');
    assert.equal(r.message.tool_calls.length, 1);
    const call = r.message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    assert.equal(typeof call.function.arguments, 'object');
    assert.equal(typeof call.function.arguments.city, 'string');
    let streamed = null;
    for await (const part of await ollama.chat({ ...params, stream: true }))
      if (part.message.tool_calls) streamed = part.message.tool_calls;
    assert.deepEqual(streamed.map((c) => c.function), [{ ...call.function, index: 0 }]);
  });

  test('tools: the assistant\'s call and the tool result reach the prompt', async () => {
    const base = [{ role: 'user', content: 'Weather in Paris?' }];
    const round = [...base,
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', content: 'Sunny, 24 C', tool_name: 'get_weather' }];
    const count = async (messages, tools) => (await ollama.chat({ model: 'small', messages, tools, stream: false,
      options: { num_predict: 1 } })).prompt_eval_count;
    const plain = await count(base);
    assert.ok(await count(base, [weatherTool]) > plain);
    assert.ok(await count(round) > plain + 10);
  });

  test('structured output: format "json" parses; a schema validates', async () => {
    const schema = { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] }, n: { type: 'integer', minimum: 0, maximum: 9 } },
      required: ['city', 'n'] };
    for (const seed of [1, 2, 3]) {
      const r = await ollama.chat({ model: 'small', messages: user('JSON please'), format: schema, stream: false,
        options: { seed, num_predict: 400 } });
      assert.equal(r.done_reason, 'stop');
      const v = JSON.parse(r.message.content);
      assert.ok(['Paris', 'Rome'].includes(v.city));
      assert.ok(Number.isInteger(v.n) && v.n >= 0 && v.n <= 9);
    }
    const j = await ollama.generate({ model: 'small', prompt: 'JSON please', format: 'json', stream: false,
      options: { seed: 6, num_predict: 300 } });
    if (j.done_reason === 'stop') assert.equal(typeof JSON.parse(j.response), 'object');
    else assert.match(j.response, /^\s*\{/);
    await assert.rejects(ollama.chat({ model: 'small', messages: user('x'), format: 'yaml' }),
      (err) => err.status_code === 400 && /format/.test(err.error));
  });

  test('think: thinking is split from the content; think false drops it; a model without markers refuses', async () => {
    const grammar = 'root ::= "<think>Let me see.</think>The answer."';
    const r = await ollama.chat({ model: 'small', messages: user('2+2?'), think: true, grammar, stream: false,
      options: { num_predict: 60 } });
    assert.equal(r.message.thinking, 'Let me see.');
    assert.equal(r.message.content, 'The answer.');
    let thinking = '', content = '';
    for await (const p of await ollama.chat({ model: 'small', messages: user('2+2?'), think: true, grammar, stream: true,
      options: { num_predict: 60 } })) {
      thinking += p.message.thinking ?? '';
      content += p.message.content;
    }
    assert.equal(thinking, 'Let me see.');
    assert.equal(content, 'The answer.');
    const off = await ollama.chat({ model: 'small', messages: user('2+2?'), think: false, grammar, stream: false,
      options: { num_predict: 60 } });
    assert.equal(off.message.thinking, undefined);
    assert.equal(off.message.content, 'The answer.');
    const g = await ollama.generate({ model: 'small', prompt: '2+2?', think: 'high', grammar, stream: false,
      options: { num_predict: 60 } });
    assert.equal(g.thinking, 'Let me see.');
    assert.equal(g.response, 'The answer.');
    // The history's thinking is rendered back (the template shows reasoning_content).
    const hist = (t) => ollama.chat({ model: 'small', stream: false, options: { num_predict: 1 },
      messages: [...user('a'), { role: 'assistant', content: 'b', thinking: t }, ...user('c')] });
    assert.ok((await hist('a long chain of thought here')).prompt_eval_count > (await hist('')).prompt_eval_count);
  });

  test('generate: templated with system, raw as given, context carried on', async () => {
    const opts = { temperature: 0, num_predict: 5 };
    const plain = await ollama.generate({ model: 'small', prompt: 'Hi', stream: false, options: opts, logit_bias: NO_EOS });
    const sys = await ollama.generate({ model: 'small', prompt: 'Hi', system: 'You are terse and exact.', stream: false,
      options: opts, logit_bias: NO_EOS });
    assert.ok(sys.prompt_eval_count > plain.prompt_eval_count);
    assert.equal(plain.done_reason, 'length');
    assert.equal(plain.eval_count, 5);
    assert.ok(Array.isArray(plain.context) && plain.context.length === plain.prompt_eval_count + 5);
    const raw = await ollama.generate({ model: 'small', prompt: 'Once upon a time', raw: true, stream: false,
      options: opts, logit_bias: NO_EOS });
    // No template around it: the prompt's own tokens (and the vocabulary's BOS).
    const bare = await post(srv, '/tokenize', { content: 'Once upon a time', add_special: true });
    assert.equal(raw.prompt_eval_count, bare.json.tokens.length);
    const next = await ollama.generate({ model: 'small', prompt: 'And then?', context: plain.context, stream: false,
      options: opts, logit_bias: NO_EOS });
    assert.ok(next.prompt_eval_count > plain.context.length);
    assert.deepEqual(next.context.slice(0, plain.context.length), plain.context);
    const parts = [];
    for await (const p of await ollama.generate({ model: 'small', prompt: 'Hi', stream: true, options: opts, logit_bias: NO_EOS }))
      parts.push(p);
    assert.equal(parts.map((p) => p.response).join(''), plain.response);
    assert.deepEqual(parts.at(-1).context, plain.context);
    const load = await ollama.generate({ model: 'small', prompt: '' });
    assert.equal(load.done, true);
    assert.equal(load.done_reason, 'load');
    await assert.rejects(ollama.generate({ model: 'small', prompt: 'x', raw: true, system: 'y' }),
      (err) => err.status_code === 400 && err.error === 'raw mode does not support template, system, or context');
    await assert.rejects(ollama.generate({ model: 'small', prompt: 'x', suffix: 'y' }),
      (err) => err.status_code === 400 && /does not support insert/.test(err.error));
    await assert.rejects(ollama.generate({ model: 'small', prompt: 'x', template: '{{ .Prompt }}' }),
      (err) => err.status_code === 400 && /template/.test(err.error));
  });

  test('embeddings: /api/embed (normalized, dimensions, empty) and /api/embeddings', async () => {
    const e = await ollama.embed({ model: embedName, input: ['The cat sat', 'A dog ran'] });
    assert.equal(e.model, embedName);
    assert.equal(e.embeddings.length, 2);
    assert.equal(e.embeddings[0].length, 64);
    const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm(e.embeddings[0]) - 1) < 1e-4);
    assert.ok(e.prompt_eval_count > 4);
    assert.match(String(e.total_duration), NS);
    const one = await ollama.embed({ model: embedName, input: 'The cat sat' });
    assert.ok(one.embeddings[0].every((x, i) => Math.abs(x - e.embeddings[0][i]) < 1e-4));
    const cut = await ollama.embed({ model: embedName, input: 'The cat sat', dimensions: 16 });
    assert.equal(cut.embeddings[0].length, 16);
    assert.ok(Math.abs(norm(cut.embeddings[0]) - 1) < 1e-4);
    assert.deepEqual((await ollama.embed({ model: embedName, input: [] })).embeddings, []);
    const old = await ollama.embeddings({ model: embedName, prompt: 'The cat sat' });
    assert.ok(old.embedding.every((x, i) => Math.abs(x - e.embeddings[0][i]) < 1e-4));
    assert.deepEqual((await ollama.embeddings({ model: embedName, prompt: '' })).embedding, []);
    await assert.rejects(ollama.embed({ model: 'small', input: 'x' }),
      (err) => err.status_code === 400 && /does not support embeddings/.test(err.error));
    await assert.rejects(ollama.chat({ model: embedName, messages: user('x') }),
      (err) => err.status_code === 400 && err.error === `"${embedName}" does not support chat`);
    await assert.rejects(ollama.generate({ model: embedName, prompt: 'x' }),
      (err) => err.status_code === 400 && err.error === `"${embedName}" does not support generate`);
    await assert.rejects(ollama.embed({ model: embedName, input: 'x', dimensions: 65 }),
      (err) => err.status_code === 400 && /dimensions/.test(err.error));
  });

  test('pull: a model that is here succeeds with status lines; another is a clear 404', async () => {
    const lines = [];
    for await (const p of await ollama.pull({ model: 'small', stream: true })) lines.push(p.status);
    assert.deepEqual(lines, ['pulling manifest', 'success']);
    assert.equal((await ollama.pull({ model: 'small:latest' })).status, 'success');
    await assert.rejects(ollama.pull({ model: 'llama3.2:1b' }),
      (err) => err.status_code === 404 && /only Hugging Face GGUF models can be pulled/.test(err.error));
  });

  test('errors in Ollama\'s shape: unknown model 404, bad JSON 400, missing model 400, images on a text model 400', async () => {
    await assert.rejects(ollama.chat({ model: 'nope:7b', messages: user('x') }),
      (err) => err.status_code === 404 && err.error === "model 'nope:7b' not found");
    await assert.rejects(ollama.generate({ model: 'nope', prompt: 'x' }), (err) => err.status_code === 404);
    await assert.rejects(ollama.embed({ model: 'nope', input: 'x' }), (err) => err.status_code === 404);
    const bad = await post(srv, '/api/chat', '{"model": "small", "messages": [', true);
    assert.equal(bad.status, 400);
    assert.deepEqual(Object.keys(bad.json), ['error']);
    assert.match(bad.json.error, /invalid JSON/);
    const missing = await post(srv, '/api/chat', { messages: user('x') });
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.json, { error: 'model is required' });
    const wrongType = await post(srv, '/api/chat', { model: 'small', messages: 'x' });
    assert.equal(wrongType.status, 400);
    assert.equal(typeof wrongType.json.error, 'string');
    await assert.rejects(ollama.chat({ model: 'small', messages: [{ role: 'user', content: 'What is this?', images: [png(8, 8)] }] }),
      (err) => err.status_code === 400 && /does not accept image input/.test(err.error));
    await assert.rejects(ollama.generate({ model: 'small', prompt: 'What is this?', images: [png(8, 8)] }),
      (err) => err.status_code === 400 && /image/.test(err.error));
    await assert.rejects(ollama.chat({ model: 'small', messages: user('x'), think: 'hard' }),
      (err) => err.status_code === 400 && /think/.test(err.error));
    // Wrong shapes anywhere: a 4xx in Ollama's shape, never a 5xx, and the server serves on.
    const hostile = [
      ['/api/chat', { model: 'small', messages: [{ role: 'user', content: 'x', images: 'abc' }] }],
      ['/api/chat', { model: 'small', messages: [{ role: 'user', content: 'x', images: ['!!!notbase64'] }] }],
      ['/api/chat', { model: 'small', messages: [{ role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '{}' } }] }] }],
      ['/api/chat', { model: 'small', messages: user('x'), tools: [{ type: 'function' }] }],
      ['/api/chat', { model: 'small', messages: user('x'), tools: {} }],
      ['/api/chat', { model: 'small', messages: user('x'), format: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } }],
      ['/api/chat', { model: 'small', messages: user('x'), options: { stop: Array(40).fill('s') } }],
      ['/api/chat', { model: 'small', messages: user('x'), options: { top_p: 7 } }],
      ['/api/chat', { model: 'small', messages: user('x'), keep_alive: { d: 1 } }],
      ['/api/chat', { model: 'small', messages: user('x'), stream: 'yes' }],
      ['/api/chat', { model: ['small'], messages: user('x') }],
      ['/api/chat', { model: 'small', messages: user('x'.repeat(40000)) }],
      ['/api/generate', { model: 'small', prompt: 5 }],
      ['/api/generate', { model: 'small', prompt: 'x', context: [1, -5] }],
      ['/api/generate', { model: 'small', prompt: 'x', context: 'abc' }],
      ['/api/generate', { model: 'small', prompt: 'x', raw: 'yes' }],
      ['/api/generate', { model: 'small', prompt: 'x', raw: true, grammar: 'root ::= (' }],
      ['/api/embed', { model: embedName, input: [1.5] }],
      ['/api/embed', { model: embedName, input: { a: 1 } }],
      ['/api/embed', { model: embedName, input: 'x', truncate: 'no' }],
      ['/api/embeddings', { model: embedName, prompt: ['x'] }],
      ['/api/show', { model: 7 }],
      ['/api/pull', { model: 'small', stream: 3 }],
    ];
    for (const [route, body] of hostile) {
      const r = await post(srv, route, body);
      assert.ok(r.status >= 400 && r.status < 500, `${route} ${JSON.stringify(body).slice(0, 120)}: ${r.status} ${r.text}`);
      assert.equal(typeof r.json?.error, 'string', r.text);
      assert.deepEqual(Object.keys(r.json), ['error']);
    }
    const unknown = await fetch(`${srv.url}/api/nothing`);
    assert.equal(unknown.status, 404);
    assert.equal(typeof (await unknown.json()).error, 'string');
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });
});

describe('ollama api: a model without reasoning markers, a 256-token context', () => {
  let srv, ollama;
  before(async () => {
    srv = await startServer(['--threads', '1', '-m', synthModel('small', ['--arch', 'llama', '--layers', '2', '--embd', '128',
      '--heads', '4', '--heads-kv', '2', '--ffn', '256', '--ctx', '4096', '--type', 'f16', '--seed', '7']), '--alias', 'plain',
      '-c', '256']);
    ollama = new Ollama({ host: srv.url });
  });
  after(async () => srv.stop());

  test('think: true is refused as Ollama refuses it; think unset answers', async () => {
    await assert.rejects(ollama.chat({ model: 'plain', messages: user('x'), think: true }),
      (err) => err.status_code === 400 && err.error === '"plain" does not support thinking');
    const r = await ollama.chat({ model: 'plain', messages: user('x'), stream: false, options: { num_predict: 2 } });
    assert.equal(r.done, true);
    // One model served: unlike the OpenAI routes, another name is still Ollama's 404.
    await assert.rejects(ollama.chat({ model: 'other', messages: user('x') }), (err) => err.status_code === 404);
  });

  test('names: name:tag finds id name-tag, an id with a tag is listed as it is', async () => {
    const file = synthModel('small', []);
    for (const id of ['mini-1b', 'mini:q8']) {
      const r = await post(srv, '/v1/models/load', { model_id: id, model_path: file });
      assert.equal(r.status, 200, r.text);
    }
    const names = (await ollama.list()).models.map((m) => m.name).sort();
    assert.deepEqual(names, ['mini-1b:latest', 'mini:q8', 'plain:latest']);
    for (const name of ['mini:1b', 'mini-1b', 'mini-1b:latest', 'mini:q8']) {
      const r = await ollama.chat({ model: name, messages: user('x'), stream: false, options: { num_predict: 1 } });
      assert.equal(r.model, name);
    }
    await assert.rejects(ollama.chat({ model: 'mini:2b', messages: user('x') }), (err) => err.status_code === 404);
    for (const id of ['mini-1b', 'mini:q8']) await post(srv, '/v1/models/unload', { model_id: id });
  });

  test('truncate (the default) drops the oldest messages to fit the context; truncate: false is a 400', async () => {
    const turn = 'The cat sat on the mat and looked at the dog. ';
    const messages = [{ role: 'system', content: 'Be brief.' }];
    for (let i = 0; i < 16; i++) messages.push({ role: i % 2 ? 'assistant' : 'user', content: `${i}: ${turn}` });
    messages.push({ role: 'user', content: 'And then?' });
    const r = await ollama.chat({ model: 'plain', messages, stream: false, options: { num_predict: 2 } });
    assert.equal(r.done, true);
    assert.ok(r.prompt_eval_count < 256);
    const full = await ollama.chat({ model: 'plain', messages: messages.slice(-3), stream: false, options: { num_predict: 1 } });
    assert.ok(r.prompt_eval_count > full.prompt_eval_count, 'older messages kept while they fit');
    await assert.rejects(ollama.chat({ model: 'plain', messages, truncate: false }),
      (err) => err.status_code === 400 && /context/.test(err.error));
  });
});

describe('ollama api: a client that leaves mid-stream', () => {
  let srv, ollama;
  before(async () => {
    srv = await startServer(['--threads', '1', '-m', synthModel('slow', SLOW), '--alias', 'slow', '-np', '1',
      '--request-queue-size', '0']);
    ollama = new Ollama({ host: srv.url });
  });
  after(async () => srv.stop());

  test('aborting the stream cancels the generation and frees the one instance', async () => {
    const stream = await ollama.chat({ model: 'slow', messages: user('Go on'), stream: true, logit_bias: NO_EOS,
      options: { num_predict: 3000 } });
    for await (const part of stream) {
      assert.equal(part.done, false);
      stream.abort(); // the client's way to stop a stream: its fetch is aborted, the socket closed
      break;
    }
    const t0 = Date.now();
    // With no queue, a request gets 429 for as long as the instance stays busy.
    let answer = null;
    for (let i = 0; i < 50 && !answer; i++) {
      try {
        answer = await ollama.chat({ model: 'slow', messages: user('x'), stream: false, options: { num_predict: 2 } });
      } catch (err) {
        assert.equal(err.status_code, 429);
        await new Promise((ok) => setTimeout(ok, 100));
      }
    }
    assert.ok(answer?.done, 'the instance was freed');
    assert.ok(Date.now() - t0 < 3000, `freed after ${Date.now() - t0} ms`);
  });
});

describe('ollama api: generate with suffix on a vocabulary with FIM tokens', { skip: !hasShared && 'skip: ../shared is absent' }, () => {
  let srv, ollama;
  before(async () => {
    const coder = synthModel('fim', ['--arch', 'llama', '--layers', '1', '--embd', '64', '--heads', '4',
      '--heads-kv', '2', '--ffn', '128', '--ctx', '512', '--vocab-from',
      path.join(sharedDir, 'models', 'vocab', 'ggml-vocab-starcoder.gguf')]);
    srv = await startServer(['--threads', '1', '-m', coder, '--alias', 'coder']);
    ollama = new Ollama({ host: srv.url });
  });
  after(async () => srv?.stop());

  test('prompt and suffix are laid out FIM_PRE prompt FIM_SUF suffix FIM_MID', async () => {
    const r = await ollama.generate({ model: 'coder', prompt: 'def f(', suffix: '):\n', stream: false,
      options: { temperature: 0, num_predict: 3 } });
    assert.equal(r.done, true);
    const tok = async (content) => (await post(srv, '/tokenize', { content, parse_special: false })).json.tokens;
    const expected = [...await tok('def f('), ...await tok('):\n')];
    assert.equal(r.prompt_eval_count, expected.length + 3);
    const detok = await post(srv, '/detokenize', { tokens: r.context.slice(0, r.prompt_eval_count) });
    assert.equal(detok.json.content, '<fim_prefix>def f(<fim_suffix>):\n<fim_middle>');
    assert.ok((await ollama.show({ model: 'coder' })).capabilities.includes('insert'));
  });
});

describe('ollama api on real models (stories260K, tiny_bert)', { skip: !hasShared && 'skip: ../shared is absent' }, () => {
  let srv, ollama, golden, bertExpected;
  before(async () => {
    golden = JSON.parse(readFileSync(path.join(sharedDir, 'golden', 'stories260K.greedy.json'), 'utf8'));
    bertExpected = JSON.parse(readFileSync(path.join(sharedDir, 'models', 'bert', 'tiny_bert.expected.json'), 'utf8'));
    srv = await startServer(['--threads', '1', '-m', path.join(sharedDir, 'models', 'llama', 'stories260K.gguf'),
      '-m', path.join(sharedDir, 'models', 'llama', 'stories260K-Q4_0.gguf'),
      '-m', path.join(sharedDir, 'models', 'bert', 'tiny_bert.gguf')]);
    ollama = new Ollama({ host: srv.url });
  });
  after(async () => srv?.stop());

  test('raw greedy generate equals llama-server\'s output; context holds the prompt and answer tokens', async () => {
    for (const c of golden.cases) {
      const r = await ollama.generate({ model: 'stories260K', prompt: c.prompt, raw: true, stream: false,
        options: { temperature: 0, num_predict: c.n_predict } });
      assert.equal(r.response, c.content, `response to ${JSON.stringify(c.prompt)}`);
      assert.deepEqual(r.context, [...c.prompt_tokens, ...c.tokens]);
      assert.equal(r.done_reason, 'length');
      assert.equal(r.eval_count, c.n_predict);
      assert.equal(r.prompt_eval_count, c.prompt_tokens.length);
    }
  });

  test('list: the quantization from the file name, family llama; tiny_bert is an embedding model', async () => {
    const list = await ollama.list();
    const q4 = list.models.find((m) => m.name === 'stories260K-Q4_0:latest');
    assert.equal(q4.details.quantization_level, 'Q4_0');
    assert.equal(q4.details.family, 'llama');
    assert.equal(list.models.find((m) => m.name === 'stories260K:latest').details.quantization_level, 'unknown');
    assert.deepEqual(list.models.find((m) => m.name === 'tiny_bert:latest').capabilities, ['embedding']);
  });

  test('/api/embed and /api/embeddings match the reference vectors', async () => {
    const cosine = (a, b) => {
      let ab = 0, aa = 0, bb = 0;
      for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
      return ab / Math.sqrt(aa * bb);
    };
    const cases = bertExpected.cases.slice(0, 3);
    const r = await ollama.embed({ model: 'tiny_bert', input: cases.map((c) => c.text) });
    assert.equal(r.embeddings.length, cases.length);
    cases.forEach((c, i) => assert.ok(cosine(r.embeddings[i], c.embedding) >= 0.999, `case ${i}`));
    assert.equal(r.prompt_eval_count, cases.reduce((s, c) => s + c.token_ids.length, 0));
    const old = await ollama.embeddings({ model: 'tiny_bert:latest', prompt: cases[0].text });
    assert.ok(cosine(old.embedding, cases[0].embedding) >= 0.999);
  });
});
