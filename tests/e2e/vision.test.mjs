// Image input through a multimodal projector: the shared tiny Gemma 3 projector with a synthetic
// Gemma 3 text model (gguf-synth, as scripts/gen-mtmd-goldens.sh makes it). Different images get
// different greedy answers, each byte for byte the reference's (tests/data/mtmd/*.answer.hex);
// chat completions (official openai SDK), Anthropic image blocks and Responses input_image
// reach the same image; a repeated image is served from the prompt cache; bad media are 400s;
// /props and /v1/models report vision; mmproj_path and a projector beside the model load.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, repoRoot, sharedDir, hasShared } from './lib/server.mjs';
import { synthModel, tmpDir } from './lib/models.mjs';
import { greyPng } from './lib/png.mjs';

const PROJ = path.join(sharedDir, 'models/mmproj/mmproj-tinygemma3.gguf');
const DATA = path.join(repoRoot, 'tests/data/mtmd');
// keep in step with scripts/gen-mtmd-goldens.sh
const G3 = ['--arch', 'gemma3', '--embd', '128', '--heads', '4', '--heads-kv', '2', '--layers', '2',
  '--ffn', '256', '--ctx', '1024', '--swa', '0', '--seed', '2'];
const PROMPT = 'What is this?';

const dataUrl = (name) => `data:image/png;base64,${readFileSync(path.join(DATA, `${name}.png`)).toString('base64')}`;
const b64 = (name) => readFileSync(path.join(DATA, `${name}.png`)).toString('base64');

// The reference cli prints a newline, the answer, a newline when it ended on end-of-generation,
// then two newlines.
function referenceAnswer(name) {
  const raw = Buffer.from(readFileSync(path.join(DATA, `${name}.answer.hex`), 'utf8').trim(), 'hex');
  return raw;
}
function asPrinted(bytes, finish) {
  return Buffer.concat([Buffer.from('\n'), bytes, Buffer.from(finish === 'stop' ? '\n\n\n' : '\n\n')]);
}

async function post(srv, route, body) {
  const r = await fetch(`${srv.url}${route}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const imageMessage = (url, text = PROMPT) => [{ role: 'user', content: [
  { type: 'image_url', image_url: { url } }, { type: 'text', text }] }];

describe('vision (gemma3 projector)', { skip: !hasShared && 'shared models absent' }, () => {
  let srv, client, model;
  before(async () => {
    model = synthModel('vision-g3', G3);
    srv = await startServer(['-m', model, '--mmproj', PROJ, '--threads', '1', '--alias', 'g3']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await srv?.stop();
  });

  test('each image gets the reference greedy answer, and they differ', async () => {
    const answers = new Set();
    for (const name of ['a', 'b', 'c']) {
      const r = await client.chat.completions.create({ model: 'g3', messages: imageMessage(dataUrl(name)),
        temperature: 0, max_tokens: 12, logprobs: true });
      const bytes = Buffer.from(r.choices[0].logprobs.content.flatMap((t) => t.bytes));
      assert.deepEqual(asPrinted(bytes, r.choices[0].finish_reason), referenceAnswer(name), name);
      // BOS + template + <start_of_image> pieces + 256 embeddings + <end_of_image> + the rest
      assert.equal(r.usage.prompt_tokens, 315, name);
      answers.add(bytes.toString('hex'));
    }
    assert.equal(answers.size, 3);
  });

  test('a repeated image reuses the cache; another image does not', async () => {
    const ask = (name) => client.chat.completions.create({ model: 'g3', messages: imageMessage(dataUrl(name)),
      temperature: 0, max_tokens: 4 });
    const first = await ask('b');
    const again = await ask('b');
    assert.equal(again.choices[0].message.content, first.choices[0].message.content);
    assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 300, JSON.stringify(again.usage));
    const other = await ask('a');
    assert.ok(other.usage.prompt_tokens_details.cached_tokens < 40, JSON.stringify(other.usage));
  });

  test('Anthropic image blocks and Responses input_image see the same image', async () => {
    const want = await client.chat.completions.create({ model: 'g3', messages: imageMessage(dataUrl('c')),
      temperature: 0, max_tokens: 12 });
    const anthropic = new Anthropic({ baseURL: srv.url, apiKey: 'unused', maxRetries: 0 });
    const a = await anthropic.messages.create({ model: 'g3', max_tokens: 12, temperature: 0,
      messages: [{ role: 'user', content: [
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: b64('c') } },
        { type: 'text', text: PROMPT }] }] });
    assert.equal(a.content[0].text, want.choices[0].message.content);
    const r = await client.responses.create({ model: 'g3', temperature: 0, max_output_tokens: 12,
      input: [{ role: 'user', content: [
        { type: 'input_image', image_url: dataUrl('c') }, { type: 'input_text', text: PROMPT }] }] });
    assert.equal(r.output_text, want.choices[0].message.content);
  });

  test('bad media are clear 400s and the server keeps serving', async () => {
    const png = readFileSync(path.join(DATA, 'a.png'));
    const truncated = `data:image/png;base64,${png.subarray(0, 400).toString('base64')}`;
    let r = await post(srv, '/v1/chat/completions', { model: 'g3', messages: imageMessage(truncated) });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'invalid_content_part');
    assert.match(r.body.error.message, /truncated/);
    assert.equal(r.body.error.param, 'messages[0].content[0]');
    // 1 x 100000: refused by its size limits
    const tall = greyPng(1, 100000);
    r = await post(srv, '/v1/chat/completions', { model: 'g3',
      messages: imageMessage(`data:image/png;base64,${tall.toString('base64')}`) });
    assert.equal(r.status, 400);
    assert.match(r.body.error.message, /1x100000/);
    r = await post(srv, '/v1/chat/completions', { model: 'g3', messages: imageMessage('data:image/png;base64,!!!') });
    assert.equal(r.status, 400);
    // the marker text itself is not an image
    r = await post(srv, '/v1/chat/completions', { model: 'g3',
      messages: imageMessage(dataUrl('a'), 'see <__media__> here') });
    assert.equal(r.status, 400);
    assert.match(r.body.error.message, /media marker/);
    const ok = await client.chat.completions.create({ model: 'g3', messages: imageMessage(dataUrl('a')),
      temperature: 0, max_tokens: 2 });
    assert.equal(ok.object, 'chat.completion');
  });

  test('/props and /v1/models report vision', async () => {
    const props = await (await fetch(`${srv.url}/props`)).json();
    assert.deepEqual(props.modalities, { vision: true, audio: false });
    const models = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.deepEqual(models.data[0].modalities, { vision: true, audio: false });
    assert.equal(models.data[0].projector, 'gemma3');
  });

  test('mmproj_path on /v1/models/load, and a projector beside the model', async () => {
    let r = await post(srv, '/v1/models/load', { model_id: 'g3b', model_path: model, mmproj_path: PROJ });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    r = await post(srv, '/v1/models/load', { model_id: 'g3c', model_path: model, mmproj_path: '/nonexistent/mmproj.gguf' });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.param, 'mmproj_path');
    r = await post(srv, '/v1/models/load', { model_id: 'g3d', model_path: model, mmproj_path: model });
    assert.equal(r.status, 500); // not a projector
    assert.match(r.body.error.message, /clip/);
    const dir = path.join(tmpDir, 'vision-dir');
    mkdirSync(dir, { recursive: true });
    symlinkSync(model, path.join(dir, 'model.gguf'));
    symlinkSync(PROJ, path.join(dir, 'mmproj-tiny.gguf'));
    r = await post(srv, '/v1/models/load', { model_id: 'g3e', model_path: dir });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const want = await client.chat.completions.create({ model: 'g3', messages: imageMessage(dataUrl('b')),
      temperature: 0, max_tokens: 6 });
    for (const id of ['g3b', 'g3e']) {
      const got = await client.chat.completions.create({ model: id, messages: imageMessage(dataUrl('b')),
        temperature: 0, max_tokens: 6 });
      assert.equal(got.choices[0].message.content, want.choices[0].message.content, id);
    }
    // without a projector the same model refuses images by modality
    r = await post(srv, '/v1/models/load', { model_id: 'g3text', model_path: model });
    assert.equal(r.status, 200);
    r = await post(srv, '/v1/chat/completions', { model: 'g3text', messages: imageMessage(dataUrl('a')) });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'unsupported_content_part_type');
  });
});
