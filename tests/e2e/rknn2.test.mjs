// The rknn2 platform against the fake runtime (tests/fakes/fake_rknn2.c) on a fake RK3588
// board: /v1/platforms, load / resize / unload with one NPU core per instance, embeddings as
// floats and base64 and through /embedding, padding and each declared input type, mean / CLS /
// in-model pooling, truncation, a partial load, a runtime error, and the refusals (missing
// library, another chip, missing tokenizer.json, unsupported pooling and fields).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startServer, errorOf } from './lib/server.mjs';
import { rknn2Fake, fakeBoard, rknn2Model, XLMR_IDS, expectedEmbedding, readLog, post, tmpDir }
  from './lib/rknn.mjs';

const H = 8;
const S = 16;
const ids = (...words) => [0, ...words.map((w) => XLMR_IDS[`\u2581${w}`]), 2];

function close(a, b, eps = 1e-5) {
  assert.equal(a.length, b.length);
  a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) < eps, `[${i}] ${x} vs ${b[i]}`));
}

function runs(log) {
  return log.filter((l) => l.startsWith('run ')).map((l) => {
    const m = /mask=(-?\d+) rc=(-?\d+)((?: in\d=\w+:[-\d,]+)*)/.exec(l);
    const inputs = [...m[3].matchAll(/in\d=(\w+):([-\d,]+)/g)].map((x) => ({ type: x[1],
      values: x[2].split(',').map(Number) }));
    return { mask: Number(m[1]), rc: Number(m[2]), inputs };
  });
}

describe('rknn2 with the fake runtime', () => {
  let srv;
  let logFile;
  const board = fakeBoard({ soc: 'rk3588' });
  before(async () => {
    logFile = path.join(tmpDir('llamapi-rknn2-log-'), 'runtime.log');
    srv = await startServer(['--rknn-lib', rknn2Fake, '--sysfs-root', board],
      { env: { FAKE_RKNN2_LOG: logFile } });
  });
  after(async () => { await srv.stop(); });

  const load = (id, dir, extra = {}) => post(`${srv.url}/v1/models/load`,
    { model_id: id, model_path: dir, ...extra });
  const embed = (model, input, extra = {}) => post(`${srv.url}/v1/embeddings`,
    { model, input, ...extra });

  test('/v1/platforms lists rknn2 available with the SoC and driver', async () => {
    const r = await fetch(`${srv.url}/v1/platforms`);
    const p = (await r.json()).platforms.find((x) => x.id === 'rknn2');
    assert.equal(p.available, true);
    assert.equal(p.library, rknn2Fake);
    assert.deepEqual(p.detected_chips, [{ chip_type: 'RK3588', count: 1 }]);
    assert.equal(p.npu_driver_version, '0.9.8');
  });

  test('load with three instances pins one NPU core each; embeddings are mean-pooled', async () => {
    const dir = rknn2Model({ manifest: { platform: 'rknn2', pooling: 'mean', chip: 'rk3588' } });
    const before0 = readLog(logFile).length;
    const r = await load('bge', dir, { instance_count: 3 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.actual_instance_count, 3);
    const masks = readLog(logFile).slice(before0).filter((l) => l.startsWith('core_mask'))
      .map((l) => Number(/mask=(\d+)/.exec(l)[1])).sort();
    assert.deepEqual(masks, [1, 2, 4]);

    const m = await (await fetch(`${srv.url}/v1/models/bge`)).json();
    assert.equal(m.platform, 'rknn2');
    assert.equal(m.model_kind, 'embedding');
    assert.equal(m.n_ctx, S);
    assert.equal(m.meta.n_embd, H);

    const e = await embed('bge', ['hello world', 'the cat sat on the mat']);
    assert.equal(e.status, 200, JSON.stringify(e.body));
    assert.equal(e.body.data.length, 2);
    close(e.body.data[0].embedding, expectedEmbedding(ids('hello', 'world'), H, 'mean'));
    close(e.body.data[1].embedding, expectedEmbedding(ids('the', 'cat', 'sat', 'on', 'the', 'mat'), H, 'mean'));
    assert.equal(e.body.usage.prompt_tokens, 4 + 8);

    // The runtime saw the ids padded with <pad> (1) to S and the mask over the real tokens.
    const last = runs(readLog(logFile)).at(-1);
    assert.equal(last.inputs[0].type, 'int64');
    assert.deepEqual(last.inputs[0].values, [...ids('the', 'cat', 'sat', 'on', 'the', 'mat'),
      ...new Array(S - 8).fill(1)]);
    assert.deepEqual(last.inputs[1].values, [...new Array(8).fill(1), ...new Array(S - 8).fill(0)]);

    // base64: the same floats, little-endian.
    const b = await embed('bge', 'hello world', { encoding_format: 'base64' });
    assert.equal(b.status, 200);
    const buf = Buffer.from(b.body.data[0].embedding, 'base64');
    const floats = Array.from({ length: buf.length / 4 }, (_, i) => buf.readFloatLE(i * 4));
    close(floats, e.body.data[0].embedding);

    // llama.cpp's /embedding shape.
    const n = await post(`${srv.url}/embedding`, { model: 'bge', content: 'hello world' });
    assert.equal(n.status, 200);
    close(n.body[0].embedding[0], e.body.data[0].embedding);

    // Token-id input is used as given.
    const t = await embed('bge', [0, 5, 2]);
    assert.equal(t.status, 200);
    close(t.body.data[0].embedding, expectedEmbedding([0, 5, 2], H, 'mean'));
  });

  test('concurrent requests spread over the instances and all succeed', async () => {
    const all = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      embed('bge', i % 2 ? 'hello' : 'the mat')));
    all.forEach((r) => assert.equal(r.status, 200));
    assert.ok(!readLog(logFile).some((l) => l.includes('BUSY')), 'one run per context at a time');
  });

  test('too long: 400 context_length_exceeded, or truncated keeping </s>', async () => {
    const long = Array.from({ length: 20 }, () => 'hello').join(' ');
    const r = await embed('bge', long);
    assert.equal(r.status, 400);
    assert.equal(errorOf(r.body).code, 'context_length_exceeded');
    const t = await embed('bge', long, { truncate: true });
    assert.equal(t.status, 200, JSON.stringify(t.body));
    const last = runs(readLog(logFile)).at(-1);
    assert.equal(last.inputs[0].values.length, S);
    assert.equal(last.inputs[0].values[0], 0);
    assert.equal(last.inputs[0].values[S - 1], 2);
    assert.ok(last.inputs[1].values.every((v) => v === 1));
  });

  test('resize and unload', async () => {
    let r = await post(`${srv.url}/v1/models/resize`, { model_id: 'bge', instance_count: 1 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal((await embed('bge', 'hello')).status, 200);
    r = await post(`${srv.url}/v1/models/unload`, { model_id: 'bge' });
    assert.equal(r.status, 200);
    r = await embed('bge', 'hello');
    assert.equal(r.status, 404);
    assert.ok(readLog(logFile).filter((l) => l.startsWith('destroy')).length >= 3);
  });

  test('each declared input type: int32, int16 and float16 inputs, CLS pooling', async () => {
    const dir = rknn2Model({ inputs: ['int32', 'int16', 'float16'], seqLen: 8,
      manifest: { pooling: 'cls' } });
    const r = await load('typed', dir);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const e = await embed('typed', 'hello world');
    assert.equal(e.status, 200, JSON.stringify(e.body));
    close(e.body.data[0].embedding, expectedEmbedding(ids('hello', 'world'), H, 'cls'));
    const last = runs(readLog(logFile)).at(-1);
    assert.deepEqual(last.inputs.map((x) => x.type), ['int32', 'int16', 'float16']);
    assert.deepEqual(last.inputs[0].values, [0, 5, 6, 2, 1, 1, 1, 1]);
    assert.deepEqual(last.inputs[1].values, [1, 1, 1, 1, 0, 0, 0, 0]);
    assert.deepEqual(last.inputs[2].values, [0, 0, 0, 0, 0, 0, 0, 0]);
    assert.equal((await post(`${srv.url}/v1/models/unload`, { model_id: 'typed' })).status, 200);
  });

  test('a model that outputs one vector is only normalized', async () => {
    const dir = rknn2Model({ output: 'pooled', inputs: ['int64'] });
    assert.equal((await load('pooled', dir)).status, 200);
    const e = await embed('pooled', 'hello');
    assert.equal(e.status, 200);
    close(e.body.data[0].embedding, expectedEmbedding(ids('hello'), H, 'cls'));
    assert.equal((await post(`${srv.url}/v1/models/unload`, { model_id: 'pooled' })).status, 200);
  });

  test('partial load: the runtime refuses the second context', async () => {
    const dir = rknn2Model({ failInit: 2 });
    const r = await load('partial', dir, { instance_count: 3 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.requested_instance_count, 3);
    assert.ok(r.body.actual_instance_count >= 1 && r.body.actual_instance_count < 3);
    assert.match(r.body.message, /partially loaded/);
    assert.equal((await embed('partial', 'hello')).status, 200);
    assert.equal((await post(`${srv.url}/v1/models/unload`, { model_id: 'partial' })).status, 200);
  });

  test('a failing run is a 500 and the server keeps serving', async () => {
    const dir = rknn2Model({ errorToken: XLMR_IDS['\u2581boom'] });
    assert.equal((await load('err', dir)).status, 200);
    const r = await embed('err', ['hello', 'boom']);
    assert.equal(r.status, 500);
    assert.match(errorOf(r.body).message, /NPU runtime failed/);
    assert.equal((await embed('err', 'hello')).status, 200);
    assert.equal((await post(`${srv.url}/v1/models/unload`, { model_id: 'err' })).status, 200);
  });

  test('refusals: another chip, no tokenizer.json, pooling it cannot do, chat', async () => {
    let r = await load('x', rknn2Model({ manifest: { chip: 'rk3576' } }));
    assert.equal(r.status, 400);
    assert.equal(errorOf(r.body).code, 'unsupported_platform');
    assert.match(errorOf(r.body).message, /rk3576/i);
    assert.match(errorOf(r.body).message, /RK3588/);

    r = await load('x', rknn2Model({ tokenizerJson: false }));
    assert.equal(r.status, 500);
    assert.equal(errorOf(r.body).code, 'model_load_failed');
    assert.match(errorOf(r.body).message, /tokenizer\.json/);

    r = await load('x', rknn2Model(), { pooling: 'last' });
    assert.equal(r.status, 500);
    assert.match(errorOf(r.body).message, /cls.*mean/);

    assert.equal((await load('chatless', rknn2Model())).status, 200);
    r = await post(`${srv.url}/v1/chat/completions`,
      { model: 'chatless', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.status, 400);
    assert.equal(errorOf(r.body).code, 'wrong_model_type');
    assert.equal((await post(`${srv.url}/v1/models/unload`, { model_id: 'chatless' })).status, 200);
  });
});

test('rknn2 without its runtime library: listed unavailable, loads refused', async () => {
  const srv = await startServer(['--rknn-lib', '/nonexistent/librknnrt.so',
    '--sysfs-root', fakeBoard()]);
  try {
    const p = (await (await fetch(`${srv.url}/v1/platforms`)).json()).platforms
      .find((x) => x.id === 'rknn2');
    assert.equal(p.available, false);
    assert.match(p.reason, /nonexistent/);
    const r = await post(`${srv.url}/v1/models/load`, { model_id: 'x', model_path: rknn2Model() });
    assert.equal(r.status, 400);
    assert.equal(errorOf(r.body).code, 'unsupported_platform');
    assert.match(errorOf(r.body).message, /librknnrt/);
  } finally {
    await srv.stop();
  }
});
