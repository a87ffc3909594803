// Hostile and broken clients against the real server: every row asserts the status and error
// code, and afterwards health, the model list and a real generation still work.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { startServer, errorOf, toolsDir, sanitizer } from './lib/server.mjs';
import { synthModel, SMALL, tmpDir } from './lib/models.mjs';
import { raw } from './lib/raw.mjs';


describe('hostile input', () => {
  let srv, small;
  const chat = (body, headers = {}) => fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body) });

  async function stillServing() {
    assert.equal(await (await fetch(`${srv.url}/health`)).text(), 'ok');
    const list = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.ok(list.data.some((m) => m.id === 'm'));
    const r = await chat({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
    assert.equal(r.status, 200);
    assert.equal((await r.json()).usage.completion_tokens > 0, true);
  }

  async function row(res, status, code) {
    assert.equal(res.status, status);
    const e = errorOf(await res.json());
    if (code) assert.equal(e.code, code);
    await stillServing();
  }

  before(async () => {
    small = synthModel('small', SMALL);
    srv = await startServer(['--threads', '1', '-m', small, '--alias', 'm', '--max-connections', '64', '--timeout', '2']);
  });
  after(async () => srv.stop());

  const ok = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

  test('NaN / Infinity literals, huge numbers, duplicate keys, invalid UTF-8', async () => {
    await row(await chat('{"model":"m","messages":[],"temperature":NaN}'), 400, 'invalid_json');
    await row(await chat('{"model":"m","temperature":Infinity}'), 400, 'invalid_json');
    await row(await chat('{"model":"m","max_tokens":1e999}'), 400, 'invalid_json');
    await row(await chat('{"model":"m","max_tokens":123456789012345678901234567890}'), 400, 'invalid_json');
    await row(await chat('{"model":"m","model":"m"}'), 400, 'invalid_json');
    await row(await chat(Buffer.from('{"model":"m","messages":[{"role":"user","content":"\xc3\x28"}]}', 'latin1')), 400, 'invalid_json');
    await row(await chat('{"model":"m"' + ' '.repeat(1000) + '}}'), 400, 'invalid_json');
  });

  test('deep nesting is refused before parsing', async () => {
    const deep = '{"a":' + '['.repeat(100000) + ']'.repeat(100000) + '}';
    await row(await chat(deep), 400, 'invalid_json');
  });

  test('wrong types in every field', async () => {
    const fields = { model: 5, messages: {}, stream: 1, temperature: [], top_p: 'x', top_k: 2.5, min_p: {},
      repeat_penalty: 'x', frequency_penalty: true, presence_penalty: 'x', seed: 1.5,
      max_tokens: '10', max_completion_tokens: [], stop: {}, tools: 'x', tool_choice: 5, logit_bias: [],
      n: 'x', stream_options: 'x', response_format: 'json', grammar: 7, parallel_tool_calls: 'yes' };
    for (const [k, v] of Object.entries(fields)) {
      const r = await chat({ ...ok, [k]: v });
      assert.equal(r.status, 400, `${k}=${JSON.stringify(v)}`);
      const e = errorOf(await r.json());
      assert.ok(e.param === k || e.param?.startsWith(`${k}.`) || e.param?.startsWith(k), `${k}: param ${e.param}`);
    }
    await stillServing();
  });

  test('extreme counts: max_tokens 2^31, negative counts, many stop strings and messages', async () => {
    await row(await chat({ ...ok, max_tokens: 2 ** 31 }), 400, 'invalid_value');
    await row(await chat({ ...ok, max_tokens: -1 }), 400, 'invalid_value');
    await row(await chat({ ...ok, top_k: -5 }), 400, 'invalid_value');
    await row(await chat({ ...ok, stop: Array(5000).fill('x') }), 400, 'invalid_value');
    await row(await chat({ ...ok, stop: 'x'.repeat(10000) }), 400, 'invalid_value');
    const many = Array.from({ length: 20000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: 'a' }));
    await row(await chat({ model: 'm', messages: many }), 400, 'context_length_exceeded');
    await row(await chat({ ...ok, logit_bias: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [i, 1])) }), 400, 'invalid_value');
  });

  test('very long model ids and path traversal', async () => {
    await row(await chat({ ...ok, model: 'x'.repeat(100000) }), 400, 'string_above_max_length');
    await row(await fetch(`${srv.url}/v1/models/${'y'.repeat(5000)}`), 404, 'model_not_found');
    const load = (body) => fetch(`${srv.url}/v1/models/load`, { method: 'POST', body: JSON.stringify(body) });
    await row(await load({ model_id: 'x'.repeat(300), model_path: small }), 400, 'string_above_max_length');
    await row(await load({ model_id: 't', model_path: '../../../../etc/passwd' }), 400, 'invalid_model_path');
    await row(await load({ model_id: 't', model_path: 'a/../../b.gguf' }), 400, 'invalid_model_path');
    await row(await load({ model_id: 't', model_path: '/etc/passwd' }), 400, 'platform_detection_failed');
    await row(await chat({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'file:///etc/shadow' } }] }] }),
      400, 'invalid_content_part');
  });

  test('headers at and over the size limit', async () => {
    const big = 'a'.repeat(4000);
    const r = await fetch(`${srv.url}/health`, { headers: { 'x-pad': big } });
    assert.equal(r.status, 200);
    const text = await raw(srv.port, `GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(200000)}\r\n\r\n`);
    assert.match(text, /^HTTP\/1\.1 (413|431|400)/);
    await stillServing();
  });

  test('slow senders are cut by the timeout; other clients are unaffected', async () => {
    const sock = net.connect(srv.port, '127.0.0.1');
    sock.on('error', () => {});
    sock.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"mo');
    const closed = new Promise((r) => sock.on('close', r));
    await stillServing(); // served while the slow one hangs
    const t0 = Date.now();
    await closed;
    assert.ok(Date.now() - t0 < 10000, 'the idle connection was closed');
  });

  test('a slow reader of a stream does not stall others', async () => {
    const sock = net.connect(srv.port, '127.0.0.1');
    sock.on('error', () => {});
    sock.pause(); // never reads
    const body = JSON.stringify({ ...ok, stream: true, max_tokens: 500, logit_bias: { 2: -100 } });
    sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    await new Promise((r) => setTimeout(r, 200));
    await stillServing();
    sock.destroy();
  });

  test('more connections than the limit are refused cleanly and the server stays healthy', async () => {
    const socks = [];
    for (let i = 0; i < 80; i++) {
      const s = net.connect(srv.port, '127.0.0.1');
      s.on('error', () => {});
      socks.push(s);
    }
    await new Promise((r) => setTimeout(r, 300));
    for (const s of socks) s.destroy();
    await new Promise((r) => setTimeout(r, 200));
    await stillServing();
  });

  test('the wrong key of the right length is refused', async () => {
    const keyed = await startServer(['--api-key', 'sk-0123456789abcdef']);
    try {
      const r = await fetch(`${keyed.url}/v1/models`, { headers: { authorization: 'Bearer sk-0123456789abcdeg' } });
      assert.equal(r.status, 401);
      assert.equal(errorOf(await r.json()).code, 'invalid_api_key');
    } finally {
      await keyed.stop();
    }
  });
});

describe('hostile model files through POST /v1/models/load', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--threads', '1']);
  });
  after(async () => srv.stop());

  const load = (p) => fetch(`${srv.url}/v1/models/load`, { method: 'POST',
    body: JSON.stringify({ model_id: 'bad', model_path: p }) });

  test('a GGUF truncated at every byte of its header and tensor table is a clean error', async () => {
    const src = synthModel('tiny', ['--arch', 'llama', '--layers', '1', '--embd', '8', '--heads', '1',
      '--heads-kv', '1', '--ffn', '8', '--ctx', '16', '--type', 'f32']);
    const bytes = readFileSync(src);
    const dump = execFileSync(path.join(toolsDir, 'gguf-dump'), [src]).toString();
    const dataStart = Number(/data at offset (\d+)/.exec(dump)[1]);
    const limit = Math.min(bytes.length - 1, 12000, dataStart);
    const p = path.join(tmpDir, 'trunc.gguf');
    let refused = 0;
    for (let n = 4; n < limit; n += (n < 2000 ? 1 : 7)) {
      writeFileSync(p, bytes.subarray(0, n));
      const r = await load(p);
      assert.ok(r.status === 400 || r.status === 500, `truncated at ${n}: ${r.status}`);
      const e = errorOf(await r.json());
      assert.ok(e.message.length > 0);
      refused++;
    }
    assert.ok(refused > 1000);
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });

  test('extreme field values are clean errors', async () => {
    const src = readFileSync(synthModel('tiny', []));
    const p = path.join(tmpDir, 'evil.gguf');
    const cases = [];
    const put64 = (buf, off, v) => { const b = Buffer.from(buf); b.writeBigUInt64LE(v, off); return b; };
    cases.push(put64(src, 8, 2n ** 63n));          // tensor count
    cases.push(put64(src, 16, 2n ** 63n));         // key count
    cases.push(put64(src, 24, 2n ** 62n));         // first key's length
    const bad = Buffer.from(src); bad.writeUInt32LE(99, 4); cases.push(bad); // version
    for (const c of cases) {
      writeFileSync(p, c);
      const r = await load(p);
      assert.ok(r.status === 400 || r.status === 500);
      errorOf(await r.json());
    }
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });
});

describe('faults', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '--alias', 'm', '-np', '2',
      '--request-queue-size', '4']);
  });
  after(async () => srv.stop());

  const stats = () => {
    const status = readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8');
    return { rss: Number(/VmRSS:\s+(\d+)/.exec(status)[1]), fds: readdirSync(`/proc/${srv.proc.pid}/fd`).length };
  };

  test('1000 streams cut at random points leak nothing and give the instances back', async () => {
    let seed = 12345;
    const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % n; };
    const one = async () => {
      const ctl = new AbortController();
      const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', signal: ctl.signal,
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true,
          max_tokens: 400, logit_bias: { 2: -100 } }) });
      if (r.status !== 200) { await r.text(); return r.status; }
      const reader = r.body.getReader();
      const n = rnd(6);
      try {
        for (let i = 0; i < n; i++) if ((await reader.read()).done) break;
      } catch { /* aborted */ }
      ctl.abort();
      return 200;
    };
    for (let i = 0; i < 20; i++) await one(); // warm-up
    const before = stats();
    const statuses = [];
    for (let i = 0; i < 1000; i += 2) statuses.push(...(await Promise.all([one(), one()])));
    for (const s of statuses) assert.ok(s === 200 || s === 429, `status ${s}`);
    // Every instance comes back: two full answers at once, with no queue in the way.
    await new Promise((r) => setTimeout(r, 300));
    const full = () => fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }) }).then((r) => r.json());
    const [a, b] = await Promise.all([full(), full()]);
    assert.equal(a.usage.completion_tokens + b.usage.completion_tokens > 0, true);
    const model = await (await fetch(`${srv.url}/v1/models/m`)).json();
    assert.equal(model.queue, 0);
    assert.equal(model.instance_count, 2);
    const after_ = stats();
    // Idle keep-alive sockets of the client's pool may stay open; a leak would be hundreds.
    assert.ok(after_.fds <= before.fds + 8, `fds ${before.fds} -> ${after_.fds}`);
    if (!sanitizer) assert.ok(after_.rss - before.rss < 16 * 1024, `RSS grew by ${after_.rss - before.rss} KiB`);
  });
});

describe('model files changed on disk after load', () => {
  test('deleting the file is harmless; truncating it in place fails requests cleanly, no SIGBUS', async () => {
    const { copyFileSync, unlinkSync, truncateSync, statSync } = await import('node:fs');
    const src = synthModel('small', SMALL);
    const a = path.join(tmpDir, 'deleted.gguf');
    const b = path.join(tmpDir, 'truncated.gguf');
    copyFileSync(src, a);
    copyFileSync(src, b);
    const srv = await startServer(['--threads', '1', '-m', a, '-a', 'gone', '-m', b]);
    try {
      const ask = (model) => fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }) });
      unlinkSync(a);
      assert.equal((await ask('gone')).status, 200, 'the mapping outlives the name');
      truncateSync(b, Math.floor(statSync(b).size / 3));
      const r = await ask('truncated');
      assert.equal(r.status, 500);
      assert.match(errorOf(await r.json()).message, /truncated/);
      assert.equal((await ask('gone')).status, 200, 'other models keep serving');
      assert.equal((await fetch(`${srv.url}/health`)).status, 200);
      assert.equal(srv.proc.exitCode, null, 'no crash');
    } finally {
      await srv.stop();
    }
  });
});
