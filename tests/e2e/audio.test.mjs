// Audio input through an audio projector: a synthetic Ultravox projector (mmproj-synth) with a
// synthetic llama text model (gguf-synth), as scripts/gen-mtmd-goldens.sh makes them. Different
// clips get different greedy answers, each byte for byte the reference's
// (tests/data/mtmd/audio-*.answer.hex), a 31 s clip included (two 30 s windows); usage counts
// the audio's positions; a repeated clip is served from the prompt cache; bad audio is a 400
// naming the part; images to an audio-only projector, and audio to a model without one or with
// an image projector, are refused; /props, /v1/models and /api/show report audio.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, mkdirSync, symlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, repoRoot, toolsDir, sharedDir, hasShared } from './lib/server.mjs';
import { synthModel, tmpDir } from './lib/models.mjs';

const DATA = path.join(repoRoot, 'tests/data/mtmd');
// keep in step with scripts/gen-mtmd-goldens.sh
const LM = ['--arch', 'llama', '--embd', '128', '--heads', '4', '--heads-kv', '2', '--layers', '2',
  '--ffn', '256', '--ctx', '1024', '--seed', '4'];
const UV = ['--projector', 'ultravox', '--mel', '80', '--embd', '64', '--layers', '2', '--heads', '4',
  '--ffn', '128', '--stack', '4', '--proj-ffn', '128', '--out', '128', '--type', 'f32', '--seed', '1'];
const PROMPT = 'What is this?';
// The prompt around the clip: BOS and the template's text (the clip has no text of its own).
const TEXT_TOKENS = 28;

const wav = (name) => readFileSync(path.join(DATA, `audio-${name}.wav`));
const b64 = (name) => wav(name).toString('base64');

// The reference cli prints a newline, the answer, a newline when it ended on end-of-generation,
// then two newlines.
const referenceAnswer = (name) =>
  Buffer.from(readFileSync(path.join(DATA, `audio-${name}.answer.hex`), 'utf8').trim(), 'hex');
const asPrinted = (bytes, finish) =>
  Buffer.concat([Buffer.from('\n'), bytes, Buffer.from(finish === 'stop' ? '\n\n\n' : '\n\n')]);

async function post(srv, route, body) {
  const r = await fetch(`${srv.url}${route}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const audioMessage = (data, format = 'wav', text = PROMPT) => [{ role: 'user', content: [
  { type: 'input_audio', input_audio: { data, format } }, { type: 'text', text }] }];

// A 16-bit mono PCM WAV of the given samples at rate Hz.
function wavOf(samples, rate = 16000) {
  const data = Buffer.alloc(samples.length * 2);
  samples.forEach((s, i) => data.writeInt16LE(Math.max(-32767, Math.min(32767, Math.round(s * 32767))), i * 2));
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

describe('audio (ultravox projector)', () => {
  let srv, client, model, proj;
  before(async () => {
    model = synthModel('audio-lm', LM);
    proj = path.join(tmpDir, 'audio-uv', 'mmproj-uv.gguf');
    mkdirSync(path.dirname(proj), { recursive: true });
    execFileSync(path.join(toolsDir, 'mmproj-synth'), [...UV, '-o', proj]);
    srv = await startServer(['-m', model, '--mmproj', proj, '--threads', '1', '--alias', 'uv']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await srv?.stop();
  });

  test('each clip gets the reference greedy answer, and they differ', async () => {
    const answers = new Set();
    for (const [name, windows] of [['a', 1], ['b', 1], ['long', 2]]) {
      const r = await client.chat.completions.create({ model: 'uv', messages: audioMessage(b64(name)),
        temperature: 0, max_tokens: 12, logprobs: true });
      const bytes = Buffer.from(r.choices[0].logprobs.content.flatMap((t) => t.bytes));
      assert.deepEqual(asPrinted(bytes, r.choices[0].finish_reason), referenceAnswer(name), name);
      // 375 embeddings per 30 s window (1500 encoder frames stacked by 4), nothing around them
      assert.equal(r.usage.prompt_tokens, TEXT_TOKENS + 375 * windows, name);
      answers.add(bytes.toString('hex'));
    }
    assert.equal(answers.size, 3);
  });

  test('a repeated clip is served from the cache with the same tokens', async () => {
    const ask = (name) => client.chat.completions.create({ model: 'uv', messages: audioMessage(b64(name)),
      temperature: 0, max_tokens: 8, logprobs: true });
    const ids = (r) => r.choices[0].logprobs.content.map((t) => t.token).join('|');
    const first = await ask('b');
    const again = await ask('b');
    assert.equal(ids(again), ids(first));
    assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 375, JSON.stringify(again.usage));
    const other = await ask('a');
    assert.ok(other.usage.prompt_tokens_details.cached_tokens < 40, JSON.stringify(other.usage));
    // a data URL is the same clip
    const viaUrl = await client.chat.completions.create({ model: 'uv', temperature: 0, max_tokens: 8,
      logprobs: true, messages: audioMessage(`data:audio/wav;base64,${b64('b')}`) });
    assert.equal(ids(viaUrl), ids(first));
  });

  test('silence is valid input; other sample rates are resampled', async () => {
    const r = await client.chat.completions.create({ model: 'uv', messages: audioMessage(b64('silent')),
      temperature: 0, max_tokens: 12, logprobs: true });
    const bytes = Buffer.from(r.choices[0].logprobs.content.flatMap((t) => t.bytes));
    assert.deepEqual(asPrinted(bytes, r.choices[0].finish_reason), referenceAnswer('silent'));
    // 1 s at 8 kHz: resampled to 16 kHz, one window
    const tone = Array.from({ length: 8000 }, (_, i) => 0.4 * Math.sin(2 * Math.PI * 440 * i / 8000));
    const r8 = await client.chat.completions.create({ model: 'uv', temperature: 0, max_tokens: 4,
      messages: audioMessage(wavOf(tone, 8000).toString('base64')) });
    assert.equal(r8.usage.prompt_tokens, TEXT_TOKENS + 375);
  });

  test('bad audio is a clear 400 naming the part, and the server keeps serving', async () => {
    const cases = [
      [wav('a').subarray(0, 30).toString('base64'), 'wav', /audio/],     // truncated header
      [Buffer.from('not audio at all').toString('base64'), 'wav', /audio/],
      [wavOf([]).toString('base64'), 'wav', /audio/],                     // no samples
      ['!!!not base64', 'wav', /base64/],
      [b64('a'), 'mp3', /not mp3/],                                       // a WAV sent as mp3
      [b64('a'), 'ogg', /not supported/],
    ];
    for (const [data, format, re] of cases) {
      const r = await post(srv, '/v1/chat/completions', { model: 'uv', messages: audioMessage(data, format) });
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.error.type, 'invalid_request_error');
      assert.equal(r.body.error.code, 'invalid_content_part');
      assert.equal(r.body.error.param, 'messages[0].content[0]');
      assert.match(r.body.error.message, re);
    }
    // longer than the 10-minute limit (8 kHz to keep the body small)
    const long = wavOf(new Array(8000 * 601).fill(0), 8000);
    let r = await post(srv, '/v1/chat/completions', { model: 'uv', messages: audioMessage(long.toString('base64')) });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.param, 'messages[0].content[0]');
    assert.match(r.body.error.message, /duration|long|limit/i);
    // within the limit but beyond the context (3 windows > 1024 positions)
    const wide = wavOf(new Array(8000 * 65).fill(0), 8000);
    r = await post(srv, '/v1/chat/completions', { model: 'uv', messages: audioMessage(wide.toString('base64')) });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'context_length_exceeded');
    // an image to an audio-only projector
    const png = readFileSync(path.join(DATA, 'a.png')).toString('base64');
    r = await post(srv, '/v1/chat/completions', { model: 'uv', messages: [{ role: 'user', content: [
      { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }] }] });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'unsupported_content_part_type');
    assert.match(r.body.error.message, /image/);
    const ok = await client.chat.completions.create({ model: 'uv', messages: audioMessage(b64('a')),
      temperature: 0, max_tokens: 2 });
    assert.equal(ok.object, 'chat.completion');
  });

  test('/props, /v1/models and /api/show report audio', async () => {
    const props = await (await fetch(`${srv.url}/props`)).json();
    assert.deepEqual(props.modalities, { vision: false, audio: true });
    const models = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.deepEqual(models.data[0].modalities, { vision: false, audio: true });
    assert.equal(models.data[0].projector, 'ultravox');
    const show = await post(srv, '/api/show', { model: 'uv' });
    assert.equal(show.status, 200);
    assert.ok(show.body.capabilities.includes('audio'), JSON.stringify(show.body.capabilities));
  });

  test('mmproj_path on /v1/models/load, a projector beside the model, and none', async () => {
    let r = await post(srv, '/v1/models/load', { model_id: 'uvb', model_path: model, mmproj_path: proj });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const dir = path.join(tmpDir, 'audio-dir');
    mkdirSync(dir, { recursive: true });
    symlinkSync(model, path.join(dir, 'model.gguf'));
    symlinkSync(proj, path.join(dir, 'mmproj-uv.gguf'));
    r = await post(srv, '/v1/models/load', { model_id: 'uvc', model_path: dir });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const want = referenceAnswer('b');
    for (const id of ['uvb', 'uvc']) {
      const got = await client.chat.completions.create({ model: id, messages: audioMessage(b64('b')),
        temperature: 0, max_tokens: 12, logprobs: true });
      const bytes = Buffer.from(got.choices[0].logprobs.content.flatMap((t) => t.bytes));
      assert.deepEqual(asPrinted(bytes, got.choices[0].finish_reason), want, id);
    }
    // without a projector the same model refuses audio by modality
    r = await post(srv, '/v1/models/load', { model_id: 'uvtext', model_path: model });
    assert.equal(r.status, 200);
    r = await post(srv, '/v1/chat/completions', { model: 'uvtext', messages: audioMessage(b64('a')) });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'unsupported_content_part_type');
    assert.match(r.body.error.message, /does not accept audio input/);
  });

  test('audio to a model whose projector sees images is refused by modality',
    { skip: !hasShared && 'shared models absent' }, async () => {
      const g3 = synthModel('audio-g3', ['--arch', 'gemma3', '--embd', '128', '--heads', '4', '--heads-kv', '2',
        '--layers', '2', '--ffn', '256', '--ctx', '1024', '--swa', '0', '--seed', '2']);
      let r = await post(srv, '/v1/models/load', { model_id: 'g3', model_path: g3,
        mmproj_path: path.join(sharedDir, 'models/mmproj/mmproj-tinygemma3.gguf') });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      r = await post(srv, '/v1/chat/completions', { model: 'g3', messages: audioMessage(b64('a')) });
      assert.equal(r.status, 400);
      assert.equal(r.body.error.code, 'unsupported_content_part_type');
      assert.match(r.body.error.message, /does not accept audio input/);
      const models = await (await fetch(`${srv.url}/v1/models`)).json();
      const entry = models.data.find((m) => m.id === 'g3');
      assert.deepEqual(entry.modalities, { vision: true, audio: false });
    });
});
