// Running as a service: --config files, the --models-preset list and its SIGHUP reload
// (new models load, removed ones unload, the rest keep serving), and GET /health?model=ID.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, errorOf } from './lib/server.mjs';
import { synthModel, SMALL, SLOW, tmpDir } from './lib/models.mjs';
import { rkllmFake, makeBoard, makeRkllmModel } from './lib/rockchip.mjs';
import { existsSync, mkdirSync } from 'node:fs';

const NO_EOS = { 2: -100 }; // random weights keep generating until max_tokens

async function health(srv, model) {
  const res = await fetch(`${srv.url}/health?model=${encodeURIComponent(model)}`);
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
}

// Polls until pred(health) holds (bounded).
async function waitHealth(srv, model, pred, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const h = await health(srv, model);
    if (pred(h)) return h;
    if (Date.now() > end) throw new Error(`health of ${model} stayed ${JSON.stringify(h)}\n${srv.log()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('service: --config, --models-preset, SIGHUP, /health?model=', () => {
  let srv, small, slow, presetFile;
  const writePreset = (text) => writeFileSync(presetFile, text);
  before(async () => {
    small = synthModel('small', SMALL);
    slow = synthModel('slow', SLOW);
    presetFile = path.join(tmpDir, 'service-models.ini');
    writePreset(`version = 1\n[*]\nctx-size = 1024\n\n[slow]\nmodel = ${slow}\n`);
    const conf = path.join(tmpDir, 'service.conf');
    writeFileSync(conf, `# as the package's llamapi.conf\nhost = 127.0.0.1\nthreads = 1\n` +
      `models-preset = ${presetFile}\nmetrics = true\nparallel = 2\n`);
    srv = await startServer(['--config', conf]);
  });
  after(async () => { await srv?.stop(); });

  test('the config file applied and the preset model serves', async () => {
    assert.equal((await fetch(`${srv.url}/metrics`)).status, 200); // metrics = true
    const models = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.deepEqual(models.data.map((m) => m.id), ['slow']);
    const res = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'slow', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }) });
    assert.equal(res.status, 200);
  });

  test('/health unchanged, /health?model= answers per model', async () => {
    const plain = await fetch(`${srv.url}/health`);
    assert.equal(plain.status, 200);
    assert.equal(await plain.text(), 'ok');
    const ok = await health(srv, 'slow');
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.body, { status: 'ok', model: 'slow' });
    const absent = await health(srv, 'nope');
    assert.equal(absent.status, 503);
    assert.equal(absent.retryAfter, '1');
    const e = errorOf(absent.body);
    assert.equal(e.code, 'model_not_found');
    assert.equal(e.type, 'unavailable_error');
    assert.match(e.message, /nope/);
  });

  test('SIGHUP loads what is new, unloads what was removed, the rest keeps serving', async () => {
    // A long generation on the model that stays must run through both reloads unharmed.
    const running = fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'slow', messages: [{ role: 'user', content: 'go on' }],
        max_tokens: 60, temperature: 0, logit_bias: NO_EOS, stream: true }) });
    const res = await running;
    assert.equal(res.status, 200);
    const body = res.text();

    writePreset(`version = 1\n[*]\nctx-size = 1024\n[slow]\nmodel = ${slow}\n[small]\nmodel = ${small}\n`);
    srv.proc.kill('SIGHUP');
    await waitHealth(srv, 'small', (h) => h.status === 200);
    assert.equal((await health(srv, 'slow')).status, 200);

    // A broken file leaves everything as it was.
    writePreset(`[small]\nmodel = ${small}\nparallel = many\n`);
    srv.proc.kill('SIGHUP');
    await new Promise((r) => setTimeout(r, 300));
    assert.match(srv.log(), /service-models\.ini:3: parallel: 'many' is not an integer/);
    assert.equal((await health(srv, 'slow')).status, 200);
    assert.equal((await health(srv, 'small')).status, 200);

    // 'small' stays; a load-on-startup = false entry is listed but not loaded.
    writePreset(`[small]\nmodel = ${small}\nctx-size = 1024\n[later]\nmodel = ${slow}\nload-on-startup = false\n`);
    const before = (await fetch(`${srv.url}/v1/models/small`).then((r) => r.json())).created;
    srv.proc.kill('SIGHUP');
    await waitHealth(srv, 'slow', (h) => h.status === 503);
    const text = await body;
    // The stream on the removed model ends: either it finished first, or the unload ended it
    // with an error event; never a broken connection.
    assert.ok(text.includes('[DONE]') || text.includes('event: error'), text.slice(-300));
    const models = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.deepEqual(models.data.map((m) => m.id), ['small']);
    assert.equal((await health(srv, 'later')).status, 503);
    const after = (await fetch(`${srv.url}/v1/models/small`).then((r) => r.json())).created;
    assert.equal(after, before, 'the unchanged model was not reloaded');
    const chat = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }) });
    assert.equal(chat.status, 200);
    // Unloaded through the API meanwhile: the next reload loads it again.
    const un = await fetch(`${srv.url}/v1/models/unload`, { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model_id: 'small' }) });
    assert.equal(un.status, 200);
    assert.equal((await health(srv, 'small')).status, 503);
    srv.proc.kill('SIGHUP');
    await waitHealth(srv, 'small', (h) => h.status === 200);
  });
});

test('--config errors stop the start naming file and line', async () => {
  const conf = path.join(tmpDir, 'bad.conf');
  writeFileSync(conf, 'port = 0\nthreads = lots\n');
  await assert.rejects(startServer(['--config', conf]), new RegExp(`${conf}:2: --threads: 'lots' is not an integer`));
});

// A model seen while it loads: the fake RKLLM runtime takes 1.5 s per handle.
test('/health?model= is 503 model_loading while a SIGHUP-added model loads, then 200', async (t) => {
  if (!existsSync(rkllmFake('1.3'))) { t.skip('the fake RKLLM runtime is not built (make fakes)'); return; }
  const dir = path.join(tmpDir, 'service-npu');
  mkdirSync(dir, { recursive: true });
  const board = makeBoard(path.join(dir, 'board'));
  const model = makeRkllmModel(path.join(dir, 'npu-model'));
  const preset = path.join(dir, 'models.ini');
  writeFileSync(preset, '; nothing yet\n');
  const srv = await startServer(['--rkllm-lib', rkllmFake('1.3'), '--sysfs-root', board,
    '--models-preset', preset], { env: { FAKE_RKLLM_INIT_MS: '1500' } });
  try {
    writeFileSync(preset, `[npu]\nmodel = ${model}\n`);
    srv.proc.kill('SIGHUP');
    const loading = await waitHealth(srv, 'npu', (h) => h.status === 503 && h.body.error.code === 'model_loading');
    assert.equal(loading.retryAfter, '1');
    assert.match(loading.body.error.message, /npu.*loading/);
    await waitHealth(srv, 'npu', (h) => h.status === 200);
  } finally {
    await srv.stop();
  }
});
