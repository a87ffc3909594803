// The rknn3 platform against the fake runtime (tests/fakes/fake_rknn3.c, two RK1828 devices):
// /v1/platforms with the coprocessors, chat (JSON and SSE with the usage chunk, per-request
// sampling, max_tokens, an end-of-generation token), embeddings and rerank through the host's
// embedding table, two instances (one per device, with the documented warning), a partial
// load, a runtime error, cancellation, and the refusals (unsupported fields, no device,
// another chip).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startServer, errorOf, sharedDir, hasShared } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';
import { rknn3Fake, fakeBoard, rknn3Model, embedRow, l2, readLog, post, tmpDir } from './lib/rknn.mjs';

function close(a, b, eps = 1e-5) {
  assert.equal(a.length, b.length);
  a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) < eps, `[${i}] ${x} vs ${b[i]}`));
}

describe('rknn3 with the fake runtime', () => {
  let srv;
  let logFile;
  const tokGguf = synthModel('small', SMALL);
  before(async () => {
    logFile = path.join(tmpDir('llamapi-rknn3-log-'), 'runtime.log');
    srv = await startServer(['--rknn3-lib', rknn3Fake, '--sysfs-root', fakeBoard()],
      { env: { FAKE_RKNN3_LOG: logFile, FAKE_RKNN3_DEVICES: '2' } });
  });
  after(async () => { await srv.stop(); });

  const load = (id, dir, extra = {}) => post(`${srv.url}/v1/models/load`,
    { model_id: id, model_path: dir, ...extra });
  const chat = (model, extra = {}) => post(`${srv.url}/v1/chat/completions`,
    { model, messages: [{ role: 'user', content: 'Tell me a story about a cat' }], ...extra });
  const unload = (id) => post(`${srv.url}/v1/models/unload`, { model_id: id });

  test('/v1/platforms lists the two RK1828 coprocessors', async () => {
    const p = (await (await fetch(`${srv.url}/v1/platforms`)).json()).platforms
      .find((x) => x.id === 'rknn3');
    assert.equal(p.available, true);
    assert.deepEqual(p.detected_chips, [{ chip_type: 'RK1828', count: 2 }]);
  });

  test('chat: two instances, one per device, with a warning; JSON and SSE', async () => {
    const r = await load('qwen', rknn3Model(tokGguf, { manifest: { chip: 'rk1828' } }),
      { instance_count: 2 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.actual_instance_count, 2);
    for (let i = 0; i < 50 && !/several sessions on one coprocessor may fail/.test(srv.log()); i++)
      await new Promise((res) => setTimeout(res, 20)); // stderr arrives on its own schedule
    assert.match(srv.log(), /several sessions on one coprocessor may fail/);
    const loads = readLog(logFile).filter((l) => l.startsWith('load '));
    assert.ok(loads.some((l) => l.includes('device=0000:01:00.0')));
    assert.ok(loads.some((l) => l.includes('device=0000:02:00.0')));
    assert.ok(readLog(logFile).some((l) => l === "template system='' prefix='' postfix=''"),
      'the runtime template is cleared: the prompt comes rendered');

    const a = await chat('qwen', { temperature: 0.3, top_p: 0.7, top_k: 5, frequency_penalty: 0.5 });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const c = a.body.choices[0];
    assert.ok(c.message.content.length > 0);
    assert.ok(['stop', 'length'].includes(c.finish_reason));
    assert.ok(a.body.usage.completion_tokens >= 1 && a.body.usage.completion_tokens <= 6);
    assert.ok(a.body.usage.prompt_tokens > 5);
    assert.ok(readLog(logFile).some((l) =>
      /^sampling temperature=0.3 top_k=5 top_p=0.7 repeat=1 freq=0.5 presence=0$/.test(l)), 'per-request sampling');
    const again = await chat('qwen', { temperature: 0.3 });
    assert.equal(again.body.choices[0].message.content, c.message.content, 'deterministic');

    const m = await chat('qwen', { max_tokens: 2 });
    assert.equal(m.status, 200);
    assert.equal(m.body.usage.completion_tokens, 2);
    assert.equal(m.body.choices[0].finish_reason, 'length');

    const an = await post(`${srv.url}/v1/messages`, { model: 'qwen', max_tokens: 2,
      messages: [{ role: 'user', content: 'Tell me a story about a cat' }] });
    assert.equal(an.status, 200, JSON.stringify(an.body));
    assert.equal(an.body.usage.output_tokens, 2);
    assert.equal(an.body.stop_reason, 'max_tokens');

    const s = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
      body: JSON.stringify({ model: 'qwen', stream: true, stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'Tell me a story about a cat' }] }) });
    const text = await s.text();
    assert.ok(text.trim().endsWith('data: [DONE]'));
    const chunks = text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    const content = chunks.map((x) => x.choices[0]?.delta?.content ?? '').join('');
    assert.equal(content, c.message.content);
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, []);
    assert.equal(usage.usage.completion_tokens, a.body.usage.completion_tokens);
  });

  test('chat refusals: what the runtime cannot do is 400 unsupported_parameter', async () => {
    for (const [field, extra] of [['grammar', { grammar: 'root ::= "a"' }],
      ['logprobs', { logprobs: true }], ['n', { n: 2 }], ['logit_bias', { logit_bias: { 5: 1 } }],
      ['min_p', { min_p: 0.1 }], ['seed', { seed: 4 }],
      ['response_format', { response_format: { type: 'json_object' } }]]) {
      const r = await chat('qwen', extra);
      assert.equal(r.status, 400, field);
      assert.equal(errorOf(r.body).code, 'unsupported_parameter', field);
      assert.equal(errorOf(r.body).param, field);
      assert.match(errorOf(r.body).message, /rknn3/);
    }
    assert.equal((await post(`${srv.url}/v1/embeddings`, { model: 'qwen', input: 'x' })).status, 400);
    // llama.cpp's /completion runs (our tokenizer, the runtime's sampling) and refuses the same.
    const ok = await post(`${srv.url}/completion`, { model: 'qwen', prompt: 'a cat', n_predict: 2 });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.tokens_predicted, 2);
    for (const [field, extra] of [['grammar', { grammar: 'root ::= "a"' }], ['n_probs', { n_probs: 2 }],
      ['json_schema', { json_schema: { type: 'object' } }], ['seed', { seed: 1 }], ['min_p', { min_p: 0.2 }]]) {
      const r = await post(`${srv.url}/completion`, { model: 'qwen', prompt: 'a cat', ...extra });
      assert.equal(r.status, 400, field);
      assert.equal(errorOf(r.body).code, 'unsupported_parameter', field);
      assert.equal(errorOf(r.body).param, field);
    }
  });

  test('cancel: a client that goes away stops the run; the instance serves again', async () => {
    const slow = await load('slow', rknn3Model(tokGguf, { replyLen: 200, tokenMs: 20, maxCtx: 4096 }));
    assert.equal(slow.status, 200);
    const ctl = new AbortController();
    const res = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', signal: ctl.signal,
      body: JSON.stringify({ model: 'slow', stream: true, messages: [{ role: 'user', content: 'hi' }] }) });
    const reader = res.body.getReader();
    await reader.read();
    ctl.abort();
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    const r = await chat('slow', { max_tokens: 3 });
    assert.equal(r.status, 200);
    assert.ok(Date.now() - t0 < 3000, 'the instance was freed by the stop');
    assert.equal((await unload('slow')).status, 200);
  });

  test('a runtime error is a 500 and the server keeps serving', async () => {
    const tok = await post(`${srv.url}/tokenize`, { model: 'qwen', content: 'cat' });
    assert.equal(tok.status, 200);
    const cat = tok.body.tokens.at(-1);
    assert.equal((await load('err', rknn3Model(tokGguf, { errorToken: cat }))).status, 200);
    const r = await chat('err');
    assert.equal(r.status, 500);
    assert.match(errorOf(r.body).message, /RK182X runtime failed/);
    assert.equal((await chat('qwen', { max_tokens: 1 })).status, 200);
    assert.equal((await unload('err')).status, 200);
  });

  test('embeddings: the mean of the host rows, normalized; float and base64', async () => {
    const r = await load('emb', rknn3Model(tokGguf, { task: 'embedding' }));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const e = await post(`${srv.url}/v1/embeddings`, { model: 'emb', input: ['a cat', 'the dog'] });
    assert.equal(e.status, 200, JSON.stringify(e.body));
    for (const [i, text] of ['a cat', 'the dog'].entries()) {
      const tok = await post(`${srv.url}/tokenize`, { model: 'emb', content: text, add_special: true });
      const ids = tok.body.tokens;
      const mean = new Array(8).fill(0);
      ids.forEach((t) => embedRow(t, 8).forEach((x, h) => { mean[h] += x / ids.length; }));
      close(e.body.data[i].embedding, l2(mean));
    }
    const b = await post(`${srv.url}/v1/embeddings`, { model: 'emb', input: 'a cat', encoding_format: 'base64' });
    const buf = Buffer.from(b.body.data[0].embedding, 'base64');
    close(Array.from({ length: 8 }, (_, i) => buf.readFloatLE(i * 4)), e.body.data[0].embedding);
    assert.equal((await chat('emb')).status, 400);
    assert.ok(readLog(logFile).some((l) => /prefill_only=1 rc=0/.test(l)));
    assert.equal((await unload('emb')).status, 200);
  });

  test('rerank: one score per document, sorted', async () => {
    assert.equal((await load('rr', rknn3Model(tokGguf, { task: 'reranker' }))).status, 200);
    const docs = ['a cat sat', 'dogs run fast', 'the weather today', 'cats and dogs'];
    const r = await post(`${srv.url}/v1/rerank`, { model: 'rr', query: 'cat', documents: docs });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.results.length, docs.length);
    const scores = r.body.results.map((x) => x.relevance_score);
    assert.deepEqual([...scores].sort((x, y) => y - x), scores);
    assert.ok(scores.every((x) => x >= -5 / 8 && x <= 5 / 8));
    assert.deepEqual(r.body.results.map((x) => x.index).sort(), [0, 1, 2, 3]);
    const again = await post(`${srv.url}/v1/rerank`, { model: 'rr', query: 'cat', documents: docs });
    assert.deepEqual(again.body.results, r.body.results);
    assert.equal((await unload('rr')).status, 200);
  });

  test('partial load: the second context fails', async () => {
    const r = await load('part', rknn3Model(tokGguf, { failInit: 2 }), { instance_count: 2 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.actual_instance_count, 1);
    assert.match(r.body.message, /partially loaded/);
    assert.equal((await chat('part', { max_tokens: 1 })).status, 200);
    assert.equal((await unload('part')).status, 200);
  });

  test('chat template: the tokenizer file\'s, else the runtime\'s, else ChatML', async (t) => {
    let props = await (await fetch(`${srv.url}/props?model=qwen`)).json();
    assert.match(props.chat_template, /im_start/, 'the tokenizer file carries ChatML');
    const spm = path.join(sharedDir, 'models/vocab/ggml-vocab-llama-spm.gguf');
    if (!hasShared) return t.skip('../shared is absent: no template-less tokenizer file');
    // The same runtime template is ignored while the tokenizer file has one of its own.
    assert.equal((await load('own', rknn3Model(tokGguf, { runtimeTemplate: 1 }))).status, 200);
    props = await (await fetch(`${srv.url}/props?model=own`)).json();
    assert.match(props.chat_template, /im_start/);
    const bare = await load('bare', rknn3Model(spm, { vocab: 32000, runtimeTemplate: 1 }));
    assert.equal(bare.status, 200, JSON.stringify(bare.body));
    props = await (await fetch(`${srv.url}/props?model=bare`)).json();
    assert.match(props.chat_template, /\[\{\{ m\.role \}\}\]/);
    const r = await post(`${srv.url}/apply-template`, { model: 'bare',
      messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.status, 200);
    assert.equal(r.body.prompt, '[user] hi\n[assistant] ');
    assert.equal((await chat('bare', { max_tokens: 2 })).status, 200);
    const plain = await load('plain', rknn3Model(spm, { vocab: 32000 }));
    assert.equal(plain.status, 200);
    props = await (await fetch(`${srv.url}/props?model=plain`)).json();
    assert.match(props.chat_template, /im_start/, 'ChatML when neither has one');
    for (const id of ['own', 'bare', 'plain']) assert.equal((await unload(id)).status, 200);
  });

  test('refusals at load: another chip, a broken set', async () => {
    let r = await load('x', rknn3Model(tokGguf, { manifest: { chip: 'rk1820' } }));
    assert.equal(r.status, 400);
    assert.equal(errorOf(r.body).code, 'unsupported_platform');
    assert.match(errorOf(r.body).message, /RK1828/);
    r = await load('x', rknn3Model(tokGguf), { embedding: true });
    assert.equal(r.status, 500);
    assert.match(errorOf(r.body).message, /chat model/);
    r = await load('x', rknn3Model(tokGguf, { task: 'embedding' }), { pooling: 'mean' });
    assert.equal(r.status, 500);
    assert.match(errorOf(r.body).message, /pooling/);
    r = await load('x', rknn3Model(tokGguf, { dim: 0 }));
    assert.equal(r.status, 500);
    assert.equal(errorOf(r.body).code, 'model_load_failed');
    assert.equal((await unload('qwen')).status, 200);
  });
});

test('rknn3 with no device: listed without chips; a load says so', async () => {
  const srv = await startServer(['--rknn3-lib', rknn3Fake, '--sysfs-root', fakeBoard()],
    { env: { FAKE_RKNN3_DEVICES: '0' } });
  try {
    const p = (await (await fetch(`${srv.url}/v1/platforms`)).json()).platforms
      .find((x) => x.id === 'rknn3');
    assert.equal(p.available, true);
    assert.deepEqual(p.detected_chips, []);
    const r = await post(`${srv.url}/v1/models/load`, { model_id: 'x',
      model_path: rknn3Model(synthModel('small', SMALL)) });
    assert.ok(r.status >= 400);
    assert.match(errorOf(r.body).message, /no RK182X device/);
  } finally {
    await srv.stop();
  }
});
