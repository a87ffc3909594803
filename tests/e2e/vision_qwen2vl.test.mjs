// Qwen2.5-VL image chat: a synthetic qwen2vl text model and a synthetic qwen2.5vl_merger
// projector (gguf-synth and mmproj-synth, as scripts/gen-mtmd-goldens.sh makes them). Images
// keep their own size, so each takes its own count of positions (an 8x8 grid for the square
// qa, 7x5 for the non-square qb, 30x22 for qc, fed over two batches) with M-RoPE positions;
// different images get different greedy answers, each byte for byte the reference's
// (tests/data/mtmd/q*.answer.hex); a repeated
// image is served from the caches with the same tokens, also when a later turn continues past
// it; Anthropic image blocks and Responses input_image reach the same path; an image past the
// context is a clear 400; the projector with a text model without M-RoPE fails the load.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, repoRoot, toolsDir } from './lib/server.mjs';
import { synthModel, tmpDir } from './lib/models.mjs';
import { greyPng } from './lib/png.mjs';

const DATA = path.join(repoRoot, 'tests/data/mtmd');
// keep in step with scripts/gen-mtmd-goldens.sh
const QLM = ['--arch', 'qwen2vl', '--embd', '128', '--heads', '4', '--heads-kv', '2', '--layers', '2',
  '--ffn', '256', '--ctx', '1024', '--seed', '3'];
const QV = ['--projector', 'qwen2.5vl_merger', '--image', '448', '--patch', '14', '--merge', '2',
  '--embd', '64', '--heads', '4', '--layers', '4', '--ffn', '96', '--wa', '2', '--out', '128',
  '--type', 'f16', '--seed', '7'];
const PROMPT = 'What is this?';
// the template's text, <|vision_start|> and <|vision_end|> (as pieces of the synthetic
// vocabulary) and the question: the same around every image
const TEXT_TOKENS = 55;
const GRID = { qa: 8 * 8, qb: 7 * 5, qc: 30 * 22 };

const png = (name) => readFileSync(path.join(DATA, `${name}.png`));
const dataUrl = (name) => `data:image/png;base64,${png(name).toString('base64')}`;
const referenceAnswer = (name) =>
  Buffer.from(readFileSync(path.join(DATA, `${name}.answer.hex`), 'utf8').trim(), 'hex');
// the reference cli prints a newline, the answer, a newline when it ended on end-of-generation,
// then two newlines
const asPrinted = (bytes, finish) =>
  Buffer.concat([Buffer.from('\n'), bytes, Buffer.from(finish === 'stop' ? '\n\n\n' : '\n\n')]);
const imageMessage = (url, text = PROMPT) => [{ role: 'user', content: [
  { type: 'image_url', image_url: { url } }, { type: 'text', text }] }];

function projector() {
  const out = path.join(tmpDir, 'qwen2vl-proj', 'mmproj-qv.gguf');
  if (!existsSync(out)) {
    mkdirSync(path.dirname(out), { recursive: true });
    execFileSync(path.join(toolsDir, 'mmproj-synth'), [...QV, '-o', out]);
  }
  return out;
}

async function post(srv, route, body) {
  const r = await fetch(`${srv.url}${route}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

describe('vision (qwen2.5vl_merger projector, qwen2vl decoder)', () => {
  let srv, client, model, proj;
  before(async () => {
    model = synthModel('vision-qwen2vl', QLM);
    proj = projector();
    srv = await startServer(['-m', model, '--mmproj', proj, '--threads', '1', '--alias', 'qv']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await srv?.stop();
  });

  const ask = (name, extra = {}) => client.chat.completions.create({ model: 'qv',
    messages: imageMessage(dataUrl(name)), temperature: 0, max_tokens: 12, logprobs: true, ...extra });
  const bytesOf = (r) => Buffer.from(r.choices[0].logprobs.content.flatMap((t) => t.bytes));

  test('each image gets the reference greedy answer, and they differ', async () => {
    const answers = new Set();
    for (const name of ['qa', 'qb']) {
      const r = await ask(name);
      assert.deepEqual(asPrinted(bytesOf(r), r.choices[0].finish_reason), referenceAnswer(name), name);
      // one position per merged token of the image's own grid
      assert.equal(r.usage.prompt_tokens, TEXT_TOKENS + GRID[name], name);
      answers.add(bytesOf(r).toString('hex'));
    }
    assert.equal(answers.size, 2);
  });

  test('a repeated image comes from the cache with the same tokens, also past it', async () => {
    const first = await ask('qb');
    const again = await ask('qb');
    assert.deepEqual(bytesOf(again), bytesOf(first));
    assert.ok(again.usage.prompt_tokens_details.cached_tokens >= TEXT_TOKENS + GRID.qb - 1,
      JSON.stringify(again.usage));
    // a second turn reuses the cached image and continues after it: its rotary positions
    // must be those a cold start gives (another instance of the same files)
    const turn2 = [...imageMessage(dataUrl('qb')),
      { role: 'assistant', content: first.choices[0].message.content },
      { role: 'user', content: 'And then?' }];
    const warm = await client.chat.completions.create({ model: 'qv', messages: turn2,
      temperature: 0, max_tokens: 8, logprobs: true });
    assert.ok(warm.usage.prompt_tokens_details.cached_tokens > GRID.qb, JSON.stringify(warm.usage));
    const r = await post(srv, '/v1/models/load', { model_id: 'qv-cold', model_path: model, mmproj_path: proj });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const cold = await client.chat.completions.create({ model: 'qv-cold', messages: turn2,
      temperature: 0, max_tokens: 8, logprobs: true });
    assert.equal(cold.usage.prompt_tokens_details.cached_tokens, 0);
    assert.deepEqual(bytesOf(warm), bytesOf(cold));
  });

  test('Anthropic image blocks and Responses input_image see the same image', async () => {
    const want = await ask('qb');
    const anthropic = new Anthropic({ baseURL: srv.url, apiKey: 'unused', maxRetries: 0 });
    const a = await anthropic.messages.create({ model: 'qv', max_tokens: 12, temperature: 0,
      messages: [{ role: 'user', content: [
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png('qb').toString('base64') } },
        { type: 'text', text: PROMPT }] }] });
    assert.equal(a.content[0].text, want.choices[0].message.content);
    const r = await client.responses.create({ model: 'qv', temperature: 0, max_output_tokens: 12,
      input: [{ role: 'user', content: [
        { type: 'input_image', image_url: dataUrl('qb') }, { type: 'input_text', text: PROMPT }] }] });
    assert.equal(r.output_text, want.choices[0].message.content);
  });

  test('an image over one batch is fed in parts and answers as the reference', async () => {
    // 840x616: a 30x22 grid, 660 positions over batches of 512
    const r = await ask('qc');
    assert.deepEqual(asPrinted(bytesOf(r), r.choices[0].finish_reason), referenceAnswer('qc'));
    assert.equal(r.usage.prompt_tokens, TEXT_TOKENS + GRID.qc);
    // and the server keeps answering the small ones as before
    const again = await ask('qa');
    assert.deepEqual(asPrinted(bytesOf(again), again.choices[0].finish_reason), referenceAnswer('qa'));
  });

  test('an image past the context is a clear 400 and the server keeps serving', async () => {
    // 1120x1120: a 40x40 grid, 1600 positions, past the 1024 of the context
    const big = `data:image/png;base64,${greyPng(1120, 1120).toString('base64')}`;
    const r = await post(srv, '/v1/chat/completions', { model: 'qv', messages: imageMessage(big) });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'context_length_exceeded');
    const ok = await ask('qa', { max_tokens: 2 });
    assert.equal(ok.object, 'chat.completion');
  });

  test('the projector refuses a text model without M-RoPE', async () => {
    const llama = synthModel('vision-qwen2vl-llama', ['--arch', 'llama', '--embd', '128', '--heads', '4',
      '--heads-kv', '2', '--layers', '1', '--ffn', '256', '--ctx', '512', '--seed', '1']);
    const r = await post(srv, '/v1/models/load', { model_id: 'qv-llama', model_path: llama, mmproj_path: proj });
    assert.equal(r.status, 500, JSON.stringify(r.body)); // like any projector that does not fit
    assert.equal(r.body.error.code, 'model_load_failed');
    assert.match(r.body.error.message, /needs a qwen2vl \(M-RoPE\) text model, not llama/);
  });

  test('/v1/models names the projector', async () => {
    const models = await (await fetch(`${srv.url}/v1/models`)).json();
    const m = models.data.find((d) => d.id === 'qv');
    assert.deepEqual(m.modalities, { vision: true, audio: false });
    assert.equal(m.projector, 'qwen2.5vl_merger');
  });
});

describe('vision (qwen2.5vl_merger) with two sequences decoding together', () => {
  let srv, client;
  before(async () => {
    srv = await startServer(['-m', synthModel('vision-qwen2vl', QLM), '--mmproj', projector(),
      '--threads', '1', '--alias', 'qv', '-np', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await srv?.stop();
  });

  test('two images at once, each batch item with its own grid, both the reference answers', async () => {
    const [a, b] = await Promise.all(['qa', 'qb'].map((name) => client.chat.completions.create({
      model: 'qv', messages: imageMessage(dataUrl(name)), temperature: 0, max_tokens: 12, logprobs: true })));
    for (const [name, r] of [['qa', a], ['qb', b]]) {
      const bytes = Buffer.from(r.choices[0].logprobs.content.flatMap((t) => t.bytes));
      assert.deepEqual(asPrinted(bytes, r.choices[0].finish_reason), referenceAnswer(name), name);
    }
  });
});
