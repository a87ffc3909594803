// Ollama's POST /api/pull of Hugging Face GGUFs (`hf.co/org/repo[:QUANT]`) through the hub
// client, against the hub imitation on loopback (lib/fakehub.mjs): streamed status lines with
// throttled progress, stream:false, reuse of a downloaded file, a missing quant or repository,
// --offline, names that are not hub names, and /api/chat loading a pulled model by that name.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { Ollama } from 'ollama';
import { startServer } from './lib/server.mjs';
import { startHub, sha256 } from './lib/fakehub.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

const root = mkdtempSync(path.join(os.tmpdir(), 'llamapi-ollama-pull-'));
const repos = {
  'org/other': { files: { 'Other-Q4_K_M.gguf': randomBytes(50_000), 'Other-Q8_0.gguf': randomBytes(70_000) } },
};
let hub;
let tiny;
const cdnRequests = (file) => hub.log.filter((r) => r.url.startsWith('/cdn/') && r.url.endsWith(`/${file}`));

async function pull(srv, body) {
  const res = await fetch(`${srv.url}/api/pull`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  const text = await res.text();
  const type = res.headers.get('content-type');
  const lines = type === 'application/x-ndjson' ? text.trim().split('\n').map((l) => JSON.parse(l)) : null;
  return { status: res.status, type, lines, json: lines ? null : JSON.parse(text) };
}

before(async () => {
  tiny = readFileSync(synthModel('small', SMALL));
  repos['org/tiny'] = { files: { 'tiny-Q8_0.gguf': tiny }, slowMs: 150 };
  hub = await startHub(repos);
});
after(async () => {
  await hub.close();
});

describe('POST /api/pull from the hub', () => {
  const dir = path.join(root, 'models');
  let srv;
  before(async () => {
    srv = await startServer(['--threads', '1', '--hub-url', hub.url, '--models-dir', dir]);
  });
  after(async () => {
    await srv?.stop();
  });

  test('a streamed pull: manifest, throttled progress, verifying, success', async () => {
    const r = await pull(srv, { model: 'hf.co/org/tiny:Q8_0' });
    assert.equal(r.status, 200);
    assert.equal(r.type, 'application/x-ndjson');
    const { lines } = r;
    assert.deepEqual(lines[0], { status: 'pulling manifest' });
    assert.deepEqual(lines.slice(-2), [{ status: 'verifying sha256 digest' }, { status: 'success' }]);
    const progress = lines.slice(1, -2);
    const digest = `sha256:${sha256(tiny)}`;
    assert.ok(progress.length >= 2, `progress lines while it downloads: ${JSON.stringify(lines)}`);
    // 1.5 s of download at most 4 lines a second, plus the last one.
    assert.ok(progress.length <= 9, `throttled: ${progress.length} lines`);
    let last = -1;
    for (const p of progress) {
      assert.equal(p.status, `pulling ${sha256(tiny).slice(0, 12)}`);
      assert.equal(p.digest, digest);
      assert.equal(p.total, tiny.length);
      assert.ok(p.completed >= last && p.completed <= p.total);
      last = p.completed;
    }
    assert.ok(progress[0].completed < tiny.length, 'a line before the end');
    assert.equal(last, tiny.length);
    assert.deepEqual(readFileSync(path.join(dir, 'org/tiny/tiny-Q8_0.gguf')), tiny);
  });

  test('pulling again reuses the file; stream:false answers once', async () => {
    const before = cdnRequests('tiny-Q8_0.gguf').length;
    const again = await pull(srv, { model: 'hf.co/org/tiny:Q8_0' });
    assert.deepEqual(again.lines, [{ status: 'pulling manifest' }, { status: 'verifying sha256 digest' },
      { status: 'success' }]);
    const once = await pull(srv, { model: 'huggingface.co/org/tiny:latest', stream: false });
    assert.equal(once.status, 200);
    assert.deepEqual(once.json, { status: 'success' });
    assert.equal(cdnRequests('tiny-Q8_0.gguf').length, before, 'no second download');
  });

  test('stream:false downloads the default quant', async () => {
    const r = await pull(srv, { name: 'hf.co/org/other', stream: false });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { status: 'success' });
    assert.ok(existsSync(path.join(dir, 'org/other/Other-Q4_K_M.gguf')));
    assert.ok(!existsSync(path.join(dir, 'org/other/Other-Q8_0.gguf')));
  });

  test('a missing quant or repository is the hub\'s 404, whole or streamed', async () => {
    const quant = await pull(srv, { model: 'hf.co/org/other:Q3_K_S', stream: false });
    assert.equal(quant.status, 404);
    assert.match(quant.json.error, /no Q3_K_S model file/);
    const repo = await pull(srv, { model: 'hf.co/org/nothing', stream: false });
    assert.equal(repo.status, 404);
    assert.match(repo.json.error, /not found on the hub/);
    const streamed = await pull(srv, { model: 'hf.co/org/other:Q3_K_S' });
    assert.equal(streamed.status, 200);
    assert.deepEqual(streamed.lines[0], { status: 'pulling manifest' });
    assert.equal(streamed.lines.length, 2);
    assert.match(streamed.lines[1].error, /no Q3_K_S model file/);
    const bad = await pull(srv, { model: 'hf.co/../etc', stream: false });
    assert.equal(bad.status, 400);
    assert.equal(typeof bad.json.error, 'string');
  });

  test('the official client streams a pull and reads its errors', async () => {
    const ollama = new Ollama({ host: srv.url });
    const statuses = [];
    for await (const p of await ollama.pull({ model: 'hf.co/org/other:Q8_0', stream: true })) statuses.push(p.status);
    assert.equal(statuses[0], 'pulling manifest');
    assert.deepEqual(statuses.slice(-2), ['verifying sha256 digest', 'success']);
    assert.ok(statuses.includes(`pulling ${sha256(repos['org/other'].files['Other-Q8_0.gguf']).slice(0, 12)}`));
    await assert.rejects(ollama.pull({ model: 'hf.co/org/nothing' }),
      (err) => err.status_code === 404 && /not found on the hub/.test(err.error));
  });

  test('names that are not hub names are pulled only when present', async () => {
    const r = await pull(srv, { model: 'llama3.2', stream: false });
    assert.equal(r.status, 404);
    assert.match(r.json.error, /model 'llama3.2' not found; only Hugging Face GGUF models can be pulled/);
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });

  test('/api/chat with a pulled hub name loads it from the models folder; an unpulled one is 404', async () => {
    const chat = (model) => fetch(`${srv.url}/api/chat`, { method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], stream: false,
        options: { num_predict: 3 } }) });
    const name = 'hf.co/org/tiny:Q8_0';
    const r = await chat(name);
    assert.equal(r.status, 200, await r.clone().text());
    assert.equal((await r.json()).model, name);
    const ps = await (await fetch(`${srv.url}/api/ps`)).json();
    assert.ok(ps.models.some((m) => m.name === name), JSON.stringify(ps));
    const before = hub.log.length;
    const missing = await chat('hf.co/org/tiny:Q4_0');
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { error: "model 'hf.co/org/tiny:Q4_0' not found" });
    assert.equal(hub.log.length, before, 'a chat never asks the hub');
  });
});

describe('POST /api/pull with --offline', () => {
  test('refuses what is not there without asking the hub; serves what is', async () => {
    const dir = path.join(root, 'models');
    const srv = await startServer(['--threads', '1', '--offline', '--hub-url', hub.url, '--models-dir', dir]);
    try {
      const before = hub.log.length;
      const none = await pull(srv, { model: 'hf.co/org/nothing', stream: false });
      assert.equal(none.status, 400);
      assert.match(none.json.error, /offline/);
      const streamed = await pull(srv, { model: 'hf.co/org/nothing' });
      assert.match(streamed.lines.at(-1).error, /offline/);
      const cached = await pull(srv, { model: 'hf.co/org/tiny:Q8_0', stream: false });
      assert.deepEqual(cached.json, { status: 'success' });
      assert.equal(hub.log.length, before, 'offline: no request');
    } finally {
      await srv.stop();
    }
  });
});
