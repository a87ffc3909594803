// The HTTP foundation: health, platforms, models, error shapes, CORS, API keys, limits and
// graceful shutdown, against a real server.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import os from 'node:os';
import OpenAI from 'openai';
import { startServer, errorOf } from './lib/server.mjs';

function assertErrorShape(body, { type, code }) {
  const e = errorOf(body);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.ok('param' in e && 'code' in e && 'type' in e);
  if (type) assert.equal(e.type, type);
  if (code !== undefined) assert.equal(e.code, code);
}

// Sends raw bytes and resolves with the status line and the whole response text.
function rawRequest(port, head, { body = null, keepSending = null } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    sock.on('data', (c) => (data += c));
    sock.on('error', (e) => (data ? resolve(data) : reject(e)));
    sock.on('close', () => resolve(data));
    sock.write(head);
    if (body) sock.write(body);
    if (keepSending) keepSending(sock);
  });
}

describe('foundation', () => {
  let srv;
  before(async () => {
    srv = await startServer();
  });
  after(async () => {
    await srv.stop();
  });

  test('GET /health is plain text ok', async () => {
    const r = await fetch(`${srv.url}/health`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/plain/);
    assert.equal(await r.text(), 'ok');
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
  });

  test('GET /v1/platforms lists cpu with the host chips', async () => {
    const r = await fetch(`${srv.url}/v1/platforms`);
    assert.equal(r.status, 200);
    const body = await r.json();
    const cpu = body.platforms.find((p) => p.id === 'cpu');
    assert.ok(cpu, 'cpu platform present');
    assert.equal(cpu.available, true);
    assert.equal(typeof cpu.display_name, 'string');
    const total = cpu.detected_chips.reduce((n, c) => n + c.count, 0);
    assert.equal(total, os.cpus().length);
    assert.equal(cpu.detected_chips[0].chip_type, os.cpus()[0].model.trim());
  });

  test('models list is empty and an unknown model is 404 through the SDK', async () => {
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused' });
    const page = await client.models.list();
    assert.deepEqual(page.data, []);
    await assert.rejects(client.models.retrieve('no-such-model'), (err) => {
      assert.equal(err.status, 404);
      assert.equal(err.code, 'model_not_found');
      assert.equal(err.param, 'model');
      return true;
    });
  });

  test('unknown path is 404 and wrong method is 405 with Allow', async () => {
    let r = await fetch(`${srv.url}/v1/nothing-here`);
    assert.equal(r.status, 404);
    assertErrorShape(await r.json(), { type: 'invalid_request_error', code: 'not_found' });
    r = await fetch(`${srv.url}/v1/platforms`, { method: 'POST', body: '{}' });
    assert.equal(r.status, 405);
    assert.equal(r.headers.get('allow'), 'GET');
    assertErrorShape(await r.json(), { type: 'invalid_request_error', code: 'method_not_allowed' });
  });

  test('malformed JSON, non-object JSON and invalid UTF-8 are 400 with a position', async () => {
    const post = (body) =>
      fetch(`${srv.url}/v1/models/load`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    let r = await post('{"model_id": "x",');
    assert.equal(r.status, 400);
    let e = errorOf(await r.json());
    assert.equal(e.type, 'invalid_request_error');
    assert.match(e.message, /line 1, column \d+/);
    r = await post('[1,2]');
    assert.equal(r.status, 400);
    assert.match(errorOf(await r.json()).message, /must be a JSON object/);
    r = await post(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]));
    assert.equal(r.status, 400);
    assertErrorShape(await r.json(), { type: 'invalid_request_error' });
    r = await post('['.repeat(100) + ']'.repeat(100));
    assert.equal(r.status, 400);
    assert.match(errorOf(await r.json()).message, /nesting/);
    r = await post('');
    assert.equal(r.status, 400);
  });

  test('a declared body over 64 MiB is 413 without the body being read', async () => {
    const text = await rawRequest(
      srv.port,
      'POST /v1/models/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        `Content-Length: ${64 * 1024 * 1024 + 1}\r\n\r\n`,
    );
    assert.match(text, /^HTTP\/1\.1 413/);
    assert.match(text, /request_too_large/);
  });

  test('a chunked body that grows past 64 MiB is 413', async () => {
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const text = await rawRequest(
      srv.port,
      'POST /v1/models/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
      {
        keepSending: (sock) => {
          let sent = 0;
          const pump = () => {
            while (sent < 70 && !sock.destroyed) {
              sent++;
              sock.write(`${chunk.length.toString(16)}\r\n`);
              sock.write(chunk);
              if (!sock.write('\r\n')) return sock.once('drain', pump);
            }
            if (!sock.destroyed) sock.write('0\r\n\r\n');
          };
          sock.on('error', () => {});
          pump();
        },
      },
    );
    assert.match(text, /^HTTP\/1\.1 413/);
  });

  test('CORS preflight answers as llama-server does: 200, the origin, methods and headers', async () => {
    const r = await fetch(`${srv.url}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: { origin: 'http://example.test', 'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type' },
    });
    assert.equal(r.status, 200);
    // With credentials allowed (the default), "*" origins reflect the request's Origin.
    assert.equal(r.headers.get('access-control-allow-origin'), 'http://example.test');
    assert.equal(r.headers.get('access-control-allow-credentials'), 'true');
    assert.equal(r.headers.get('access-control-allow-methods'), 'GET, POST, DELETE, OPTIONS');
    assert.equal(r.headers.get('access-control-allow-headers'), '*');
  });

  test('the server keeps serving after all of the above', async () => {
    const r = await fetch(`${srv.url}/health`);
    assert.equal(await r.text(), 'ok');
  });
});

describe('api keys', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--api-key', 'sk-test-one', '--api-key', 'sk-test-two']);
  });
  after(async () => {
    await srv.stop();
  });

  test('health and preflight need no key', async () => {
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
    assert.equal((await fetch(`${srv.url}/v1/models`, { method: 'OPTIONS' })).status, 200);
  });

  test('missing, wrong and same-length-wrong keys are 401 authentication_error', async () => {
    for (const headers of [{}, { authorization: 'Bearer nope' }, { authorization: 'Bearer sk-test-onf' },
      { 'x-api-key': 'sk-test-xxx' }, { authorization: 'sk-test-one' }]) {
      const r = await fetch(`${srv.url}/v1/models`, { headers });
      assert.equal(r.status, 401, JSON.stringify(headers));
      assertErrorShape(await r.json(), { type: 'authentication_error', code: 'invalid_api_key' });
    }
    const r = await fetch(`${srv.url}/v1/not-a-route`);
    assert.equal(r.status, 401, 'routes are not revealed without a key');
  });

  test('either key works as Bearer or x-api-key, and through the SDK', async () => {
    assert.equal((await fetch(`${srv.url}/v1/models`, { headers: { authorization: 'Bearer sk-test-two' } })).status, 200);
    assert.equal((await fetch(`${srv.url}/v1/models`, { headers: { 'x-api-key': 'sk-test-one' } })).status, 200);
    const ok = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'sk-test-one' });
    assert.deepEqual((await ok.models.list()).data, []);
    const bad = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (err) => err.status === 401);
  });
});

describe('process', () => {
  test('SIGTERM shuts down with exit 0', async () => {
    const srv = await startServer();
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
    const { code } = await srv.stop();
    assert.equal(code, 0);
  });

  test('unknown flags fail with a usage hint', async () => {
    await assert.rejects(startServer(['--no-such-flag']), /unknown flag '--no-such-flag' \(see --help\)/);
  });
});
