// Batch invariance through the server: the same greedy request returns the same tokens and the
// same log-probabilities, bit for bit, when its prompt is computed cold, when it comes from the
// prompt cache (the identical request again; a conversation continuing it, against that
// continuation computed cold), and when 3 other streams share its steps (their decode tokens
// batched with its prompt chunk and its tokens) — for a plain chat, a json_schema
// response_format and a forced tool call, on a synthetic model (F16 weights, whose summation
// order the reference changes with the number of tokens in a step) and, when ../shared is
// present, on stories260K (F32).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startServer, hasShared, sharedDir } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

const SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 120 },
    color: { enum: ['red', 'green', 'blue'] } },
  required: ['name', 'age', 'color'],
};
const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 24 },
    unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] } } }];

const CASES = {
  plain: { max_tokens: 48 },
  json_schema: { max_tokens: 200, response_format: { type: 'json_schema', json_schema: { name: 'p', strict: true, schema: SCHEMA } } },
  tool_call: { max_tokens: 200, tools: TOOLS, tool_choice: 'required' },
};

function bodyOf(kind, messages) {
  return { model: 'm', messages, temperature: 0, logprobs: true, top_logprobs: 3, ...CASES[kind] };
}

async function chat(srv, body) {
  const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(body) });
  const j = await r.json();
  assert.equal(r.status, 200, JSON.stringify(j));
  return j;
}

// What must not change: the message (tool-call ids are random and left out), the finish
// reason and every token's logprobs entry (token, logprob, bytes, top alternatives).
function answer(r) {
  const c = r.choices[0];
  const msg = { ...c.message };
  if (msg.tool_calls) msg.tool_calls = msg.tool_calls.map(({ id, ...rest }) => rest);
  assert.ok(c.logprobs?.content?.length > 0, 'logprobs present');
  return { message: msg, finish_reason: c.finish_reason, logprobs: c.logprobs.content };
}

const cached = (r) => r.usage.prompt_tokens_details.cached_tokens;

function continuation(messages, first) {
  const m = first.choices[0].message;
  const said = m.content ?? JSON.stringify(m.tool_calls.map((t) => t.function));
  return [...messages, { role: 'assistant', content: said }, { role: 'user', content: 'And then what happened?' }];
}

// Starts 3 long streams on the llama.cpp endpoint and resolves once each has sent a token.
async function otherStreams(srv) {
  const streams = [];
  for (let i = 0; i < 3; i++) {
    const ac = new AbortController();
    const s = { ac, ended: false };
    const res = await fetch(`${srv.url}/completion`, { method: 'POST', signal: ac.signal,
      body: JSON.stringify({ prompt: `Stream ${i}: once upon a time there was a ${['dog', 'bird', 'fish'][i]} who`,
        n_predict: 3000, ignore_eos: true, stream: true, temperature: 0.8, seed: i + 1 }) });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    s.first = reader.read();
    s.done = (async () => {
      try {
        for (;;) if ((await reader.read()).done) break;
      } catch { /* aborted */ }
      s.ended = true;
    })();
    streams.push(s);
  }
  await Promise.all(streams.map((s) => s.first));
  return streams;
}

function suite(label, modelPath, messages) {
  describe(label, () => {
    const args = () => ['--threads', '1', '-m', modelPath(), '--alias', 'm', '-c', '4096'];
    const cold = {};
    before(async () => {
      // Cold: every case on a fresh server, so nothing of its prompt is cached.
      for (const kind of Object.keys(CASES)) {
        const srv = await startServer([...args(), '-np', '1']);
        try {
          cold[kind] = await chat(srv, bodyOf(kind, messages));
          assert.equal(cached(cold[kind]), 0);
        } finally {
          await srv.stop();
        }
      }
    });

    for (const kind of Object.keys(CASES)) {
      test(`${kind}: the identical request from the prompt cache, and a continuation cached vs cold`, async () => {
        const srv = await startServer([...args(), '-np', '1']);
        let cont;
        try {
          const first = await chat(srv, bodyOf(kind, messages));
          assert.equal(cached(first), 0);
          assert.deepEqual(answer(first), answer(cold[kind]), 'cold twice');
          const again = await chat(srv, bodyOf(kind, messages));
          assert.equal(cached(again), again.usage.prompt_tokens - 1, 'all but the last prompt token cached');
          assert.deepEqual(answer(again), answer(cold[kind]), 'cached vs cold');
          cont = await chat(srv, bodyOf(kind, continuation(messages, first)));
          assert.ok(cached(cont) > 0, 'the continuation reuses the cached conversation');
          // Float weights: the answer's positions were computed as sampled tokens, so only the
          // earlier prompt is reused (the answer is computed again, as prompt).
          assert.ok(cached(cont) <= first.usage.prompt_tokens, `${cached(cont)} cached`);
        } finally {
          await srv.stop();
        }
        const fresh = await startServer([...args(), '-np', '1']);
        try {
          const contCold = await chat(fresh, bodyOf(kind, continuation(messages, cold[kind])));
          assert.equal(cached(contCold), 0);
          assert.deepEqual(answer(cont), answer(contCold), 'continuation cached vs cold');
        } finally {
          await fresh.stop();
        }
      });
    }

    test('each case batched with 3 other streams gives the cold answer', async () => {
      const srv = await startServer([...args(), '-np', '4']);
      try {
        for (const kind of Object.keys(CASES)) {
          const streams = await otherStreams(srv);
          const r = await chat(srv, bodyOf(kind, messages));
          const overlapping = streams.filter((s) => !s.ended).length;
          for (const s of streams) s.ac.abort();
          await Promise.all(streams.map((s) => s.done));
          assert.equal(overlapping, 3, 'the 3 other streams were still generating');
          assert.deepEqual(answer(r), answer(cold[kind]), `${kind}: batched vs cold`);
        }
      } finally {
        await srv.stop();
      }
    });
  });
}

suite('batch invariance on a synthetic F16 model', () => synthModel('small', SMALL),
  [{ role: 'user', content: 'Describe a person who likes the weather.' }]);

if (hasShared) {
  suite('batch invariance on stories260K', () => path.join(sharedDir, 'models/llama/stories260K.gguf'),
    [{ role: 'user', content: 'Once upon a time, a little girl asked about the weather.' }]);
} else {
  test('batch invariance on stories260K', { skip: 'no ../shared: stories260K.gguf is not available' }, () => {});
}
