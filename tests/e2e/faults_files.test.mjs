// Faults from the files and connections under the server (issue 40, findings 1, 2, 3 and 5):
// a loaded model file truncated or rewritten in place fails that model with
// model_file_changed and nothing else; connections opened per request never cancel one
// another's work, and a resize cuts no stream; FIFOs, directories and devices where a model
// file is expected are refused at once with 400.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, openSync, writeSync, closeSync, readFileSync, statSync, truncateSync,
  utimesSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { startServer, errorOf, sanitizer, toolsDir } from './lib/server.mjs';
import { synthModel, SMALL, SLOW, tmpDir } from './lib/models.mjs';

const NO_EOS = { 2: -100 }; // random-weight models then generate until max_tokens

const post = (srv, route, body, signal) =>
  fetch(`${srv.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body), signal });

const chat = (model, extra = {}) => ({ model, messages: [{ role: 'user', content: 'Hello' }], temperature: 0,
  logit_bias: NO_EOS, max_tokens: 4, ...extra });

async function load(srv, body) {
  const r = await post(srv, '/v1/models/load', body);
  assert.equal(r.status, 200, await r.clone().text());
  await r.json();
}

// A private copy of a model file, so a test may damage it.
function copyOf(src, name) {
  const dir = path.join(tmpDir, 'faults', name);
  mkdirSync(dir, { recursive: true });
  const dst = path.join(dir, `${name}.gguf`);
  copyFileSync(src, dst);
  return dst;
}

// Overwrites the file's bytes from offset on in place (no truncation, same size).
function rewriteInPlace(file, bytes, offset = 0) {
  const fd = openSync(file, 'r+');
  try { writeSync(fd, bytes, 0, bytes.length, offset); } finally { closeSync(fd); }
}

async function expectFileChanged(res, file) {
  assert.equal(res.status, 500);
  const e = errorOf(await res.json());
  assert.equal(e.code, 'model_file_changed');
  assert.equal(e.type, 'server_error');
  assert.ok(e.message.includes(file), e.message);
}

async function modelEntry(srv, id) {
  const list = await (await fetch(`${srv.url}/v1/models`)).json();
  return list.data.find((m) => m.id === id);
}

// Streams a chat; resolves with the whole SSE text. onFirst runs once content has arrived.
async function streamChat(srv, model, maxTokens, onFirst = () => {}) {
  const res = await post(srv, '/v1/chat/completions', chat(model, { stream: true, max_tokens: maxTokens }));
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  let isFirst = true;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    if (isFirst && text.includes('"content":"')) {
      isFirst = false;
      onFirst();
    }
  }
  return text;
}

const threadsOf = (pid) => Number(/Threads:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

describe('model files changed under a loaded model', () => {
  let srv, small, small2, slow;
  before(async () => {
    small = synthModel('small', SMALL);
    small2 = synthModel('small-seed8', [...SMALL.slice(0, -1), '8']);
    slow = synthModel('slow', SLOW);
    srv = await startServer(['--threads', '1']);
  });
  after(async () => {
    await srv.stop();
  });

  test('a file truncated while 4 streams decode fails only that model, until it is loaded again',
    { timeout: 120000 }, async () => {
      const file = copyOf(slow, 'trunc');
      await load(srv, { model_id: 'trunc', model_path: file, instance_count: 4 });
      await load(srv, { model_id: 'bystander', model_path: small });
      let started = 0;
      let cut;
      const allStarted = new Promise((resolve) => { cut = resolve; });
      const streams = [0, 1, 2, 3].map(() => streamChat(srv, 'trunc', 3000, () => { if (++started === 4) cut(); }));
      await allStarted;
      truncateSync(file, 4096); // before the fix: SIGBUS, the whole server gone
      for (const text of await Promise.all(streams)) {
        assert.ok(!text.includes('[DONE]'), 'a stream of the changed file completed');
        assert.match(text, /event: error\ndata: .*"code":"model_file_changed"/);
      }
      assert.equal(await (await fetch(`${srv.url}/health`)).text(), 'ok');
      assert.equal((await post(srv, '/v1/chat/completions', chat('bystander'))).status, 200);
      const entry = await modelEntry(srv, 'trunc');
      assert.equal(entry.status, 'failed');
      assert.ok(entry.failure.includes(file), entry.failure);
      await expectFileChanged(await post(srv, '/v1/chat/completions', chat('trunc')), file);
      // Loaded again from a whole file, it serves.
      assert.equal((await post(srv, '/v1/models/unload', { model_id: 'trunc' })).status, 200);
      copyFileSync(slow, file);
      await load(srv, { model_id: 'trunc', model_path: file });
      assert.equal((await modelEntry(srv, 'trunc')).status, 'ready');
      assert.equal((await post(srv, '/v1/chat/completions', chat('trunc'))).status, 200);
      assert.equal((await post(srv, '/v1/models/unload', { model_id: 'trunc' })).status, 200);
      assert.equal((await post(srv, '/v1/models/unload', { model_id: 'bystander' })).status, 200);
    });

  test('a same-size rewrite in place is noticed before the next answer; a touch is not a change',
    { timeout: 60000 }, async () => {
      assert.equal(statSync(small).size, statSync(small2).size);
      const file = copyOf(small, 'inplace');
      await load(srv, { model_id: 'inplace', model_path: file });
      assert.equal((await post(srv, '/v1/chat/completions', chat('inplace'))).status, 200);
      const later = new Date(Date.now() + 60000);
      utimesSync(file, later, later);
      assert.equal((await post(srv, '/v1/chat/completions', chat('inplace'))).status, 200);
      assert.equal((await modelEntry(srv, 'inplace')).status, 'ready');
      rewriteInPlace(file, readFileSync(small2)); // another model of the same layout
      await expectFileChanged(await post(srv, '/v1/chat/completions', chat('inplace')), file);
      assert.equal((await modelEntry(srv, 'inplace')).status, 'failed');
      // Streams and other routes say the same.
      await expectFileChanged(await post(srv, '/v1/chat/completions', chat('inplace', { stream: true })), file);
      assert.equal((await post(srv, '/v1/models/unload', { model_id: 'inplace' })).status, 200);
    });

  test('random bytes written over a loaded file give model_file_changed, not a misleading 400',
    { timeout: 60000 }, async () => {
      const file = copyOf(small, 'random');
      await load(srv, { model_id: 'random', model_path: file });
      rewriteInPlace(file, randomBytes(statSync(file).size - 1024), 1024);
      await expectFileChanged(await post(srv, '/v1/chat/completions', chat('random')), file);
      assert.equal((await post(srv, '/v1/models/unload', { model_id: 'random' })).status, 200);
    });
  test('a projector rewritten in place fails its model too, naming the projector', { timeout: 60000 }, async () => {
    const dir = path.join(tmpDir, 'faults', 'proj');
    mkdirSync(dir, { recursive: true });
    copyFileSync(small, path.join(dir, 'model.gguf'));
    const proj = path.join(dir, 'mmproj-model.gguf');
    execFileSync(path.join(toolsDir, 'mmproj-synth'), ['--projector', 'gemma3', '--out', '128', '-o', proj]);
    await load(srv, { model_id: 'proj', model_path: dir });
    assert.equal((await post(srv, '/v1/chat/completions', chat('proj'))).status, 200);
    rewriteInPlace(proj, randomBytes(statSync(proj).size - 1024), 1024);
    await expectFileChanged(await post(srv, '/v1/chat/completions', chat('proj')), proj);
    assert.equal((await post(srv, '/v1/models/unload', { model_id: 'proj' })).status, 200);
  });
  test('an embedding model whose file was truncated answers model_file_changed', { timeout: 60000 }, async () => {
    const bert = synthModel('bert-small', ['--arch', 'bert', '--layers', '2', '--embd', '128', '--heads', '4',
      '--ffn', '256', '--ctx', '512', '--type', 'f32', '--seed', '5']);
    const file = copyOf(bert, 'bert-trunc');
    await load(srv, { model_id: 'emb', model_path: file });
    const body = { model: 'emb', input: ['one sentence', 'another one'] };
    assert.equal((await post(srv, '/v1/embeddings', body)).status, 200);
    truncateSync(file, 8192);
    await expectFileChanged(await post(srv, '/v1/embeddings', body), file);
    assert.equal((await modelEntry(srv, 'emb')).status, 'failed');
    assert.equal((await post(srv, '/v1/models/unload', { model_id: 'emb' })).status, 200);
  });
});

// One request on a connection of its own, as a client without keep-alive makes it.
function oneShot(url, route, body) {
  const u = new URL(url);
  const data = JSON.stringify(body);
  return new Promise((resolve) => {
    const req = http.request({ host: u.hostname, port: u.port, path: route, method: 'POST', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
      res.on('error', (e) => resolve({ status: 0, text: String(e) }));
    });
    req.on('error', (e) => resolve({ status: 0, text: String(e) }));
    req.end(data);
  });
}

describe('connections opened per request', () => {
  let srv, small, slow;
  before(async () => {
    small = synthModel('small', SMALL);
    slow = synthModel('slow', SLOW);
    srv = await startServer(['--threads', '1', '-m', small, '--alias', 'small', '-np', '2']);
  });
  after(async () => {
    await srv.stop();
  });

  // The watcher used to match a poll's answer by the connection's address: a connection that
  // closed during the unlocked poll and a new one allocated at its address had the new one's
  // work abandoned (1.1% of 6,000 requests here: 500 "generation was cancelled").
  test('16 clients, a new connection per request: every request succeeds', { timeout: 120000 }, async () => {
    const total = sanitizer ? 1500 : 12000;
    const kinds = [
      ['/v1/chat/completions', chat('small'), (r) => r.text.includes('"finish_reason":"length"')],
      ['/v1/chat/completions', chat('small', { stream: true }),
        (r) => r.text.includes('data: [DONE]') && !r.text.includes('event: error')],
      ['/v1/messages', { model: 'small', max_tokens: 4, messages: [{ role: 'user', content: 'Hello' }] },
        (r) => r.text.includes('"type":"message"')],
      ['/v1/responses', { model: 'small', max_output_tokens: 4, input: 'Hello' },
        (r) => r.text.includes('"object":"response"')],
    ];
    let next = 0;
    const failures = [];
    const client = async () => {
      while (next < total) {
        const [route, body, isWhole] = kinds[next++ % kinds.length];
        const r = await oneShot(srv.url, route, body);
        if (r.status !== 200 || !isWhole(r)) failures.push(`${route} ${r.status} ${r.text.slice(-200)}`);
      }
    };
    await Promise.all(Array.from({ length: 16 }, client));
    assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of ${total} failed`);
  });

  // Streams and resizes interleaved, each on a connection of its own, as `llamapi resize`
  // makes them: shrinking retires busy instances when their request ends, never cuts one.
  // Before, the closing resize connections cut 7 of 412 streams here (the watcher's mix-up).
  test('resizing down and up while streams run cuts none of them', { timeout: 120000 }, async () => {
    await load(srv, { model_id: 'rz', model_path: small, instance_count: 4 });
    let isDone = false;
    let n = 0;
    const failures = [];
    const client = async () => {
      while (!isDone) {
        const r = await oneShot(srv.url, '/v1/chat/completions', chat('rz', { stream: true, max_tokens: 16 }));
        n++;
        const isWhole = r.text.includes('"finish_reason":"length"') && r.text.includes('data: [DONE]');
        if (r.status !== 200 || !isWhole || r.text.includes('event: error')) failures.push(r.text.slice(-200));
      }
    };
    const clients = Array.from({ length: 8 }, client);
    // Resizes go on until enough streams have run beside them, however fast either side is.
    const [minResizes, minStreams] = sanitizer ? [60, 48] : [300, 160];
    for (let i = 0; i < minResizes || n < minStreams; i++) {
      const r = await oneShot(srv.url, '/v1/models/resize', { model_id: 'rz', instance_count: 1 + (i % 4) });
      assert.equal(r.status, 200, r.text);
    }
    isDone = true;
    await Promise.all(clients);
    assert.deepEqual(failures.slice(0, 3), [], `${failures.length} of ${n} streams were cut`);
    assert.equal((await post(srv, '/v1/models/unload', { model_id: 'rz' })).status, 200);
  });
});

describe('special files where a model file is expected', () => {
  let srv, small, dir;
  before(async () => {
    small = synthModel('small', SMALL);
    dir = path.join(tmpDir, 'faults', 'special');
    mkdirSync(path.join(dir, 'fifo-model'), { recursive: true });
    mkdirSync(path.join(dir, 'fifo-mmproj'), { recursive: true });
    execFileSync('mkfifo', [path.join(dir, 'pipe.gguf')]);
    execFileSync('mkfifo', [path.join(dir, 'fifo-model', 'model.gguf')]);
    copyFileSync(small, path.join(dir, 'fifo-mmproj', 'model.gguf'));
    execFileSync('mkfifo', [path.join(dir, 'fifo-mmproj', 'mmproj-model.gguf')]);
    srv = await startServer(['--threads', '1']);
  });
  after(async () => {
    await srv.stop();
  });

  // Before: the first and last of these never answered, and each attempt kept a thread.
  test('FIFOs, a directory and a device answer 400 at once and keep no thread', { timeout: 60000 }, async () => {
    const cases = [
      [{ model_path: small, mmproj_path: path.join(dir, 'pipe.gguf') }, 'mmproj_path', 'a FIFO'],
      [{ model_path: small, mmproj_path: dir }, 'mmproj_path', 'a directory'],
      [{ model_path: path.join(dir, 'pipe.gguf') }, 'model_path', 'a FIFO'],
      [{ model_path: '/dev/zero' }, 'model_path', 'a device'],
      [{ model_path: path.join(dir, 'fifo-model') }, 'model_path', 'a FIFO'],
      [{ model_path: path.join(dir, 'fifo-mmproj') }, 'model_path', 'a FIFO'],
    ];
    // A first load warms the worker threads up, so the count below is the steady one.
    await load(srv, { model_id: 'warm', model_path: small });
    const threads = threadsOf(srv.proc.pid);
    for (let round = 0; round < 4; round++) {
      for (const [i, [body, param, kind]] of cases.entries()) {
        const res = await post(srv, '/v1/models/load', { model_id: `special-${round}-${i}`, ...body },
          AbortSignal.timeout(10000));
        assert.equal(res.status, 400, JSON.stringify(body));
        const e = errorOf(await res.json());
        assert.equal(e.code, 'invalid_model_path');
        assert.equal(e.param, param);
        assert.ok(e.message.includes(kind), e.message);
      }
    }
    const list = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.deepEqual(list.data.map((m) => m.id), ['warm']);
    assert.ok(threadsOf(srv.proc.pid) <= threads + 1, `threads ${threads} -> ${threadsOf(srv.proc.pid)}`);
  });
});
