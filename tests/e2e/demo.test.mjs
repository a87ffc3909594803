// The demo model `make run` serves (gguf-synth --words, the Makefile's arguments): its
// gibberish must be whole words in valid UTF-8, never raw byte tokens shown as U+FFFD.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './lib/server.mjs';
import { synthModel } from './lib/models.mjs';

// As the Makefile's DEMO_MODEL rule writes it.
const DEMO = ['--arch', 'qwen2', '--layers', '4', '--embd', '256', '--heads', '4', '--heads-kv', '2',
  '--ffn', '512', '--ctx', '2048', '--type', 'q8_0', '--seed', '42', '--words'];

const server = await startServer(['-m', synthModel('demo', DEMO), '--alias', 'demo']);
after(() => server.stop());

async function chat(body) {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'demo', max_tokens: 48, ...body }),
  });
  assert.equal(res.status, 200);
  // Decoded strictly: an invalid UTF-8 byte would throw here rather than become U+FFFD.
  const text = new TextDecoder('utf-8', { fatal: true }).decode(await res.arrayBuffer());
  return JSON.parse(text).choices[0].message.content;
}

test('the demo answers in whole words (seeded samples and greedy)', async () => {
  const prompts = ['Hello', 'Write a poem about the sea.', 'Ünïcödé? 你好 🙂'];
  let nWords = 0;
  for (const [i, content] of prompts.entries()) {
    for (const extra of [{ seed: i + 1 }, { temperature: 0 }]) {
      const text = await chat({ messages: [{ role: 'user', content }], ...extra });
      assert.ok(text.trim().length > 0, 'an answer');
      assert.ok(!text.includes('\uFFFD'), `no replacement characters: ${JSON.stringify(text)}`);
      // Words of letters, a little punctuation, spaces: readable text.
      assert.match(text, /^[A-Za-z.,\s]+$/, JSON.stringify(text));
      nWords += text.trim().split(/\s+/).length;
    }
  }
  assert.ok(nWords >= 30, `${nWords} words in 6 answers`);
});

test('the demo also streams valid UTF-8 deltas', async () => {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'demo', stream: true, max_tokens: 32, seed: 5,
      messages: [{ role: 'user', content: 'Tell me a story' }] }),
  });
  const raw = new TextDecoder('utf-8', { fatal: true }).decode(await res.arrayBuffer());
  let text = '';
  for (const line of raw.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const chunk = JSON.parse(line.slice(6));
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.match(text, /^[A-Za-z.,\s]+$/, JSON.stringify(text));
});
