// llama-server as a drop-in: its flags, route spellings, CORS policy, aliases and tags, and
// the request shapes its own test suite sends (scripts/run-peer-suite.sh runs that suite).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startServer, errorOf } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

async function post(srv, route, body, headers = {}) {
  const r = await fetch(`${srv.url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // SSE bodies stay in text
  }
  return { status: r.status, json, text, headers: r.headers };
}

const chat = (extra = {}) => ({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, ...extra });

describe('llama-server flags and names', () => {
  let srv;
  before(async () => {
    const small = synthModel('small', SMALL);
    srv = await startServer(['--threads', '1', '-m', small, '--alias', 'tinyllama-2,fim,code',
      '--tags', 'chat,fim,small', '-ngl', '99', '-fa', 'on', '--kv-unified', '--backend_sampling',
      '--cache-ram', '0', '--no-jinja', '--offline', '-np', '2', '-c', '512']);
  });
  after(async () => srv && (await srv.stop()));

  test('tuning flags start the server and are named in one warning line', () => {
    const lines = srv.log().split('\n').filter((l) => l.includes('flags with no effect here'));
    assert.equal(lines.length, 1);
    for (const flag of ['--n-gpu-layers', '--flash-attn', '--backend-sampling', '--cache-ram'])
      assert.ok(lines[0].includes(flag), `${flag} in ${lines[0]}`);
  });

  test('--alias with several names: the id is the first in order, every name serves it', async () => {
    for (const route of ['/v1/models', '/models']) {
      const r = await fetch(`${srv.url}${route}`).then((x) => x.json());
      assert.equal(r.data.length, 1);
      assert.equal(r.data[0].id, 'code');
      assert.deepEqual(new Set(r.data[0].aliases), new Set(['tinyllama-2', 'fim', 'code']));
      assert.deepEqual(new Set(r.data[0].tags), new Set(['chat', 'fim', 'small']));
    }
    for (const name of ['tinyllama-2', 'fim', 'code']) {
      const r = await post(srv, '/v1/chat/completions', chat({ model: name }));
      assert.equal(r.status, 200, name);
      assert.equal(r.json.model, 'code');
    }
    // One -m model: any other name is served by it too, as llama-server serves it.
    const other = await post(srv, '/v1/chat/completions', chat({ model: 'gpt-4o' }));
    assert.equal(other.status, 200);
    assert.equal(other.json.model, 'code');
  });

  test('POST /slots/{id} without --slot-save-path is 501 naming the flag', async () => {
    const r = await post(srv, '/slots/0?action=save', { filename: 'a.bin' });
    assert.equal(r.status, 501);
    assert.match(errorOf(r.json).message, /--slot-save-path/);
  });

  test('routes without /v1, and an unnamed or null model, are served', async () => {
    for (const body of [chat(), chat({ model: null })]) {
      const r = await post(srv, '/chat/completions', body);
      assert.equal(r.status, 200);
      assert.equal(r.json.object, 'chat.completion');
    }
    const tok = await post(srv, '/chat/completions/input_tokens', { messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(tok.status, 200);
    assert.ok(tok.json.input_tokens > 0);
    assert.equal((await fetch(`${srv.url}/v1/health`)).status, 200);
  });
});

describe('chat answers as llama-server shapes them', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '--alias', 'small', '-np', '2']);
  });
  after(async () => srv && (await srv.stop()));

  test('n choices, system_fingerprint, __verbose on request', async () => {
    const r = await post(srv, '/chat/completions', chat({ n: 3, max_tokens: 2, verbose: true }));
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.choices.map((c) => c.index), [0, 1, 2]);
    for (const c of r.json.choices) assert.equal(c.message.role, 'assistant');
    assert.equal(r.json.usage.completion_tokens, r.json.choices.length * 2);
    assert.match(r.json.system_fingerprint, /^b/);
    assert.equal(typeof r.json.__verbose.prompt, 'string');
    assert.ok(r.json.__verbose.prompt.includes('hi'));
    const quiet = await post(srv, '/chat/completions', chat());
    assert.equal(quiet.json.__verbose, undefined);
  });

  test('the first streamed chunk has content null; every chunk a fingerprint', async () => {
    const r = await post(srv, '/chat/completions', chat({ stream: true }));
    const events = r.text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    assert.equal(events[0].choices[0].delta.role, 'assistant');
    assert.equal(events[0].choices[0].delta.content, null);
    for (const e of events) assert.match(e.system_fingerprint, /^b/);
  });

  test('a last assistant message is continued (prefill); two at the end, or both flags, are 400', async () => {
    const msgs = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'Once upon' }];
    const r = await post(srv, '/chat/completions', { messages: msgs, max_tokens: 1, verbose: true });
    assert.equal(r.status, 200);
    assert.ok(r.json.__verbose.prompt.endsWith('Once upon'), r.json.__verbose.prompt);
    const two = await post(srv, '/chat/completions', { messages: [...msgs, msgs[1]], max_tokens: 1 });
    assert.equal(two.status, 400);
    assert.match(errorOf(two.json).message, /2 or more assistant messages/);
    const both = await post(srv, '/chat/completions', { messages: msgs, max_tokens: 1,
      add_generation_prompt: true, continue_final_message: true });
    assert.equal(both.status, 400);
    assert.equal(errorOf(both.json).param, 'continue_final_message');
  });

  test("llama-server's sampling extensions are honoured on chat: n_predict, mirostat, ignore_eos", async () => {
    const r = await post(srv, '/chat/completions', { messages: [{ role: 'user', content: 'hi' }], n_predict: 3 });
    assert.equal(r.status, 200);
    assert.equal(r.json.usage.completion_tokens, 3);
    const both = await post(srv, '/chat/completions', { messages: [{ role: 'user', content: 'hi' }], n_predict: 3, max_tokens: 2 });
    assert.equal(both.json.usage.completion_tokens, 2, 'max_tokens wins');
    const m = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, mirostat: 2, mirostat_tau: 0.01, seed: 1 };
    const a = await post(srv, '/chat/completions', m);
    const b = await post(srv, '/chat/completions', { ...m, seed: 2 });
    assert.equal(a.status, 200);
    // A tiny target surprise keeps only the best token: the seed does not matter.
    assert.equal(a.json.choices[0].message.content, b.json.choices[0].message.content);
    for (const [field, value] of [['mirostat', 3], ['mirostat_tau', 'x'], ['n_predict', 'x'], ['ignore_eos', 1]]) {
      const e = await post(srv, '/chat/completions', { messages: [{ role: 'user', content: 'hi' }], [field]: value });
      assert.equal(e.status, 400, field);
      assert.equal(errorOf(e.json).param, field);
    }
  });

  test('malformed tool fields are 400 naming the param', async () => {
    const tool = { type: 'function', function: { name: 'f', parameters: { type: 'object' } } };
    const cases = [
      [{ messages: [{ role: 'tool', content: 'x', tool_call_id: 5 }] }, 'invalid_type', 'messages[0].tool_call_id'],
      [{ messages: [{ role: 'assistant', content: null, tool_calls: {} }, { role: 'user', content: 'x' }] },
        'invalid_type', 'messages[0].tool_calls'],
      [{ messages: [{ role: 'assistant', content: null, tool_calls: ['x'] }, { role: 'user', content: 'x' }] },
        'invalid_type', 'messages[0].tool_calls[0]'],
      [{ messages: [{ role: 'user', content: 'x' }], tools: [{ ...tool, type: 'web_search' }] }, 'invalid_value', 'tools[0].type'],
      [{ messages: [{ role: 'user', content: 'x' }], tools: [{ ...tool, type: 7 }] }, 'invalid_type', 'tools[0].type'],
      [{ messages: [{ role: 'user', content: 'x' }], tools: [tool], tool_choice: { type: 'function', function: { name: 'g' } } },
        'invalid_value', 'tool_choice'],
    ];
    for (const [body, code, param] of cases) {
      const r = await post(srv, '/chat/completions', { ...body, max_tokens: 1 });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(errorOf(r.json).code, code, param);
      assert.equal(errorOf(r.json).param, param);
    }
  });

  test('a prompt over the context is exceed_context_size_error with both numbers', async () => {
    const r = await post(srv, '/chat/completions', chat({ messages: [{ role: 'user', content: 'hello '.repeat(3000) }] }));
    assert.equal(r.status, 400);
    const e = errorOf(r.json);
    assert.equal(e.type, 'exceed_context_size_error');
    assert.equal(e.code, 'context_length_exceeded');
    assert.ok(e.n_prompt_tokens > e.n_ctx);
    assert.match(e.message, /exceeds the available context size/);
  });
});

describe('/completion as llama-server answers it', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '--alias', 'small']);
  });
  after(async () => srv && (await srv.stop()));

  test('ignore_eos bans end-of-generation tokens (listed as null biases); without it they end', async () => {
    const props = await fetch(`${srv.url}/props`).then((r) => r.json());
    const tok = await post(srv, '/tokenize', { content: props.eos_token, parse_special: true });
    const eos = tok.json.tokens[0];
    const body = { prompt: 'hello', n_predict: 5, temperature: 0, logit_bias: [[eos, 100]], return_tokens: true };
    const ended = await post(srv, '/completion', body);
    assert.equal(ended.json.stop_type, 'eos');
    const kept = await post(srv, '/completion', { ...body, ignore_eos: true });
    assert.equal(kept.status, 200);
    assert.equal(kept.json.tokens_predicted, 5);
    assert.equal(kept.json.stop_type, 'limit');
    assert.ok(!kept.json.tokens.includes(eos));
    const bans = kept.json.generation_settings.logit_bias.filter((b) => b.bias === null);
    assert.ok(bans.some((b) => b.token === eos));
  });

  test('post_sampling_probs reports prob/top_probs of the distribution drawn from', async () => {
    const r = await post(srv, '/completion', { prompt: 'hello', n_predict: 3, n_probs: 5,
      temperature: 1, seed: 3, post_sampling_probs: true });
    assert.equal(r.status, 200);
    for (const t of r.json.completion_probabilities) {
      assert.ok(t.prob > 0 && t.prob <= 1);
      assert.equal(t.logprob, undefined);
      const sum = t.top_probs.reduce((a, p) => a + p.prob, 0);
      assert.ok(t.top_probs.length > 0 && sum <= 1.0001, String(sum));
      for (const p of t.top_probs) assert.ok(p.prob > 0 && typeof p.id === 'number');
    }
  });

  test('seeded draws repeat; has_new_line, response_fields, streamed events carry one token', async () => {
    const body = { prompt: 'hello', n_predict: 6, temperature: 1, seed: 7 };
    const a = await post(srv, '/completion', body);
    const b = await post(srv, '/completion', body);
    assert.equal(a.json.content, b.json.content);
    assert.equal(typeof a.json.has_new_line, 'boolean');
    const f = await post(srv, '/completion', { ...body, response_fields: ['content', 'generation_settings/n_predict'] });
    assert.deepEqual(Object.keys(f.json).sort(), ['content', 'generation_settings/n_predict']);
    assert.equal(f.json['generation_settings/n_predict'], 6);
    const s = await post(srv, '/completion', { ...body, stream: true, n_probs: 2 });
    const events = s.text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
    const steps = events.filter((e) => !e.stop);
    assert.equal(steps.length, 6);
    for (const e of steps) {
      assert.equal(e.tokens.length, 1);
      assert.equal(e.completion_probabilities.length, 1);
    }
    assert.equal(steps.map((e) => e.content).join(''), a.json.content);
  });
});

// prompt_progress points of an SSE body: the objects, in order.
function progressOf(text) {
  return text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)))
    .filter((e) => e.prompt_progress).map((e) => e.prompt_progress);
}

// Checks the points as llama-server's suite does: the first at the cache, each later one
// further by at most n_batch, the last at the total; returns how many there were.
function checkProgress(points, nBatch) {
  assert.ok(points.length >= 2, JSON.stringify(points));
  assert.ok(points[0].total > 0);
  assert.equal(points[0].processed, points[0].cache);
  for (let i = 1; i < points.length; i++) {
    assert.equal(points[i].total, points[0].total);
    assert.equal(points[i].cache, points[0].cache);
    const step = points[i].processed - points[i - 1].processed;
    assert.ok(step > 0 && step <= nBatch, JSON.stringify(points));
    assert.equal(typeof points[i].time_ms, 'number');
  }
  assert.equal(points.at(-1).processed, points[0].total);
  assert.equal(points.length, 1 + Math.ceil((points[0].total - points[0].cache) / nBatch));
  return points.length;
}

describe('return_progress and -b', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '-b', '16', '-np', '1', '-c', '1024']);
  });
  after(async () => srv && (await srv.stop()));

  test('a streamed chat sends a progress point at the start and per -b chunk; a repeat starts at its cache', async () => {
    const body = { messages: [{ role: 'user', content: 'This is a test '.repeat(12) }], max_tokens: 2,
      stream: true, return_progress: true };
    const first = progressOf((await post(srv, '/chat/completions', body)).text);
    assert.equal(first[0].cache, 0);
    assert.ok(checkProgress(first, 16) >= 4);
    const again = progressOf((await post(srv, '/chat/completions', body)).text);
    assert.ok(again[0].cache > 0);
    assert.equal(checkProgress(again, 16), 2);
    const r = await post(srv, '/chat/completions', body);
    const chunks = r.text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    const withProgress = chunks.filter((c) => c.prompt_progress);
    for (const c of withProgress) assert.deepEqual(c.choices[0].delta, { role: 'assistant', content: null });
    assert.ok(chunks.indexOf(withProgress.at(-1)) < chunks.findIndex((c) => c.choices[0]?.delta?.content));
  });

  test('/completion and /v1/completions streams carry it; whole answers and requests without it do not', async () => {
    const prompt = 'Once upon a time '.repeat(8);
    const native = await post(srv, '/completion', { prompt, n_predict: 2, stream: true, return_progress: true });
    const points = progressOf(native.text);
    checkProgress(points, 16);
    const oai = await post(srv, '/v1/completions', { prompt: prompt + 'x', max_tokens: 2, stream: true, return_progress: true });
    checkProgress(progressOf(oai.text), 16);
    const plain = await post(srv, '/completion', { prompt: prompt + 'y', n_predict: 2, stream: true });
    assert.equal(progressOf(plain.text).length, 0);
    const whole = await post(srv, '/completion', { prompt, n_predict: 2, return_progress: true });
    assert.equal(whole.status, 200);
    assert.equal(whole.json.prompt_progress, undefined);
    const bad = await post(srv, '/chat/completions', chat({ return_progress: 1 }));
    assert.equal(bad.status, 400);
    assert.equal(errorOf(bad.json).param, 'return_progress');
  });
});

describe('--host with several addresses', () => {
  const hasIpv6 = (() => {
    try {
      return os.networkInterfaces().lo?.some((a) => a.family === 'IPv6') ?? false;
    } catch {
      return false;
    }
  })();
  test('every address of the list serves on the same port', { skip: !hasIpv6 && 'no IPv6 loopback' }, async () => {
    const srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '--host', '127.0.0.1, ::1']);
    try {
      assert.match(srv.log(), new RegExp(`listening on http://127\\.0\\.0\\.1:${srv.port} and http://\\[::1\\]:${srv.port}`));
      for (const base of [srv.url, `http://[::1]:${srv.port}`]) {
        const h = await fetch(`${base}/health`);
        assert.equal(h.status, 200);
        const r = await fetch(`${base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ prompt: 'hi', max_tokens: 2 }) });
        assert.equal(r.status, 200);
      }
    } finally {
      await srv.stop();
    }
  });
  test('a UNIX socket path or an empty list stops start-up with a message', async () => {
    await assert.rejects(startServer(['--host', '/tmp/llamapi-test.sock']), /UNIX socket paths are not supported/);
    await assert.rejects(startServer(['--host', ' , ']), /--host requires at least one address/);
  });
});

describe('/cors-proxy (--ui-mcp-proxy)', () => {
  let srv, off, target, seen;
  const KEY = 'proxy-test-key';
  before(async () => {
    // The target: records what reached it; answers chunked (no Content-Length), 204, or a 302.
    target = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        seen = { method: req.method, url: req.url, headers: req.headers, body };
        if (req.url.startsWith('/empty')) {
          res.writeHead(204);
          res.end();
        } else if (req.url.startsWith('/moved')) {
          res.writeHead(302, { location: 'http://127.0.0.1:1/' });
          res.end();
        } else {
          res.writeHead(201, { 'content-type': 'application/json; charset=utf-8' });
          res.write('{"echo":');
          res.end(JSON.stringify(body) + '}');
        }
      });
    });
    await new Promise((resolve) => target.listen(0, '127.0.0.1', resolve));
    const small = synthModel('small', SMALL);
    srv = await startServer(['--threads', '1', '-m', small, '--ui-mcp-proxy', '--api-key', KEY]);
    off = await startServer(['--threads', '1', '-m', small]);
  });
  after(async () => {
    if (srv) await srv.stop();
    if (off) await off.stop();
    target?.close();
  });
  const proxied = (server, url, init = {}) => fetch(`${server.url}/cors-proxy?url=${encodeURIComponent(url)}`,
    { ...init, headers: { authorization: `Bearer ${KEY}`, ...(init.headers ?? {}) } });

  test('off by default: 403 feature_disabled', async () => {
    const r = await proxied(off, `http://127.0.0.1:${target.address().port}/x`);
    assert.equal(r.status, 403);
    assert.equal(errorOf(await r.json()).type, 'feature_disabled');
  });

  test('relays status, type and a chunked body; forwards only x-llama-server-proxy-header-*', async () => {
    const r = await proxied(srv, `http://127.0.0.1:${target.address().port}/echo?a=1#frag`, {
      method: 'POST', body: 'hello',
      headers: { cookie: 'session=secret', 'x-api-key': KEY, 'proxy-authorization': 'Basic x',
        'x-llama-server-proxy-header-authorization': 'Bearer explicit',
        'x-llama-server-proxy-header-content-type': 'text/plain', 'x-llama-server-proxy-header-host': 'evil' },
    });
    assert.equal(r.status, 201);
    assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.deepEqual(await r.json(), { echo: 'hello' });
    assert.equal(seen.method, 'POST');
    assert.equal(seen.url, '/echo?a=1');
    assert.equal(seen.headers.authorization, 'Bearer explicit');
    assert.equal(seen.headers['content-type'], 'text/plain');
    assert.equal(seen.headers.host, `127.0.0.1:${target.address().port}`);
    for (const h of ['cookie', 'x-api-key', 'proxy-authorization']) assert.equal(seen.headers[h], undefined);
  });

  test('204 and redirects come back as they are (not followed)', async () => {
    const empty = await proxied(srv, `http://127.0.0.1:${target.address().port}/empty`, { method: 'POST', body: '{}' });
    assert.equal(empty.status, 204);
    const moved = await proxied(srv, `http://127.0.0.1:${target.address().port}/moved`, { redirect: 'manual' });
    assert.equal(moved.status, 302);
    assert.equal(seen.url, '/moved');
  });

  test('only http(s) URLs: other schemes and credentials 400, https 501, no key 401, dead target 502', async () => {
    for (const url of ['file:///etc/passwd', 'ftp://127.0.0.1/', 'http://u:p@127.0.0.1/', 'http:///x']) {
      const r = await proxied(srv, url);
      assert.equal(r.status, 400, url);
      assert.equal(errorOf(await r.json()).param, 'url');
    }
    const none = await fetch(`${srv.url}/cors-proxy`, { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(none.status, 400);
    const tls = await proxied(srv, 'https://127.0.0.1:1/');
    assert.equal(tls.status, 501);
    const anon = await fetch(`${srv.url}/cors-proxy?url=http://127.0.0.1:1/`);
    assert.equal(anon.status, 401);
    const dead = await proxied(srv, 'http://127.0.0.1:1/');
    assert.equal(dead.status, 502);
    assert.match(errorOf(await dead.json()).message, /cannot connect/);
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });
});

describe('timings and /metrics as llama-server counts them', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '--metrics', '-np', '1']);
  });
  after(async () => srv && (await srv.stop()));

  test('rates over predicted_n - 1 steps, per-token times; cached prompt tokens counted apart', async () => {
    const one = await post(srv, '/completion', { prompt: 'the quick brown fox', n_predict: 1 });
    assert.equal(one.json.timings.predicted_n, 1);
    assert.equal(one.json.timings.predicted_per_second, 0);
    assert.equal(one.json.timings.predicted_per_token_ms, 0);
    const r = await post(srv, '/completion', { prompt: 'the quick brown fox', n_predict: 9, ignore_eos: true });
    const t = r.json.timings;
    assert.equal(t.predicted_n, 9);
    assert.ok(t.cache_n > 0);
    assert.ok(Math.abs(t.predicted_per_second - 1e3 / t.predicted_ms * 8) < 1e-6);
    assert.ok(Math.abs(t.predicted_per_token_ms - t.predicted_ms / 8) < 1e-9);
    assert.ok(t.prompt_per_token_ms > 0 && Math.abs(t.prompt_per_token_ms - t.prompt_ms / t.prompt_n) < 1e-9);
    const m = await fetch(`${srv.url}/metrics`);
    assert.match(m.headers.get('process-start-time-unix'), /^\d+$/);
    const text = await m.text();
    const value = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)[1]);
    assert.equal(value('llamacpp:prompt_tokens_total'), one.json.timings.prompt_n + t.prompt_n);
    assert.equal(value('llamacpp:prompt_tokens_cached_total'), one.json.timings.cache_n + t.cache_n);
    assert.equal(value('llamacpp:spec_decode_num_drafts_total'), 0);
    assert.match(text, /# TYPE llamacpp:prompt_tokens_cached_total counter/);
  });
});

describe('--context-shift', () => {
  let shift;
  let plain;
  before(async () => {
    const small = synthModel('small', SMALL);
    shift = await startServer(['--threads', '1', '-m', small, '-c', '64', '--context-shift']);
    plain = await startServer(['--threads', '1', '-m', small, '-c', '64']);
  });
  after(async () => {
    for (const s of [shift, plain]) if (s) await s.stop();
  });

  test('a full context drops the older half and generation goes on to n_predict', async () => {
    const prompt = Array.from({ length: 40 }, (_, i) => 100 + i);
    const body = { prompt, n_predict: 70, temperature: 0 };
    const r = await post(shift, '/completion', body);
    assert.equal(r.status, 200);
    assert.equal(r.json.timings.predicted_n, 70);
    assert.equal(r.json.timings.prompt_n, 40);
    assert.equal(r.json.truncated, true);
    const p = await post(plain, '/completion', body);
    assert.equal(p.json.timings.predicted_n, 64 - 40);
    assert.equal(p.json.stop_type, 'limit');
    // The instance is sound afterwards: the same request again gives the same text.
    const again = await post(shift, '/completion', body);
    assert.equal(again.json.content, r.json.content);
  });
});

describe('slot save, restore and erase (--slot-save-path)', () => {
  let srv;
  let dir;
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'llamapi-slots-'));
    srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '-np', '2', '--slot-save-path', dir]);
  });
  after(async () => srv && (await srv.stop()));

  test('save writes the cached tokens; erase empties the slot; restore makes another slot reuse them', async () => {
    const prompt = Array.from({ length: 20 }, (_, i) => 50 + i);
    const first = await post(srv, '/completion', { prompt, n_predict: 4, temperature: 0, id_slot: 1 });
    assert.equal(first.status, 200);
    const saved = await post(srv, '/slots/1?action=save', { filename: 'one.bin' });
    assert.equal(saved.status, 200, saved.text);
    assert.equal(saved.json.n_saved, 20 + 3); // the last token is never fed
    const file = readFileSync(path.join(dir, 'one.bin'));
    assert.equal(file.readUInt32LE(0), 0x67677371); // 'ggsq'
    assert.equal(file.readUInt32LE(8), 3 + 23); // payload words: packed header + ids
    assert.equal(file.readUInt32LE(12), 0xffffffff);
    assert.equal(file.readUInt32LE(20), 23);
    assert.equal(file.readUInt32LE(24), prompt[0]);
    assert.equal(saved.json.n_written, file.length);

    const erased = await post(srv, '/slots/1?action=erase');
    assert.equal(erased.json.n_erased, 23);
    assert.equal((await post(srv, '/slots/1?action=erase')).json.n_erased, 0);

    const restored = await post(srv, '/slots/0?action=restore', { filename: 'one.bin' });
    assert.equal(restored.status, 200, restored.text);
    assert.equal(restored.json.n_restored, 23);
    const again = await post(srv, '/completion', { prompt, n_predict: 4, temperature: 0, id_slot: 0 });
    assert.equal(again.json.timings.cache_n, 19); // all but the token fed for fresh logits
    assert.equal(again.json.content, first.json.content);
  });

  test('bad names, actions, slots and files are 400; the server keeps serving', async () => {
    for (const [route, body] of [['/slots/0?action=save', { filename: '../x' }], ['/slots/0?action=save', {}],
      ['/slots/0?action=fly', { filename: 'a' }], ['/slots/7?action=save', { filename: 'a' }],
      ['/slots/x?action=save', { filename: 'a' }], ['/slots/0?action=restore', { filename: 'missing.bin' }]]) {
      const r = await post(srv, route, body);
      assert.equal(r.status, 400, route + JSON.stringify(body));
    }
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });
});

describe('several models: names are checked', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--threads', '1', '-m', synthModel('small', SMALL), '-m', synthModel('other', SMALL)]);
  });
  after(async () => srv && (await srv.stop()));

  test('a name no model has is 404 model_not_found; no name gets the first chat model', async () => {
    const bad = await post(srv, '/v1/chat/completions', chat({ model: 'gpt-4o' }));
    assert.equal(bad.status, 404);
    assert.equal(errorOf(bad.json).code, 'model_not_found');
    const unnamed = await post(srv, '/chat/completions', chat());
    assert.equal(unnamed.status, 200);
    assert.equal(unnamed.json.model, 'small');
    const completion = await post(srv, '/v1/completions', { prompt: 'hi', max_tokens: 2 });
    assert.equal(completion.status, 200);
  });
});

describe('refused llama-server flags', () => {
  test('--model-url fails naming the flag and what to do instead', async () => {
    await assert.rejects(startServer(['--model-url', 'https://example.com/m.gguf']),
      /--model-url: downloading .* with -m/);
  });
  test('--lora fails clearly', async () => {
    await assert.rejects(startServer(['--lora', 'x.gguf']), /--lora: LoRA adapters are not supported/);
  });
});

describe('CORS policy (--cors-origins)', () => {
  const preflight = (srv, origin) => fetch(`${srv.url}/completions`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'Authorization' },
  });
  let local;
  let listed;
  let tools;
  before(async () => {
    local = await startServer(['--cors-origins', 'localhost']);
    listed = await startServer(['--cors-origins', 'https://app.example, https://b.example',
      '--cors-headers', 'Authorization, Content-Type', '--no-cors-credentials']);
    tools = await startServer(['--tools', 'all']);
  });
  after(async () => {
    for (const s of [local, listed, tools]) if (s) await s.stop();
  });

  test('localhost: loopback origins are reflected, every other origin gets no allow header', async () => {
    for (const srv of [local, tools]) {
      for (const origin of ['http://localhost', 'http://localhost:8080', 'http://127.0.0.1:3000', 'http://[::1]:3000']) {
        const r = await preflight(srv, origin);
        assert.equal(r.status, 200);
        assert.equal(r.headers.get('access-control-allow-origin'), origin);
      }
      for (const origin of ['http://evil.com', 'http://localhost.evil.com', 'http://notlocalhost']) {
        const r = await preflight(srv, origin);
        assert.equal(r.status, 200);
        assert.equal(r.headers.get('access-control-allow-origin'), null, origin);
      }
    }
    // Ordinary answers follow the same policy.
    const r = await fetch(`${local.url}/health`, { headers: { origin: 'http://evil.com' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), null);
  });

  test('a list allows exactly its origins; methods, headers and credentials are configurable', async () => {
    const ok = await preflight(listed, 'https://b.example');
    assert.equal(ok.headers.get('access-control-allow-origin'), 'https://b.example');
    assert.equal(ok.headers.get('access-control-allow-headers'), 'Authorization, Content-Type');
    assert.equal(ok.headers.get('access-control-allow-credentials'), 'false');
    assert.equal((await preflight(listed, 'https://c.example')).headers.get('access-control-allow-origin'), null);
  });
});
