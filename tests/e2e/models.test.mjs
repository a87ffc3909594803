// Model management (LlamaPi extension API): load / resize / unload, every error path, pools
// and queues under concurrency, and resources staying flat over many load/unload cycles.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, writeFileSync, mkdirSync, copyFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, errorOf } from './lib/server.mjs';
import { synthModel, SMALL, SLOW, tmpDir } from './lib/models.mjs';

const post = (srv, route, body) =>
  fetch(`${srv.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body) });

async function expectError(res, status, code, param) {
  assert.equal(res.status, status, `status for ${code}`);
  const e = errorOf(await res.json());
  if (code !== undefined) assert.equal(e.code, code);
  if (param !== undefined) assert.equal(e.param, param);
  return e;
}

// Banning the end tokens keeps random-weight models generating until max_tokens.
const NO_EOS = { 2: -100 };

function chatBody(model, extra = {}) {
  return { model, messages: [{ role: 'user', content: 'Hello there' }], temperature: 0,
    logit_bias: NO_EOS, ...extra };
}

// Reads an SSE chat stream; resolves with the arrival times of content chunks and the tail.
async function readStream(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  const times = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    const chunk = dec.decode(value, { stream: true });
    const n = (chunk.match(/"content":"[^"]/g) || []).length;
    for (let i = 0; i < n; i++) times.push(performance.now());
    text += chunk;
  }
  return { text, times };
}

function procStats(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
  const fds = readdirSync(`/proc/${pid}/fd`).length;
  return { rssKiB: rss, fds };
}

describe('model management', () => {
  let srv, small, slow;
  before(async () => {
    small = synthModel('small', SMALL);
    slow = synthModel('slow', SLOW);
    srv = await startServer(['--threads', '1', '--models-dir', tmpDir]);
  });
  after(async () => {
    await srv.stop();
  });

  test('load, list, get, resize and unload with the documented shapes', async () => {
    let r = await post(srv, '/v1/models/load', { model_id: 'm1', model_path: small, instance_count: 2 });
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { success: true, message: "model 'm1' loaded",
      requested_instance_count: 2, actual_instance_count: 2 });
    const list = await (await fetch(`${srv.url}/v1/models`)).json();
    const m = list.data.find((x) => x.id === 'm1');
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'llamapi/cpu');
    assert.equal(m.platform, 'cpu');
    assert.equal(m.instance_count, 2);
    assert.equal(m.model_path, small);
    assert.equal(m.model_kind, 'chat');
    assert.equal(m.status, 'ready');
    assert.equal(typeof m.created, 'number');
    assert.equal(m.meta.n_embd, 128);
    const one = await (await fetch(`${srv.url}/v1/models/m1`)).json();
    assert.equal(one.id, 'm1');
    r = await post(srv, '/v1/models/resize', { model_id: 'm1', instance_count: 3 });
    assert.deepEqual(await r.json(), { success: true, message: "model 'm1' resized",
      requested_instance_count: 3, actual_instance_count: 3 });
    r = await post(srv, '/v1/models/resize', { model_id: 'm1', instance_count: 1 });
    assert.equal((await r.json()).actual_instance_count, 1);
    r = await post(srv, '/v1/models/unload', { model_id: 'm1' });
    assert.deepEqual(await r.json(), { success: true, message: "model 'm1' unloaded" });
    await expectError(await fetch(`${srv.url}/v1/models/m1`), 404, 'model_not_found', 'model');
  });

  test('a directory holding one .gguf and a bare name under --models-dir load', async () => {
    let r = await post(srv, '/v1/models/load', { model_id: 'dir', model_path: path.dirname(small) });
    assert.equal(r.status, 200);
    r = await post(srv, '/v1/models/load', { model_id: 'bare', model_path: 'small' });
    assert.equal(r.status, 200, 'bare name resolves under --models-dir');
    await post(srv, '/v1/models/unload', { model_id: 'dir' });
    await post(srv, '/v1/models/unload', { model_id: 'bare' });
  });

  test('every load error has its status, code and param', async () => {
    await post(srv, '/v1/models/load', { model_id: 'dup', model_path: small });
    await expectError(await post(srv, '/v1/models/load', { model_id: 'dup', model_path: small }),
      409, 'model_already_exists', 'model_id');
    await post(srv, '/v1/models/unload', { model_id: 'dup' });
    await expectError(await post(srv, '/v1/models/load', { model_path: small }), 400,
      'missing_required_parameter', 'model_id');
    await expectError(await post(srv, '/v1/models/load', { model_id: 'x' }), 400,
      'missing_required_parameter', 'model_path');
    await expectError(await post(srv, '/v1/models/load', { model_id: 7, model_path: small }), 400,
      'invalid_type', 'model_id');
    await expectError(await post(srv, '/v1/models/load', { model_id: 'x', model_path: small, instance_count: 0 }),
      400, 'invalid_instance_count', 'instance_count');
    await expectError(await post(srv, '/v1/models/load', { model_id: 'x', model_path: small, instance_count: -2 }),
      400, 'invalid_value', 'instance_count');
    await expectError(await post(srv, '/v1/models/load', { model_id: 'x', model_path: small, instance_count: '2' }),
      400, 'invalid_type', 'instance_count');
    await expectError(await post(srv, '/v1/models/load', { model_id: 'x', model_path: small, request_queue_size: -1 }),
      400, 'invalid_value', 'request_queue_size');
    await expectError(await post(srv, '/v1/models/load', { model_id: 'has space', model_path: small }),
      400, 'invalid_value', 'model_id');
    await expectError(await post(srv, '/v1/models/load', { model_id: 'x', model_path: '/nonexistent/m.gguf' }),
      400, 'invalid_model_path', 'model_path');
    await expectError(await post(srv, '/v1/models/load', { model_id: 'x', model_path: '../../etc/passwd' }),
      400, 'invalid_model_path', 'model_path');
    const empty = path.join(tmpDir, 'empty-dir');
    mkdirSync(empty, { recursive: true });
    await expectError(await post(srv, '/v1/models/load', { model_id: 'x', model_path: empty }), 400,
      'platform_detection_failed', 'model_path');
    const notGguf = path.join(tmpDir, 'notes.txt');
    writeFileSync(notGguf, 'just text');
    await expectError(await post(srv, '/v1/models/load', { model_id: 'x', model_path: notGguf }), 400,
      'platform_detection_failed', 'model_path');
    const broken = path.join(tmpDir, 'broken.gguf');
    writeFileSync(broken, Buffer.concat([Buffer.from('GGUF'), Buffer.from([3, 0, 0, 0]), Buffer.alloc(9, 0xff)]));
    const e = await expectError(await post(srv, '/v1/models/load', { model_id: 'x', model_path: broken }), 500,
      'model_load_failed');
    assert.ok(e.message.length > 10, 'the message says why');
    const list = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.equal(list.data.find((m) => m.id === 'x'), undefined, 'failed loads leave nothing behind');
  });

  test('default_params are validated', async () => {
    const load = (dp) => post(srv, '/v1/models/load', { model_id: 'dp', model_path: small, default_params: dp });
    await expectError(await load({ temperature: 'hot' }), 400, 'invalid_type', 'default_params.temperature');
    await expectError(await load({ top_p: 3 }), 400, 'invalid_value', 'default_params.top_p');
    await expectError(await load({ temprature: 0.1 }), 400, 'unknown_parameter', 'default_params');
    await expectError(await load({ stop: [1] }), 400, 'invalid_type', 'default_params.stop[0]');
    await expectError(await load('yes'), 400, 'invalid_type', 'default_params');
    const r = await load({ temperature: 0, max_tokens: 5, stop: ['zzz'], enable_thinking: false });
    assert.equal(r.status, 200);
    // The model's defaults apply when the request does not say: max_tokens 5.
    const c = await (await post(srv, '/v1/chat/completions', { model: 'dp', messages: [{ role: 'user', content: 'Hello there' }] })).json();
    assert.equal(c.usage.completion_tokens, 5);
    assert.equal(c.choices[0].finish_reason, 'length');
    await post(srv, '/v1/models/unload', { model_id: 'dp' });
  });

  test('resize and unload of unknown models are 404; resize to 0 is 400', async () => {
    await expectError(await post(srv, '/v1/models/resize', { model_id: 'nope', instance_count: 2 }), 404,
      'model_not_found', 'model_id');
    await expectError(await post(srv, '/v1/models/unload', { model_id: 'nope' }), 404, 'model_not_found', 'model_id');
    await post(srv, '/v1/models/load', { model_id: 'rz', model_path: small });
    await expectError(await post(srv, '/v1/models/resize', { model_id: 'rz', instance_count: 0 }), 400,
      'invalid_instance_count', 'instance_count');
    await post(srv, '/v1/models/unload', { model_id: 'rz' });
  });

  test('two instances serve two streams at the same time', async () => {
    await post(srv, '/v1/models/load', { model_id: 'two', model_path: slow, instance_count: 2 });
    const start = () => post(srv, '/v1/chat/completions', chatBody('two', { stream: true, max_tokens: 120 }));
    const [a, b] = await Promise.all([start(), start()]);
    const [ra, rb] = await Promise.all([readStream(a), readStream(b)]);
    assert.ok(ra.text.includes('[DONE]') && rb.text.includes('[DONE]'));
    assert.ok(ra.times.length > 50 && rb.times.length > 50);
    // Both progressed together: each got its first token before the other got its last.
    assert.ok(rb.times[0] < ra.times.at(-1), 'b started before a finished');
    assert.ok(ra.times[0] < rb.times.at(-1), 'a started before b finished');
    await post(srv, '/v1/models/unload', { model_id: 'two' });
  });

  test('one instance with a queue of one: the third concurrent request gets 429', async () => {
    await post(srv, '/v1/models/load', { model_id: 'q', model_path: slow, instance_count: 1, request_queue_size: 1 });
    const first = await post(srv, '/v1/chat/completions', chatBody('q', { stream: true, max_tokens: 400 }));
    const reader = first.body.getReader();
    await reader.read(); // the first is running
    const second = post(srv, '/v1/chat/completions', chatBody('q', { max_tokens: 3 }));
    await new Promise((r) => setTimeout(r, 100)); // the second is waiting in the queue
    const third = await post(srv, '/v1/chat/completions', chatBody('q', { max_tokens: 3 }));
    assert.equal(third.status, 429);
    assert.ok(third.headers.get('retry-after'));
    const e = errorOf(await third.json());
    assert.equal(e.code, 'queue_full');
    assert.equal(e.type, 'rate_limit_exceeded');
    let rest = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    assert.ok(rest.includes('[DONE]'), 'the first completes');
    const s = await second;
    assert.equal(s.status, 200, 'the queued one completes');
    assert.equal((await s.json()).usage.completion_tokens, 3);
    await post(srv, '/v1/models/unload', { model_id: 'q' });
  });

  test('unload during generation ends the stream and later requests are 404', async () => {
    await post(srv, '/v1/models/load', { model_id: 'u', model_path: slow });
    const res = await post(srv, '/v1/chat/completions', chatBody('u', { stream: true, max_tokens: 3000 }));
    const reader = res.body.getReader();
    await reader.read();
    const un = await post(srv, '/v1/models/unload', { model_id: 'u' });
    assert.equal(un.status, 200);
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    assert.ok(!text.includes('[DONE]'), 'a cut stream does not claim completion');
    const event = text.match(/event: error\ndata: (.*)\n/);
    assert.ok(event, 'the stream ends with an error event');
    const { error } = JSON.parse(event[1]);
    assert.equal(error.code, 'model_not_found');
    assert.equal(error.message, "model 'u' was unloaded");
    await expectError(await post(srv, '/v1/chat/completions', chatBody('u')), 404, 'model_not_found', 'model');
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });

  test('unload during a whole (non-streamed) answer is 404 model_not_found, not a server error', async () => {
    await post(srv, '/v1/models/load', { model_id: 'w', model_path: slow });
    const pending = post(srv, '/v1/chat/completions', chatBody('w', { max_tokens: 3000 }));
    // Unload once the request runs (the model's /slots say so), so it is cut mid-generation.
    for (let i = 0; i < 100; i++) {
      const slots = await (await fetch(`${srv.url}/slots?model=w`)).json();
      if (Array.isArray(slots) && slots.some((s) => s.is_processing)) break;
      await new Promise((ok) => setTimeout(ok, 20));
    }
    assert.equal((await post(srv, '/v1/models/unload', { model_id: 'w' })).status, 200);
    await expectError(await pending, 404, 'model_not_found', 'model');
  });

  test('a client that disconnects mid-stream frees its instance', async () => {
    await post(srv, '/v1/models/load', { model_id: 'd', model_path: slow, instance_count: 1, request_queue_size: 0 });
    const ctl = new AbortController();
    const res = await post(srv, '/v1/chat/completions', chatBody('d', { stream: true, max_tokens: 3000 }))
      .then((r) => r) ;
    const reader = res.body.getReader();
    await reader.read();
    await reader.cancel();
    ctl.abort();
    // With no queue, a request would get 429 while the instance stayed busy.
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      const r = await post(srv, '/v1/chat/completions', chatBody('d', { max_tokens: 2 }));
      status = r.status;
      await r.text();
      if (status !== 200) await new Promise((ok) => setTimeout(ok, 100));
    }
    assert.equal(status, 200);
    await post(srv, '/v1/models/unload', { model_id: 'd' });
  });

  test('100 load/unload cycles leave RSS and open files flat', async () => {
    const cycle = async (i) => {
      const id = `c${i}`;
      assert.equal((await post(srv, '/v1/models/load', { model_id: id, model_path: small })).status, 200);
      assert.equal((await post(srv, '/v1/models/unload', { model_id: id })).status, 200);
    };
    for (let i = 0; i < 10; i++) await cycle(i); // warm-up: allocator arenas, lazy init
    const before = procStats(srv.proc.pid);
    for (let i = 10; i < 110; i++) await cycle(i);
    const afterStats = procStats(srv.proc.pid);
    assert.equal(afterStats.fds, before.fds, 'no file descriptor leaks');
    assert.ok(afterStats.rssKiB - before.rssKiB < 8 * 1024,
      `RSS grew by ${afterStats.rssKiB - before.rssKiB} KiB`);
  });
});

describe('memory budget', () => {
  test('instances that do not fit --memory-limit make a partial load, not a crash', async () => {
    const small = synthModel('small', SMALL);
    // One instance of the small model needs about 1 MiB of KV cache per 512 tokens of context
    // at these shapes; 6 MiB holds a few of its 4096-token instances but not ten.
    const srv = await startServer(['--threads', '1', '--memory-limit', '6']);
    try {
      const r = await post(srv, '/v1/models/load', { model_id: 'p', model_path: small, instance_count: 10 });
      assert.equal(r.status, 200);
      const body = await r.json();
      assert.ok(body.actual_instance_count >= 1 && body.actual_instance_count < 10, JSON.stringify(body));
      assert.equal(body.message, "model 'p' partially loaded");
      const rz = await (await post(srv, '/v1/models/resize', { model_id: 'p', instance_count: 12 })).json();
      assert.equal(rz.message, "model 'p' partially resized");
      assert.equal(rz.actual_instance_count, body.actual_instance_count);
      const c = await post(srv, '/v1/chat/completions', { model: 'p', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
      assert.equal(c.status, 200);
    } finally {
      await srv.stop();
    }
  });
});

describe('start-up loading', () => {
  test('HTTP is up while a -m model loads, and requests for it wait instead of failing', async () => {
    const big = synthModel('bigvocab', ['--arch', 'llama', '--layers', '1', '--embd', '32', '--heads', '2',
      '--heads-kv', '1', '--ffn', '64', '--vocab', '120000', '--ctx', '512', '--type', 'f16', '--seed', '5']);
    const srv = await startServer(['--threads', '1', '-m', big, '-a', 'big'], { waitReady: false });
    try {
      const health = await fetch(`${srv.url}/health`);
      assert.equal(await health.text(), 'ok');
      const [chat, info] = await Promise.all([
        post(srv, '/v1/chat/completions', { model: 'big', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
        fetch(`${srv.url}/v1/models/big`).then((r) => r.json()).catch(() => null),
      ]);
      assert.equal(chat.status, 200, 'the request waited for the load');
      if (info && !info.error) assert.ok(['loading', 'ready'].includes(info.status));
    } finally {
      await srv.stop();
    }
  });
});
