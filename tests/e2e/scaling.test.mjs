// Scale-out behind nginx (docs/SCALING.md): two llamapi-server processes behind Debian's
// nginx running packaging/nginx/llamapi.conf as documented, with its own prefix, pid, logs
// and temp paths under build/. 200 mixed streamed and whole requests from concurrent clients
// all complete; killing one server mid-run loses only requests in flight on it; a repeated
// conversation with an affinity header finds its prompt cached. Skips without nginx.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { repoRoot, sanitizer, startServer } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

const nginxBin = ['/usr/sbin/nginx', '/usr/bin/nginx']
  .find((p) => existsSync(p)) ?? (spawnSync('sh', ['-c', 'command -v nginx']).stdout.toString().trim() || null);
const skip = !nginxBin ? 'nginx is not installed (scripts/install-deps.sh installs it)'
  : sanitizer ? 'proxying is independent of the server build; run on the release build' : false;

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

async function startNginx(dir, listen, a, b) {
  const site = readFileSync(path.join(repoRoot, 'packaging/nginx/llamapi.conf'), 'utf8')
    .replaceAll('@SERVER_A@', a).replaceAll('@SERVER_B@', b).replaceAll('@LISTEN@', listen);
  writeFileSync(path.join(dir, 'llamapi.conf'), site);
  mkdirSync(path.join(dir, 'tmp'), { recursive: true });
  const temps = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .map((k) => `  ${k}_temp_path ${dir}/tmp/${k};`).join('\n');
  writeFileSync(path.join(dir, 'nginx.conf'), `daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log ${dir}/access.log;
${temps}
  include ${dir}/llamapi.conf;
}
`);
  const proc = spawn(nginxBin, ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'error.log')],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (c) => { log += c; });
  const url = `http://${listen}`;
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`nginx exited: ${log}${readFileSync(path.join(dir, 'error.log'), 'utf8')}`);
    try { if ((await fetch(`${url}/health`)).ok) break; } catch { /* not yet */ }
    if (i > 100) throw new Error('nginx did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, url, stop: () => new Promise((r) => { proc.on('exit', r); proc.kill('SIGQUIT'); }) };
}

const body = (extra = {}) => ({ model: 'small', messages: [{ role: 'user', content: 'Tell me a story' }],
  max_tokens: 24, temperature: 0, logit_bias: { 2: -100 }, ...extra }); // no early end

// One request through the proxy. Resolves { ok, upstream, streamed, error }; never throws.
async function one(url, stream, headers = {}) {
  let upstream = null;
  try {
    const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST',
      headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body({ stream })) });
    upstream = res.headers.get('x-upstream');
    if (res.status !== 200) return { ok: false, upstream, error: `status ${res.status}: ${await res.text()}` };
    const text = await res.text();
    if (stream) {
      const ok = text.trimEnd().endsWith('data: [DONE]');
      return { ok, upstream, error: ok ? null : `stream cut: ${text.slice(-120)}` };
    }
    const j = JSON.parse(text);
    return { ok: j.choices?.length === 1, upstream, json: j };
  } catch (e) {
    return { ok: false, upstream, error: String(e.cause?.code ?? e.message) };
  }
}

// n requests from `clients` concurrent clients, alternating streamed and whole. onDone(i, r)
// sees each result; starts[i]/ends[i] are monotonic times.
async function runLoad(url, n, clients, onDone = () => {}) {
  const results = new Array(n), starts = new Array(n), ends = new Array(n);
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < n) {
      const i = next++;
      starts[i] = performance.now();
      results[i] = await one(url, i % 2 === 0);
      ends[i] = performance.now();
      onDone(i, results[i]);
    }
  }));
  return { results, starts, ends };
}

describe('scale-out behind nginx', { skip, timeout: 50000 }, () => {
  let a, b, proxy, dir, addrA, addrB;
  before(async () => {
    const model = synthModel('small', SMALL);
    const args = ['-m', model, '--alias', 'small', '--threads', '1', '-np', '2', '--request-queue-size', '64'];
    [a, b] = await Promise.all([startServer(args), startServer(args)]);
    addrA = `127.0.0.1:${a.port}`;
    addrB = `127.0.0.1:${b.port}`;
    mkdirSync(path.join(repoRoot, 'build'), { recursive: true });
    dir = mkdtempSync(path.join(repoRoot, 'build', 'nginx-test-'));
    proxy = await startNginx(dir, `127.0.0.1:${await freePort()}`, addrA, addrB);
  });
  after(async () => {
    await proxy?.stop();
    await a?.stop();
    if (b && b.proc.exitCode === null && b.proc.signalCode === null) await b.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('/health and /health?model= through the proxy', async () => {
    assert.equal(await (await fetch(`${proxy.url}/health`)).text(), 'ok');
    const ready = await fetch(`${proxy.url}/health?model=small`);
    assert.equal(ready.status, 200);
    // Absent everywhere: both servers answer 503, nginx tries both and passes the last on.
    const absent = await fetch(`${proxy.url}/health?model=nope`);
    assert.equal(absent.status, 503);
    assert.equal(absent.headers.get('retry-after'), '1');
  });

  test('a repeated conversation with an affinity header finds its prompt cached', async () => {
    const system = 'You are a careful assistant. '.repeat(30);
    for (const conv of ['conv-1', 'conv-2', 'conv-3', 'conv-4']) {
      const messages = [{ role: 'system', content: system }, { role: 'user', content: `Question ${conv}` }];
      const ask = async () => {
        const res = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST',
          headers: { 'content-type': 'application/json', 'x-conversation-id': conv },
          body: JSON.stringify({ model: 'small', messages, max_tokens: 4, temperature: 0 }) });
        assert.equal(res.status, 200);
        return { upstream: res.headers.get('x-upstream'), usage: (await res.json()).usage };
      };
      const first = await ask();
      const again = await ask();
      assert.equal(again.upstream, first.upstream, 'the same server');
      assert.ok(again.usage.prompt_tokens_details.cached_tokens > 0,
        `${conv}: cached_tokens ${JSON.stringify(again.usage)}`);
    }
  });

  test('200 mixed streamed and whole requests from 16 clients complete', async (t) => {
    const t0 = performance.now();
    const { results } = await runLoad(proxy.url, 200, 16);
    const failed = results.filter((r) => !r.ok);
    assert.deepEqual(failed, []);
    const perServer = {};
    for (const r of results) perServer[r.upstream] = (perServer[r.upstream] ?? 0) + 1;
    t.diagnostic(`200 requests in ${Math.round(performance.now() - t0)} ms; per upstream ${JSON.stringify(perServer)}`);
    assert.ok(perServer[addrA] > 0 && perServer[addrB] > 0, 'both servers took requests');
  });

  test('killing one server mid-run loses only the requests in flight on it', async (t) => {
    let killedAt = null, done = 0;
    const inflightAtKill = new Set();
    const started = new Set();
    const { results, starts, ends } = await runLoad(proxy.url, 200, 16, (i) => {
      done++;
      if (done === 60 && killedAt === null) {
        killedAt = performance.now();
        b.proc.kill('SIGKILL');
      }
    });
    for (let i = 0; i < 200; i++) if (starts[i] < killedAt && ends[i] > killedAt) inflightAtKill.add(i);
    const lost = results.map((r, i) => [r, i]).filter(([r]) => !r.ok);
    t.diagnostic(`in flight at the kill: ${inflightAtKill.size}; lost: ${lost.length} ` +
      `(${lost.map(([r]) => r.error).slice(0, 3).join('; ')}); ` +
      `after the kill ${results.filter((r, i) => starts[i] > killedAt && r.ok).length} completed`);
    t.diagnostic('in flight (index:stream|whole:upstreams:ok): ' + [...inflightAtKill]
      .map((i) => `${i}:${i % 2 === 0 ? 's' : 'w'}:${results[i].upstream}:${results[i].ok}`).join(' '));
    for (const [r, i] of lost) {
      assert.ok(inflightAtKill.has(i), `request ${i} failed without being in flight at the kill: ${r.error}`);
      assert.ok(r.upstream === null || r.upstream.includes(addrB), `lost request ${i} was on ${r.upstream}`);
    }
    assert.ok(lost.length <= inflightAtKill.size);
    for (let i = 0; i < 200; i++) {
      if (starts[i] > killedAt) {
        assert.ok(results[i].ok, `request ${i} after the kill: ${results[i].error}`);
        assert.ok(results[i].upstream.endsWith(addrA), `after the kill on ${results[i].upstream}`);
      }
    }
    assert.ok(results.filter((_, i) => starts[i] > killedAt).length > 100, 'the run went on after the kill');
  });
});
