// Instance routing: a request goes to the idle instance whose cache holds the longest prefix
// of its prompt (or the one id_slot names), /slots tells which instance is busy, and an
// instance is back in its pool by the time its client has the answer.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './lib/server.mjs';
import { synthModel, SLOW } from './lib/models.mjs';

async function complete(srv, body) {
  const r = await fetch(`${srv.url}/completion`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ temperature: 0, n_predict: 2, ...body }),
  });
  return { status: r.status, json: await r.json() };
}

async function slots(srv, query = '') {
  const r = await fetch(`${srv.url}/slots${query}`);
  return { status: r.status, json: await r.json() };
}

const storyA = 'Once upon a time there was a little robot who lived in a quiet town by the sea.';
const storyB = 'The rain fell on the mountain village all night, and the river rose over its banks.';

describe('routing across instances', () => {
  let srv;
  before(async () => {
    const model = synthModel('slow', SLOW);
    srv = await startServer(['--threads', '1', '-m', model, '--alias', 'slow', '-np', '2',
      '--request-queue-size', '0']);
  });
  after(async () => srv && (await srv.stop()));

  test('a prompt returns to the instance that cached it; id_slot picks the instance', async () => {
    const a = await complete(srv, { prompt: storyA });
    assert.equal(a.status, 200, JSON.stringify(a.json));
    assert.equal(a.json.id_slot, 0, 'nothing cached yet: the lowest idle instance');
    const b = await complete(srv, { prompt: storyB, id_slot: 1 });
    assert.equal(b.json.id_slot, 1, 'id_slot names the instance');

    // Without id_slot, each story follows its cache, whichever order they come in.
    const b2 = await complete(srv, { prompt: storyB + ' In the morning' });
    assert.equal(b2.json.id_slot, 1);
    assert.ok(b2.json.timings.cache_n >= b.json.tokens_evaluated - 1, JSON.stringify(b2.json.timings));
    const a2 = await complete(srv, { prompt: storyA + ' One day' });
    assert.equal(a2.json.id_slot, 0);
    assert.ok(a2.json.timings.cache_n >= a.json.tokens_evaluated - 1, JSON.stringify(a2.json.timings));
  });

  test('back-to-back requests never find their instance still busy (queue size 0)', async () => {
    for (let i = 0; i < 12; i++) {
      const r = await complete(srv, { prompt: `${storyA} ${i}`, n_predict: 1 });
      assert.equal(r.status, 200, `request ${i}: ${JSON.stringify(r.json)}`);
    }
  });

  test('/slots names the busy instance while a stream runs on it', async () => {
    const ac = new AbortController();
    const res = await fetch(`${srv.url}/completion`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: storyB, n_predict: 3000, ignore_eos: true, stream: true, id_slot: 1 }),
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    await reader.read(); // the first chunk: the request runs
    const s = await slots(srv);
    assert.equal(s.status, 200);
    assert.deepEqual(s.json.map((x) => [x.id, x.is_processing]), [[0, false], [1, true]]);
    assert.equal((await slots(srv, '?fail_on_no_slot=1')).status, 200, 'instance 0 is free');
    ac.abort();
    await reader.cancel().catch(() => {});
    // The cancelled request gives its instance back.
    for (let i = 0; i < 100; i++) {
      const now = await slots(srv);
      if (!now.json.some((x) => x.is_processing)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail('instance 1 stayed busy after its client went away');
  });
});
