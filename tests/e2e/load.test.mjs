// Bounded load tests on loopback: 16 concurrent clients for a few seconds against a 2-instance
// model with a queue of 2, once with one compute thread and once with two and a mix of prompt
// lengths and grammar requests (the forward pass then alternates between its thread pool and
// inline steps, and prompt chunks share steps with decoding). Every request must end in 200 or
// 429 (none hangs, none fails otherwise) and the server must stay up; latency percentiles are
// printed for the record (not asserted: shared machines make absolute times noise).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startServer, sharedDir, hasShared } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

const CLIENTS = 16;

// The body of client k's i-th request: plain or mixed (long and short prompts, json_object).
function requestBody(k, i, stream, mixed) {
  const body = { model: 'm', messages: [{ role: 'user', content: `client ${k} request ${i}` }], max_tokens: 24,
    stream, logit_bias: { 2: -100 } };
  if (!mixed) return body;
  body.messages[0].content = 'a story about a cat and a dog. '.repeat(1 + ((k * 7 + i) % 12));
  if ((k + i) % 3 === 0) body.response_format = { type: 'json_object' };
  return body;
}

async function runLoad({ threads, mixed, seconds, model = synthModel('small', SMALL), clients = CLIENTS }) {
  const srv = await startServer(['--threads', String(threads), '-m', model, '--alias', 'm',
    '-np', '2', '--request-queue-size', '2']);
  try {
    const deadline = Date.now() + seconds * 1000;
    const lat = { 200: [], 429: [] };
    const other = [];
    const client = async (k) => {
      let i = 0;
      while (Date.now() < deadline) {
        const t0 = performance.now();
        const stream = (k + i++) % 2 === 0;
        const ctl = new AbortController();
        const timer = setTimeout(() => ctl.abort(), 30000);
        try {
          const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', signal: ctl.signal,
            body: JSON.stringify(requestBody(k, i, stream, mixed)) });
          const text = await r.text();
          if (r.status === 200 && stream) assert.ok(text.includes('[DONE]'), 'streams complete');
          if (lat[r.status]) lat[r.status].push(performance.now() - t0);
          else other.push(r.status);
        } finally {
          clearTimeout(timer);
        }
      }
    };
    await Promise.all(Array.from({ length: clients }, (_, k) => client(k)));
    assert.deepEqual(other, [], 'only 200 and 429');
    assert.ok(lat[200].length > 10, 'requests were served');
    const pct = (a, p) => (a.length ? a.sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))] : NaN);
    console.log(`# load (${threads} threads${mixed ? ', mixed' : ''}): ${lat[200].length} ok, ` +
      `${lat[429].length} rejected in ${seconds}s with ${clients} clients; ` +
      `200 p50 ${pct(lat[200], 0.5).toFixed(1)} ms p99 ${pct(lat[200], 0.99).toFixed(1)} ms; ` +
      `429 p50 ${pct(lat[429], 0.5).toFixed(1)} ms`);
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  } finally {
    await srv.stop();
  }
}

test('concurrent clients get 200 or 429 and nothing else', () => runLoad({ threads: 1, mixed: false, seconds: 8 }));

test('two compute threads under mixed prompts and grammars: 200 or 429, server stays up', () =>
  runLoad({ threads: 2, mixed: true, seconds: 6 }));

const stories = path.join(sharedDir, 'models', 'llama', 'stories260K.gguf');
test('the same mix on stories260K (5 layers, 8 heads)', { skip: !hasShared && 'no ../shared' }, () =>
  runLoad({ threads: 2, mixed: true, seconds: 6, model: stories, clients: 3 }));
