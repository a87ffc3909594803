// A bounded load test on loopback: 16 concurrent clients for 8 seconds against a 2-instance
// model with a queue of 2. Every request must end in 200 or 429 (none hangs, none fails
// otherwise); latency percentiles are printed for the record (not asserted: shared machines
// make absolute times noise).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

const CLIENTS = 16;
const SECONDS = 8;

test('concurrent clients get 200 or 429 and nothing else', async () => {
  const srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '--alias', 'm', '-np', '2',
    '--request-queue-size', '2']);
  try {
    const deadline = Date.now() + SECONDS * 1000;
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
            body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `client ${k} request ${i}` }],
              max_tokens: 24, stream, logit_bias: { 2: -100 } }) });
          const text = await r.text();
          if (r.status === 200 && stream) assert.ok(text.includes('[DONE]'), 'streams complete');
          if (lat[r.status]) lat[r.status].push(performance.now() - t0);
          else other.push(r.status);
        } finally {
          clearTimeout(timer);
        }
      }
    };
    await Promise.all(Array.from({ length: CLIENTS }, (_, k) => client(k)));
    assert.deepEqual(other, [], 'only 200 and 429');
    assert.ok(lat[200].length > 10, 'requests were served');
    const pct = (a, p) => (a.length ? a.sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))] : NaN);
    console.log(`# load: ${lat[200].length} ok, ${lat[429].length} rejected in ${SECONDS}s with ${CLIENTS} clients; ` +
      `200 p50 ${pct(lat[200], 0.5).toFixed(1)} ms p99 ${pct(lat[200], 0.99).toFixed(1)} ms; ` +
      `429 p50 ${pct(lat[429], 0.5).toFixed(1)} ms`);
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  } finally {
    await srv.stop();
  }
});
