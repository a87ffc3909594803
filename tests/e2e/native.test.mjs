// llama.cpp server compatibility: /completion, /v1/completions, /tokenize, /detokenize,
// /apply-template, /props, /slots, /metrics, /infill and the router endpoints, checked
// against llama-server's own greedy output for stories260K (../shared/golden) when present,
// and the flags and disabled endpoints on a synthetic model otherwise.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, errorOf, hasShared, sharedDir } from './lib/server.mjs';
import { synthModel, SMALL, SLOW } from './lib/models.mjs';

const stories = path.join(sharedDir, 'models', 'llama', 'stories260K.gguf');
const goldenPath = path.join(sharedDir, 'golden', 'stories260K.greedy.json');

async function post(srv, route, body) {
  const r = await fetch(`${srv.url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // SSE or text bodies stay in text
  }
  return { status: r.status, json, text, headers: r.headers };
}

async function get(srv, route) {
  const r = await fetch(`${srv.url}${route}`);
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // Prometheus text
  }
  return { status: r.status, json, text, headers: r.headers };
}

// The `data:` payloads of an SSE body, in order.
function sseData(text) {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice(6));
}

// Prometheus text exposition: comments, or `name{labels} value`.
function parsePrometheus(text) {
  const samples = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.eE+-]+|NaN|[+-]Inf)$/.exec(line);
    assert.ok(m, `not a Prometheus sample line: ${JSON.stringify(line)}`);
    samples.set(m[1] + (m[2] ?? ''), Number(m[3]));
  }
  return samples;
}

function assertError(res, status, code) {
  assert.equal(res.status, status, res.text);
  const e = errorOf(res.json);
  assert.equal(typeof e.message, 'string');
  if (code !== undefined) assert.equal(e.code, code);
  return e;
}

describe('llama.cpp compatibility on stories260K', { skip: !hasShared && 'skip: ../shared is absent' }, () => {
  let srv, golden, modelsDir;
  before(async () => {
    golden = JSON.parse(readFileSync(goldenPath, 'utf8'));
    modelsDir = mkdtempSync(path.join(os.tmpdir(), 'llamapi-native-'));
    symlinkSync(path.join(sharedDir, 'models', 'llama', 'stories260K-Q8_0.gguf'), path.join(modelsDir, 'extra.gguf'));
    srv = await startServer(['--threads', '1', '-m', stories, '-np', '2', '--metrics', '--temp', '0.5',
      '--top-k', '7', '--models-dir', modelsDir]);
  });
  after(async () => {
    await srv?.stop();
  });

  test('greedy /completion of the prompt tokens equals llama-server (content and tokens)', async () => {
    for (const c of golden.cases) {
      const r = await post(srv, '/completion', { prompt: c.prompt_tokens, n_predict: c.n_predict, temperature: 0,
        return_tokens: true });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.content, c.content, `content of ${JSON.stringify(c.prompt)}`);
      assert.deepEqual(r.json.tokens, c.tokens, `tokens of ${JSON.stringify(c.prompt)}`);
      assert.equal(r.json.stop, true);
      assert.equal(r.json.stop_type, c.stop_type);
      assert.equal(r.json.stopping_word, '');
      assert.equal(r.json.tokens_predicted, c.n_predict);
      assert.equal(r.json.tokens_evaluated, c.prompt_tokens.length);
      assert.equal(r.json.model, 'stories260K');
      assert.equal(r.json.truncated, false);
      assert.equal(r.json.generation_settings.n_predict, c.n_predict);
      assert.equal(r.json.generation_settings.temperature, 0);
      for (const k of ['prompt_n', 'prompt_ms', 'predicted_n', 'predicted_ms', 'cache_n']) {
        assert.equal(typeof r.json.timings[k], 'number', k);
      }
      assert.equal(r.json.timings.predicted_n, c.n_predict);
    }
  });

  test('a text prompt gets BOS and special tokens like llama-server; /completions is an alias', async () => {
    const c = golden.cases[0];
    const r = await post(srv, '/completions', { prompt: c.prompt, n_predict: c.n_predict, temperature: 0 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.content, c.content);
    assert.equal(r.json.tokens_evaluated, c.prompt_tokens.length);
    assert.deepEqual(r.json.tokens, [], 'tokens only with return_tokens');
    assert.match(r.json.prompt, /Once upon a time$/);
    // Mixed arrays: ids then text (no BOS for text that is not first; SPM adds its space).
    const mixed = await post(srv, '/completion', { prompt: [1, 'Once upon a time'], n_predict: c.n_predict,
      temperature: 0 });
    assert.equal(mixed.status, 200, mixed.text);
    assert.equal(mixed.json.tokens_evaluated, c.prompt_tokens.length);
    assert.equal(mixed.json.content, c.content);
  });

  test('n_probs gives completion_probabilities in llama.cpp shape matching its log-probabilities', async () => {
    const c = golden.cases[0];
    const r = await post(srv, '/completion', { prompt: c.prompt_tokens, n_predict: 16, temperature: 0, n_probs: 5 });
    assert.equal(r.status, 200, r.text);
    const probs = r.json.completion_probabilities;
    assert.equal(probs.length, 16);
    for (let i = 0; i < probs.length; i++) {
      const p = probs[i];
      const want = c.top_logprobs[i];
      assert.equal(p.id, want.token);
      assert.equal(typeof p.token, 'string');
      assert.ok(Array.isArray(p.bytes));
      assert.deepEqual(Buffer.from(p.bytes).toString('utf8'), p.token);
      assert.equal(p.top_logprobs.length, 5);
      assert.equal(p.top_logprobs[0].id, want.top[0][0]);
      assert.ok(Math.abs(p.logprob - want.top[0][1]) < 0.01, `logprob ${p.logprob} vs ${want.top[0][1]}`);
      for (let k = 0; k < 5; k++) {
        assert.ok(Math.abs(p.top_logprobs[k].logprob - want.top[k][1]) < 0.01, `step ${i} top ${k}`);
      }
    }
  });

  test('streaming /completion: content deltas, stop:true result last, no [DONE]', async () => {
    const c = golden.cases[1];
    const r = await post(srv, '/completion', { prompt: c.prompt_tokens, n_predict: c.n_predict, temperature: 0,
      stream: true });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/event-stream/);
    const events = sseData(r.text);
    assert.ok(events.length >= 2);
    assert.ok(!events.includes('[DONE]'));
    const parsed = events.map((e) => JSON.parse(e));
    const last = parsed.at(-1);
    assert.equal(last.stop, true);
    assert.equal(last.stop_type, 'limit');
    assert.equal(typeof last.timings.predicted_ms, 'number');
    const partial = parsed.slice(0, -1);
    assert.ok(partial.every((p) => p.stop === false));
    assert.equal(partial.map((p) => p.content).join(''), c.content);
    assert.deepEqual(partial.flatMap((p) => p.tokens), c.tokens);
  });

  test('stop strings: stop_type word, stopping_word, text before it', async () => {
    const c = golden.cases[0];
    const r = await post(srv, '/completion', { prompt: c.prompt, n_predict: 64, temperature: 0, stop: ['Lily'] });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.stop_type, 'word');
    assert.equal(r.json.stopping_word, 'Lily');
    assert.equal(r.json.content, c.content.slice(0, c.content.indexOf('Lily')));
  });

  test('logit_bias: [[id, false]], [["text", false]] and {"id": -100} all ban the greedy token', async () => {
    const c = golden.cases[0];
    const first = c.tokens[0];
    for (const logit_bias of [[[first, false]], [[',', false]], { [first]: -100 }]) {
      const r = await post(srv, '/completion', { prompt: c.prompt_tokens, n_predict: 4, temperature: 0,
        return_tokens: true, logit_bias });
      assert.equal(r.status, 200, r.text);
      assert.notEqual(r.json.tokens[0], first, JSON.stringify(logit_bias));
      assert.ok(!r.json.tokens.includes(first));
    }
  });

  test('grammar and json_schema constrain the output (stop_type eos when the grammar is complete)', async () => {
    const g = await post(srv, '/completion', { prompt: 'Once upon a time', n_predict: 20, temperature: 0,
      grammar: 'root ::= " there was a " ("cat" | "dog")' });
    assert.equal(g.status, 200, g.text);
    assert.match(g.json.content, /^ there was a (cat|dog)$/);
    assert.equal(g.json.stop_type, 'eos');
    assert.match(g.json.generation_settings.grammar, /root ::=/);
    const j = await post(srv, '/completion', { prompt: 'Once upon a time', n_predict: 60, temperature: 0,
      json_schema: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'],
        additionalProperties: false } });
    assert.equal(j.status, 200, j.text);
    const v = JSON.parse(j.json.content);
    assert.deepEqual(Object.keys(v), ['a']);
    assert.ok(Number.isInteger(v.a));
  });

  test('repeating a prompt reuses the cache: timings.cache_n > 0', async () => {
    const prompt = 'Lily and Tom went to the park. They saw a big dog.';
    const a = await post(srv, '/completion', { prompt, n_predict: 8, temperature: 0, cache_prompt: true });
    const b = await post(srv, '/completion', { prompt, n_predict: 8, temperature: 0, cache_prompt: true });
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    assert.ok(b.json.timings.cache_n > 0, JSON.stringify(b.json.timings));
    assert.equal(b.json.tokens_cached, b.json.timings.cache_n);
    assert.equal(b.json.timings.prompt_n + b.json.timings.cache_n, b.json.tokens_evaluated);
    assert.equal(b.json.content, a.json.content);
  });

  test('/v1/completions greedy equals llama-server; streaming text_completion chunks end with [DONE]', async () => {
    const c = golden.cases[0];
    const r = await post(srv, '/v1/completions', { model: 'stories260K', prompt: c.prompt, temperature: 0,
      max_tokens: 64 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.object, 'text_completion');
    assert.equal(r.json.choices[0].text, c.content);
    assert.equal(r.json.choices[0].finish_reason, 'length');
    assert.equal(r.json.usage.prompt_tokens, c.prompt_tokens.length);
    assert.equal(r.json.usage.completion_tokens, 64);
    assert.equal(r.json.usage.total_tokens, c.prompt_tokens.length + 64);
    const s = await post(srv, '/v1/completions', { model: 'stories260K', prompt: [c.prompt], temperature: 0,
      max_tokens: 64, stream: true, stream_options: { include_usage: true } });
    const events = sseData(s.text);
    assert.equal(events.at(-1), '[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    assert.ok(chunks.every((ch) => ch.object === 'text_completion'));
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, []);
    assert.equal(usage.usage.completion_tokens, 64);
    const withChoice = chunks.filter((ch) => ch.choices.length);
    assert.equal(withChoice.map((ch) => ch.choices[0].text).join(''), c.content);
    assert.equal(withChoice.at(-1).choices[0].finish_reason, 'length');
  });

  test('/tokenize equals llama-server prompt_tokens; pieces; /detokenize round trip', async () => {
    for (const c of golden.cases) {
      const r = await post(srv, '/tokenize', { content: c.prompt, add_special: true });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.tokens, c.prompt_tokens);
      const plain = await post(srv, '/tokenize', { content: c.prompt });
      assert.deepEqual(plain.json.tokens, c.prompt_tokens.slice(1), 'add_special defaults to false');
      const d = await post(srv, '/detokenize', { tokens: plain.json.tokens });
      assert.equal(d.status, 200);
      assert.equal(d.json.content.trimStart(), c.prompt);
      const again = await post(srv, '/tokenize', { content: d.json.content.trimStart() });
      assert.deepEqual(again.json.tokens, plain.json.tokens);
    }
    const p = await post(srv, '/tokenize', { content: 'Once upon', with_pieces: true });
    assert.deepEqual(p.json.tokens, [{ id: 403, piece: ' Once' }, { id: 407, piece: ' upon' }]);
    const special = await post(srv, '/tokenize', { content: '<s>Hi', parse_special: true });
    const literal = await post(srv, '/tokenize', { content: '<s>Hi', parse_special: false });
    assert.equal(special.json.tokens[0], 1);
    assert.ok(!literal.json.tokens.includes(1));
  });

  test('/apply-template renders the chat template into {prompt}', async () => {
    const r = await post(srv, '/apply-template', { messages: [{ role: 'user', content: 'Tell me a story' }] });
    assert.equal(r.status, 200, r.text);
    assert.equal(typeof r.json.prompt, 'string');
    assert.ok(r.json.prompt.includes('Tell me a story'));
    assertError(await post(srv, '/apply-template', { messages: 'x' }), 400, 'invalid_type');
  });

  test('/props: defaults from the flags, slots, template, special tokens', async () => {
    const r = await get(srv, '/props');
    assert.equal(r.status, 200, r.text);
    const p = r.json;
    assert.equal(p.total_slots, 2);
    assert.equal(p.model_alias, 'stories260K');
    assert.ok(p.model_path.endsWith('stories260K.gguf'));
    assert.equal(typeof p.chat_template, 'string');
    assert.equal(p.bos_token, '<s>');
    assert.equal(p.eos_token, '</s>');
    assert.deepEqual(p.modalities, { vision: false, audio: false });
    assert.match(p.build_info, /^llamapi-/);
    const dgs = p.default_generation_settings;
    assert.equal(typeof dgs.n_ctx, 'number');
    assert.ok(Math.abs(dgs.params.temperature - 0.5) < 1e-6, 'from --temp');
    assert.equal(dgs.params.top_k, 7, 'from --top-k');
    assert.equal(dgs.params.n_predict, -1);
    const byName = await get(srv, '/props?model=stories260K');
    assert.equal(byName.status, 200);
    // One -m model: any name is served by it, as llama-server serves it.
    assert.equal((await get(srv, '/props?model=nope')).status, 200);
  });

  test('/slots lists one entry per instance; fail_on_no_slot with a free slot is 200', async () => {
    const r = await get(srv, '/slots');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.length, 2);
    assert.deepEqual(r.json.map((s) => s.id), [0, 1]);
    for (const s of r.json) {
      assert.equal(typeof s.n_ctx, 'number');
      assert.equal(s.is_processing, false);
      // As llama-server: an idle slot shows no task fields (params, next_token).
      assert.equal(s.params, undefined);
      assert.equal(s.next_token, undefined);
    }
    assert.equal((await get(srv, '/slots?fail_on_no_slot=1')).status, 200);
  });

  test('/metrics is Prometheus text with llama.cpp names and per-model gauges', async () => {
    await post(srv, '/completion', { prompt: 'Hello', n_predict: 4, temperature: 0 });
    const r = await get(srv, '/metrics');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/plain/);
    const m = parsePrometheus(r.text);
    for (const name of ['prompt_tokens_total', 'tokens_predicted_total', 'prompt_tokens_seconds',
      'predicted_tokens_seconds', 'requests_processing', 'requests_deferred', 'n_decode_total']) {
      assert.ok(m.has(`llamacpp:${name}`), name);
    }
    assert.ok(m.get('llamacpp:tokens_predicted_total') >= 4);
    assert.ok(m.get('llamacpp:prompt_tokens_total') > 0);
    assert.ok(m.get('llamacpp:n_decode_total') > 0);
    assert.equal(m.get('llamapi_queue_depth{model="stories260K"}'), 0);
    assert.equal(m.get('llamapi_instances{model="stories260K",state="idle"}'), 2);
    assert.equal(m.get('llamapi_requests_rejected_total{reason="queue_full"}'), 0);
    assert.match(r.text, /# TYPE llamacpp:tokens_predicted_total counter/);
  });

  test('error paths name the field', async () => {
    assertError(await post(srv, '/completion', { n_predict: 4 }), 400, 'missing_required_parameter');
    assertError(await post(srv, '/completion', { prompt: [1, 99999] }), 400, 'invalid_value');
    assertError(await post(srv, '/completion', { prompt: [] }), 400, 'invalid_value');
    // A list of prompts is answered whole as an array, as llama-server does; streamed, refused.
    const both = await post(srv, '/completion', { prompt: ['a', [1, 2]], n_predict: 2 });
    assert.equal(both.status, 200);
    assert.deepEqual(both.json.map((r) => r.index), [0, 1]);
    assert.ok(both.json.every((r) => typeof r.content === 'string' && typeof r.has_new_line === 'boolean'));
    assertError(await post(srv, '/completion', { prompt: ['a', 'b'], stream: true }), 400, 'invalid_value');
    assertError(await post(srv, '/completion', { prompt: 7.5 }), 400, 'invalid_type');
    assertError(await post(srv, '/completion', { prompt: 'x', n_probs: 100 }), 400);
    assertError(await post(srv, '/completion', { prompt: 'x', temperature: 'hot' }), 400, 'invalid_type');
    assertError(await post(srv, '/completion', { prompt: 'x', logit_bias: 3 }), 400, 'invalid_type');
    assertError(await post(srv, '/completion', { prompt: 'x', logit_bias: [[1]] }), 400, 'invalid_value');
    assertError(await post(srv, '/completion', { prompt: 'x', model: 7 }), 400, 'invalid_type');
    assertError(await post(srv, '/completion', { prompt: 'x', grammar: 'root ::= (' }), 400, 'invalid_grammar');
    const e = assertError(await post(srv, '/infill', { input_prefix: 'def f(', input_suffix: ')' }), 501);
    assert.equal(e.type, 'not_implemented_error');
    assertError(await post(srv, '/detokenize', { tokens: [1, -3] }), 400, 'invalid_value');
    assertError(await post(srv, '/tokenize', {}), 400, 'missing_required_parameter');
    // Without a model, as llama-server: the first chat model answers.
    assert.equal((await post(srv, '/v1/completions', { prompt: 'x', max_tokens: 2 })).status, 200);
    assertError(await post(srv, '/v1/completions', { model: 'stories260K', prompt: 'x', n: 2 }), 400);
    const big = await post(srv, '/completion', { prompt: Array(5000).fill(261), n_predict: 1 });
    assertError(big, 400, 'context_length_exceeded');
    const zero = await post(srv, '/completion', { prompt: 'Hello', n_predict: 0 });
    assert.equal(zero.status, 200);
    assert.equal(zero.json.content, '');
    assert.equal(zero.json.tokens_predicted, 0);
  });

  test('router: /models lists loaded and unloaded GGUFs; load and unload by name', async () => {
    let r = await get(srv, '/models');
    assert.equal(r.status, 200);
    const byId = (id) => r.json.data.find((m) => m.id === id);
    assert.equal(byId('stories260K').status.value, 'loaded');
    assert.equal(byId('extra').status.value, 'unloaded');
    const load = await post(srv, '/models/load', { model: 'extra' });
    assert.equal(load.status, 200, load.text);
    assert.deepEqual(load.json, { success: true });
    r = await get(srv, '/models');
    assert.equal(byId('extra').status.value, 'loaded');
    const done = await post(srv, '/completion', { model: 'extra', prompt: 'Hello', n_predict: 4, temperature: 0 });
    assert.equal(done.status, 200, done.text);
    assert.equal(done.json.model, 'extra');
    assertError(await post(srv, '/models/load', { model: 'extra' }), 400, 'model_already_loaded');
    const unload = await post(srv, '/models/unload', { model: 'extra' });
    assert.deepEqual(unload.json, { success: true });
    r = await get(srv, '/models');
    assert.equal(byId('extra').status.value, 'unloaded');
    assertError(await post(srv, '/models/unload', { model: 'extra' }), 400, 'model_not_loaded');
    assertError(await post(srv, '/models/load', { model: 'missing' }), 404, 'model_not_found');
    assertError(await post(srv, '/models/load', {}), 400, 'missing_required_parameter');
  });
});

describe('router mode autoload', { skip: !hasShared && 'skip: ../shared is absent' }, () => {
  let dir;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'llamapi-auto-'));
    symlinkSync(stories, path.join(dir, 'auto.gguf'));
  });

  test('without -m a request naming NAME under --models-dir loads NAME.gguf first', async () => {
    const srv = await startServer(['--threads', '1', '--models-dir', dir]);
    try {
      assertError(await post(srv, '/completion', { prompt: 'Hello', n_predict: 2 }), 404, 'model_not_found');
      const r = await post(srv, '/completion', { model: 'auto', prompt: 'Hello', n_predict: 2, temperature: 0 });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.model, 'auto');
      const models = await get(srv, '/models');
      assert.equal(models.json.data.find((m) => m.id === 'auto').status.value, 'loaded');
      await post(srv, '/models/unload', { model: 'auto' });
      const chat = await post(srv, '/v1/chat/completions', { model: 'auto', max_tokens: 2,
        messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(chat.status, 200, chat.text);
      assertError(await post(srv, '/completion', { model: '../auto', prompt: 'x' }), 404, 'model_not_found');
    } finally {
      await srv.stop();
    }
  });

  test('--no-models-autoload keeps unknown names 404', async () => {
    const srv = await startServer(['--threads', '1', '--models-dir', dir, '--no-models-autoload']);
    try {
      assertError(await post(srv, '/completion', { model: 'auto', prompt: 'Hello' }), 404, 'model_not_found');
      assertError(await post(srv, '/v1/chat/completions', { model: 'auto',
        messages: [{ role: 'user', content: 'hi' }] }), 404, 'model_not_found');
    } finally {
      await srv.stop();
    }
  });
});

describe('--models-max evicts the least recently used idle model', () => {
  let dir, srv;
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'llamapi-lru-'));
    const slow = synthModel('slow', SLOW); // slow enough that two streams outlast a load
    for (const name of ['a', 'b', 'c']) symlinkSync(slow, path.join(dir, `${name}.gguf`));
    srv = await startServer(['--threads', '1', '--models-dir', dir, '--models-max', '2']);
  });
  after(async () => srv && (await srv.stop()));

  const use = async (model) => {
    const r = await post(srv, '/completion', { model, prompt: 'Hello', n_predict: 1 });
    assert.equal(r.status, 200, r.text);
  };
  const loaded = async () => (await get(srv, '/models')).json.data
    .filter((m) => m.status.value === 'loaded').map((m) => m.id).sort();

  test('a third model unloads the one used longest ago, not the one used last', async () => {
    await use('a');
    await use('b');
    assert.deepEqual(await loaded(), ['a', 'b']);
    await use('a'); // now b is the least recently used
    await use('c');
    assert.deepEqual(await loaded(), ['a', 'c']);
    const r = await post(srv, '/models/load', { model: 'b' });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(await loaded(), ['b', 'c'], 'a was used before c');
  });

  test('when every loaded model is busy the load is refused and nothing is unloaded', async () => {
    const streams = ['b', 'c'].map((model) => {
      const ac = new AbortController();
      const done = fetch(`${srv.url}/completion`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, prompt: 'Hello', n_predict: 100000, ignore_eos: true, stream: true }),
        signal: ac.signal,
      }).then(async (res) => {
        const reader = res.body.getReader();
        await reader.read();
        return reader;
      });
      return { ac, done };
    });
    const readers = await Promise.all(streams.map((s) => s.done)); // both are generating
    const e = assertError(await post(srv, '/models/load', { model: 'a' }), 400, 'model_load_failed');
    assert.match(e.message, /--models-max/);
    // A request that would autoload it is told to come back, not that the model is unknown.
    const auto = await post(srv, '/completion', { model: 'a', prompt: 'Hello', n_predict: 1 });
    assertError(auto, 503, 'models_busy');
    assert.equal(auto.headers.get('retry-after'), '1');
    assert.deepEqual(await loaded(), ['b', 'c']);
    for (const s of streams) s.ac.abort();
    await Promise.all(readers.map((rd) => rd.cancel().catch(() => {})));
  });
});

describe('/infill on a model with FIM tokens', { skip: !hasShared && 'skip: ../shared is absent' }, () => {
  let srv;
  before(async () => {
    // StarCoder's vocabulary has FIM prefix/suffix/middle but no repo or file-separator token.
    const coder = synthModel('fim', ['--arch', 'llama', '--layers', '1', '--embd', '64', '--heads', '4',
      '--heads-kv', '2', '--ffn', '128', '--ctx', '512', '--vocab-from',
      path.join(sharedDir, 'models', 'vocab', 'ggml-vocab-starcoder.gguf')]);
    srv = await startServer(['--threads', '1', '-m', coder, '--alias', 'coder']);
  });
  after(async () => {
    await srv?.stop();
  });

  test('llama-server FIM layout (extra chunks as snippets without FIM_SEP), then generation', async () => {
    const r = await post(srv, '/infill', { input_prefix: 'def f(', input_suffix: '):\n', prompt: 'x',
      input_extra: [{ filename: 'a.py', text: 'y = 1\n' }], n_predict: 3, temperature: 0, return_tokens: true });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.prompt, '\n\n--- snippet ---\n\ny = 1\n<fim_prefix>def f(x<fim_suffix>):\n<fim_middle>');
    // Each part is tokenized alone (as llama-server does), so the count is not that of the joined text.
    const parts = ['\n\n--- snippet ---\n\n', 'y = 1\n', 'def f(', 'x', '):\n'];
    let n = 3; // FIM_PRE, FIM_SUF, FIM_MID
    for (const content of parts) n += (await post(srv, '/tokenize', { content, parse_special: false })).json.tokens.length;
    assert.equal(r.json.tokens_evaluated, n);
    assert.ok(r.json.tokens.length >= 1 && r.json.tokens.length <= 3);
    assertError(await post(srv, '/infill', { input_extra: 'x' }), 400, 'invalid_type');
    assertError(await post(srv, '/infill', { input_prefix: 3 }), 400, 'invalid_type');
  });
});

describe('llama-server flags and disabled endpoints', () => {
  let srv;
  before(async () => {
    const small = synthModel('small', SMALL);
    srv = await startServer(['--threads', '1', '-m', small, '--alias', 'small', '--no-slots', '-ngl', '99',
      '-fa', 'on', '-b', '512', '-ub', '256', '--jinja', '--cont-batching', '--no-ui', '-n', '5', '-s', '42',
      '--pooling', 'mean', '--reasoning-format', 'none'], { env: { LLAMA_ARG_CTX_SIZE: '512' } });
  });
  after(async () => {
    await srv?.stop();
  });

  test('GPU flags are accepted with a notice; LLAMA_ARG_* variables apply', async () => {
    assert.match(srv.log(), /-ngl|--n-gpu-layers/);
    assert.match(srv.log(), /no effect/);
    const p = await get(srv, '/props');
    assert.equal(p.status, 200, p.text);
    assert.equal(p.json.default_generation_settings.n_ctx, 512);
    assert.equal(p.json.default_generation_settings.params.n_predict, 5, 'from -n');
    assert.equal(p.json.default_generation_settings.params.seed, 42, 'from -s');
  });

  test('a stop string ends the answer at the token that completed it, in the count too', async () => {
    const body = { prompt: 'hello', temperature: 0, n_predict: 40, ignore_eos: true, n_probs: 1 };
    const full = await post(srv, '/completion', body);
    assert.equal(full.status, 200, full.text);
    const probs = full.json.completion_probabilities;
    assert.equal(probs.length, 40);
    // A stop string: the text of a later token that is plain ASCII, found by bytes.
    const k = probs.findIndex((p, i) => i >= 10 && /^[\x21-\x7e]+$/.test(p.token));
    assert.ok(k > 0, 'the answer has an ASCII token to stop at');
    const bytes = Buffer.concat(probs.map((p) => Buffer.from(p.bytes)));
    const stop = Buffer.from(probs[k].token);
    const at = bytes.indexOf(stop);
    let end = 0, n = 0;
    while (end < at + stop.length) end += probs[n++].bytes.length; // tokens up to the stop's end
    const r = await post(srv, '/completion', { ...body, n_probs: 0, stop: [probs[k].token] });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.stop_type, 'word');
    // Content is text (bytes that are not UTF-8 show as U+FFFD), so compare it as text.
    const rest = full.json.content.slice(r.json.content.length);
    assert.ok(full.json.content.startsWith(r.json.content) && rest.startsWith(probs[k].token),
      'the content is everything before the first occurrence of the stop string');
    assert.ok(!r.json.content.includes(probs[k].token));
    assert.equal(r.json.tokens_predicted, n, 'tokens after the stop are not counted');
    assert.equal(r.json.timings.predicted_n, n);
  });

  test('a streamed stop ends with the stop string itself in stopping_word and generation_settings', async () => {
    // The stop strings point into the request body, which a stream outlives: the final
    // chunk once showed freed memory ("Content-Type", control bytes) in both fields.
    const body = { prompt: 'hello', temperature: 0, n_predict: 40, ignore_eos: true, n_probs: 1 };
    const full = await post(srv, '/completion', body);
    assert.equal(full.status, 200, full.text);
    const tok = full.json.completion_probabilities.find((p, i) => i >= 5 && /^[\x21-\x7e]+$/.test(p.token));
    assert.ok(tok, 'the answer has an ASCII token to stop at');
    const stop = [tok.token, 'never-in-the-answer-' + 'z'.repeat(40)];
    for (let i = 0; i < 3; i++) {
      const [s, other] = await Promise.all([
        post(srv, '/completion', { ...body, n_probs: 0, stop, stream: true }),
        post(srv, '/tokenize', { content: 'x'.repeat(200) }),
      ]);
      assert.equal(s.status, 200, s.text);
      assert.equal(other.status, 200);
      const last = JSON.parse(sseData(s.text).at(-1));
      assert.equal(last.stop, true);
      assert.equal(last.stop_type, 'word');
      assert.equal(last.stopping_word, tok.token);
      assert.deepEqual(last.generation_settings.stop, stop);
    }
  });

  test('/v1/completions logprobs: tokens, token_logprobs, top_logprobs, text_offset; streamed too', async () => {
    const body = { model: 'small', prompt: 'hello', temperature: 0, max_tokens: 8, logprobs: 3,
      logit_bias: { 2: -100 } };
    const r = await post(srv, '/v1/completions', body);
    assert.equal(r.status, 200, r.text);
    const lp = r.json.choices[0].logprobs;
    assert.equal(lp.tokens.length, r.json.usage.completion_tokens);
    assert.equal(lp.token_logprobs.length, lp.tokens.length);
    let offset = 0;
    for (let i = 0; i < lp.tokens.length; i++) {
      assert.equal(lp.text_offset[i], offset);
      offset += [...lp.tokens[i]].length;
      const alts = Object.entries(lp.top_logprobs[i]);
      assert.ok(alts.length >= 1 && alts.length <= 3);
      const best = Math.max(...alts.map(([, v]) => v));
      assert.ok(Math.abs(best - lp.token_logprobs[i]) < 1e-6, 'greedy picks the most likely');
    }
    const s = await post(srv, '/v1/completions', { ...body, stream: true });
    const chunks = sseData(s.text).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
    const streamed = chunks.flatMap((c) => c.choices[0]?.logprobs?.tokens ?? []);
    assert.deepEqual(streamed, lp.tokens);
    const offsets = chunks.flatMap((c) => c.choices[0]?.logprobs?.text_offset ?? []);
    assert.deepEqual(offsets, lp.text_offset);
    const plain = await post(srv, '/v1/completions', { ...body, logprobs: undefined });
    assert.equal(plain.json.choices[0].logprobs, null);
    assertError(await post(srv, '/v1/completions', { ...body, logprobs: 6 }), 400, 'invalid_value');
  });

  test('-n sets the default n_predict', async () => {
    const r = await post(srv, '/completion', { prompt: 'hello', temperature: 0, logit_bias: { 2: false } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.tokens_predicted, 5);
    assert.equal(r.json.stop_type, 'limit');
  });

  test('ids that split UTF-8 characters still give JSON strings (U+FFFD)', async () => {
    const prompt = Array.from({ length: 200 }, (_, i) => 10 + ((i * 7) % 280));
    const r = await post(srv, '/completion', { prompt, n_predict: 2, n_probs: 2, temperature: 0 });
    assert.equal(r.status, 200, r.text);
    assert.equal(typeof r.json.prompt, 'string');
    assert.equal(r.json.tokens_evaluated, 200);
    const d = await post(srv, '/detokenize', { tokens: prompt });
    assert.equal(d.status, 200, d.text);
    assert.equal(typeof d.json.content, 'string');
  });

  test('--no-slots makes /slots 501; /metrics without --metrics is 501', async () => {
    let e = assertError(await get(srv, '/slots'), 501);
    assert.equal(e.type, 'not_implemented_error');
    e = assertError(await get(srv, '/metrics'), 501);
    assert.equal(e.type, 'not_implemented_error');
  });

  test('--chat-template NAME and --chat-template-file FILE replace the model template', async () => {
    const small = synthModel('small', SMALL);
    const named = await startServer(['--threads', '1', '-m', small, '--chat-template', 'llama3']);
    try {
      const r = await post(named, '/apply-template', { messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(r.status, 200, r.text);
      assert.match(r.json.prompt, /<\|start_header_id\|>user<\|end_header_id\|>/);
      assert.match((await get(named, '/props')).json.chat_template, /start_header_id/);
    } finally {
      await named.stop();
    }
    const dir = mkdtempSync(path.join(os.tmpdir(), 'llamapi-tmpl-'));
    const file = path.join(dir, 't.jinja');
    writeFileSync(file, '{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}');
    const fromFile = await startServer(['--threads', '1', '-m', small, '--chat-template-file', file]);
    try {
      const r = await post(fromFile, '/apply-template', { messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(r.json.prompt, '[user:hi]');
    } finally {
      await fromFile.stop();
    }
    await assert.rejects(startServer(['-m', small, '--chat-template', '{% if %}']), /chat-template/);
    await assert.rejects(startServer(['-m', small, '--chat-template-file', path.join(dir, 'none')]),
      /chat-template-file/);
  });

  test('unknown flag values are refused at start-up', async () => {
    await assert.rejects(startServer(['--pooling', 'sideways']), /pooling/);
    await assert.rejects(startServer(['--temp', 'warm']), /--temp/);
  });
});
