// `llamapi pull`/`ls`/`rm`, `-hf` and hf:// model paths against a hub imitation on loopback
// (lib/fakehub.mjs): the quant choice, mmproj and split parts, a resume after the connection
// is cut at 40% (in one run, and from a .part left by an earlier run), a checksum mismatch, 404,
// 401/403 and HF_TOKEN, hub-supplied names that would escape the models folder, and the
// server's hf:// loads, -hf and --offline.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliBin, errorOf, startServer } from './lib/server.mjs';
import { startHub, sha256 } from './lib/fakehub.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

const root = mkdtempSync(path.join(os.tmpdir(), 'llamapi-hub-'));
let counter = 0;
const freshDir = () => path.join(root, `models-${++counter}`);

function pull(args, { env = {} } = {}) {
  const clean = { ...process.env };
  delete clean.HF_TOKEN;
  delete clean.LLAMAPI_MODELS_DIR;
  return new Promise((resolve) => {
    execFile(cliBin, args, { env: { ...clean, ...env }, timeout: 60000 }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr });
    });
  });
}

// Every file under dir, relative, sorted.
function walk(dir, rel = '') {
  if (!existsSync(dir)) return [];
  return readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((d) => {
    const r = rel ? `${rel}/${d.name}` : d.name;
    return d.isDirectory() ? walk(dir, r) : [r];
  }).sort();
}

const blob = (n) => randomBytes(n);
const repos = {
  'org/model': { files: {
    'README.md': Buffer.from('# model\n'),
    'Model-F16.gguf': blob(120_000),
    'Model-Q8_0.gguf': blob(80_000),
    'Model-Q4_K_M.gguf': blob(60_000),
    'mmproj-Model-F16.gguf': blob(20_000),
  } },
  'org/big': { files: { 'Big-Q4_K_M.gguf': blob(3_000_000) }, cutAt: { 'Big-Q4_K_M.gguf': 0.4 } },
  'org/bad': { files: { 'Bad-Q8_0.gguf': blob(30_000) }, wrongSha: ['Bad-Q8_0.gguf'] },
  'org/private': { files: { 'P-Q8_0.gguf': blob(10_000) }, token: 'secret' },
  'org/split': { files: {
    'sub/S-Q4_K_M-00001-of-00003.gguf': blob(10_000),
    'sub/S-Q4_K_M-00002-of-00003.gguf': blob(10_000),
    'sub/S-Q4_K_M-00003-of-00003.gguf': blob(5_000),
    'S-Q8_0.gguf': blob(1_000),
  } },
  'org/nolfs': { files: { 'N-Q8_0.gguf': blob(4_000), 'W-Q4_0.gguf': blob(4_000) },
    noLfs: ['N-Q8_0.gguf', 'W-Q4_0.gguf'], wrongSha: ['W-Q4_0.gguf'] },
  'org/tty': { files: { 'Tty-Q4_K_M.gguf': blob(3_000_000) } },
  'org/many': { pageSize: 2, files: Object.fromEntries(['F16', 'Q8_0', 'Q6_K', 'Q5_K_M', 'Q4_K_M']
    .map((q) => [`a-${q}.gguf`, blob(500)])) },
  'org/huge': { files: { 'H-Q8_0.gguf': blob(1_000) }, listedSize: { 'H-Q8_0.gguf': 2 ** 52 } },
  'org/evil': {
    files: { 'E-Q8_0.gguf': blob(2_000) },
    extraListing: [
      { type: 'file', path: '../../escape-Q4_K_M.gguf', size: 5, lfs: { oid: sha256(Buffer.from('x')), size: 5 } },
      { type: 'file', path: '/abs-Q4_K_M.gguf', size: 5, lfs: { oid: sha256(Buffer.from('x')), size: 5 } },
    ],
  },
};

let hub;
before(async () => {
  repos['org/tiny'] = { files: { 'tiny-Q8_0.gguf': readFileSync(synthModel('small', SMALL)) } };
  hub = await startHub(repos);
});
after(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

const cdnRequests = (file) => hub.log.filter((r) => r.url.startsWith('/cdn/') && r.url.endsWith(`/${file}`));

describe('llamapi pull', () => {
  test('the default quant (Q4_K_M), its mmproj, progress lines, nothing half-written', async () => {
    const dir = freshDir();
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/model']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), path.join(dir, 'org/model/Model-Q4_K_M.gguf'));
    assert.deepEqual(walk(dir), ['org/model/Model-Q4_K_M.gguf', 'org/model/mmproj-Model-F16.gguf']);
    assert.deepEqual(readFileSync(r.stdout.trim()), repos['org/model'].files['Model-Q4_K_M.gguf']);
    assert.match(r.stderr, /Model-Q4_K_M\.gguf: 100% .*\(done\)/); // not a terminal: lines
    const help = await pull(['pull', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /default Q4_K_M, then Q8_0/);
    const usage = await pull(['pull']);
    assert.equal(usage.code, 2);
  });

  test('on a terminal the progress is one redrawn bar', async (t) => {
    const dir = freshDir();
    // util-linux's script gives the command a pseudo-terminal (bsdutils, an essential package)
    const cmd = [cliBin, 'pull', '--hub-url', hub.url, '--models-dir', dir, 'org/tty'].join(' ');
    const r = await new Promise((resolve) => execFile('script', ['-qec', cmd, '/dev/null'],
      { timeout: 60000 }, (err, stdout) => resolve({ code: err ? err.code : 0, stdout })));
    if (r.code === 'ENOENT') return t.skip('no script(1) here');
    assert.equal(r.code, 0, r.stdout);
    assert.match(r.stdout, /\r\x1b\[KTty-Q4_K_M\.gguf \[#{30}\] 100% 3\.0 MB\/3\.0 MB .* ETA 0:00\r?\n/);
    assert.doesNotMatch(r.stdout, /\(done\)/); // no log lines on a terminal
    return undefined;
  });

  test('a quant matches in any case; a second pull reuses the file', async () => {
    const dir = freshDir();
    const r = await pull(['pull', '--hub-url', `${hub.url}/`, '--models-dir', dir, 'hf://org/model:q8_0']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), path.join(dir, 'org/model/Model-Q8_0.gguf'));
    const before = cdnRequests('Model-Q8_0.gguf').length;
    const again = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/model:Q8_0']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(cdnRequests('Model-Q8_0.gguf').length, before, 'no second download');
  });

  test('a listing in pages is followed to its end (Link: rel="next")', async () => {
    const dir = freshDir();
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/many']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), path.join(dir, 'org/many/a-Q4_K_M.gguf')); // on the last page
    const pages = hub.log.filter((q) => q.url.startsWith('/api/models/org/many/tree/main'));
    assert.deepEqual(pages.map((q) => new URL(q.url, hub.url).searchParams.get('cursor')),
      [null, '2', '4']);
  });

  test('a file named by path', async () => {
    const dir = freshDir();
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/model/Model-F16.gguf']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), path.join(dir, 'org/model/Model-F16.gguf'));
  });

  test('no matching quant lists what the repository has', async () => {
    const dir = freshDir();
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/model:Q3_K_S']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no Q3_K_S model file in org\/model; GGUF files there: .*Model-Q8_0\.gguf/);
    assert.deepEqual(walk(dir), []);
  });

  test('a connection cut at 40% is resumed with Range in the same run', async () => {
    const dir = freshDir();
    const file = repos['org/big'].files['Big-Q4_K_M.gguf'];
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/big']);
    assert.equal(r.code, 0, r.stderr);
    const reqs = cdnRequests('Big-Q4_K_M.gguf');
    assert.equal(reqs.length, 2);
    assert.equal(reqs[0].range, null);
    assert.equal(reqs[1].range, `bytes=${Math.floor(file.length * 0.4)}-`);
    assert.equal(sha256(readFileSync(r.stdout.trim())), sha256(file));
    assert.deepEqual(walk(dir), ['org/big/Big-Q4_K_M.gguf']);
  });

  test('a .part left by an earlier run is resumed', async () => {
    const dir = freshDir();
    const file = repos['org/model'].files['Model-F16.gguf'];
    mkdirSync(path.join(dir, 'org/model'), { recursive: true });
    const kept = Math.floor(file.length * 0.3);
    writeFileSync(path.join(dir, 'org/model/Model-F16.gguf.part'), file.subarray(0, kept));
    const ls = await pull(['ls', '--models-dir', dir]);
    assert.match(ls.stdout, /org\/model\s+Model-F16\.gguf\s+36\.0 kB\s+\(unfinished\)/);
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/model:F16']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(cdnRequests('Model-F16.gguf').at(-1).range, `bytes=${kept}-`);
    assert.deepEqual(readFileSync(r.stdout.trim()), file);
  });

  test('a checksum mismatch deletes the download', async () => {
    const dir = freshDir();
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/bad:Q8_0']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Bad-Q8_0\.gguf: checksum mismatch/);
    assert.deepEqual(walk(dir), [], 'neither the model nor a .part is left');
  });

  test('a file larger than the free space is refused before any byte is written', async () => {
    const dir = freshDir();
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/huge']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /disk full: .*H-Q8_0\.gguf\.part needs 4503599627370496 more bytes/);
    assert.deepEqual(walk(dir), []);
    assert.equal(cdnRequests('H-Q8_0.gguf').length, 0);
  });

  test('without an LFS oid in the listing, the redirect\'s X-Linked-Etag is the checksum', async () => {
    const dir = freshDir();
    const good = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/nolfs:Q8_0']);
    assert.equal(good.code, 0, good.stderr);
    const bad = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/nolfs:Q4_0']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /W-Q4_0\.gguf: checksum mismatch/);
    assert.deepEqual(walk(dir), ['org/nolfs/N-Q8_0.gguf']);
  });

  test('404, 401 without HF_TOKEN, 403 with a refused token, 200 with the right one', async () => {
    const dir = freshDir();
    const missing = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/nothing']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /org\/nothing: not found on the hub \(401; a private repository needs HF_TOKEN\)/);
    const missingFile = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/model/Nope-Q8_0.gguf']);
    assert.equal(missingFile.code, 1);
    assert.match(missingFile.stderr, /no file 'Nope-Q8_0\.gguf' in org\/model; GGUF files there/);
    const withToken = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/nothing'],
      { env: { HF_TOKEN: 'secret' } });
    assert.match(withToken.stderr, /org\/nothing: not found on the hub \(404\)/);
    const anon = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/private']);
    assert.equal(anon.code, 1);
    assert.match(anon.stderr, /401.*HF_TOKEN/);
    const wrong = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/private'],
      { env: { HF_TOKEN: 'nope' } });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /access denied \(403\)/);
    const ok = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/private'],
      { env: { HF_TOKEN: 'secret' } });
    assert.equal(ok.code, 0, ok.stderr);
    assert.ok(cdnRequests('P-Q8_0.gguf').length >= 1);
  });

  test('a split model downloads every part', async () => {
    const dir = freshDir();
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/split:Q4_K_M']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), path.join(dir, 'org/split/sub/S-Q4_K_M-00001-of-00003.gguf'));
    assert.deepEqual(walk(dir), [1, 2, 3].map((i) => `org/split/sub/S-Q4_K_M-0000${i}-of-00003.gguf`));
  });

  test('hub file names that would leave the models folder are ignored', async () => {
    const dir = path.join(freshDir(), 'a', 'b');
    const r = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/evil']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), path.join(dir, 'org/evil/E-Q8_0.gguf')); // not the Q4_K_M decoys
    assert.deepEqual(walk(path.dirname(path.dirname(dir))), ['a/b/org/evil/E-Q8_0.gguf']);
    const bad = await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/evil/../../x.gguf']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /not a GGUF file path inside the repository/);
  });

  test('--offline uses only what is there; ls lists, rm deletes', async () => {
    const dir = freshDir();
    const before = hub.log.length;
    const none = await pull(['pull', '--offline', '--hub-url', hub.url, '--models-dir', dir, 'org/model']);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /offline: no GGUF model file in org\/model/);
    assert.equal(hub.log.length, before, 'offline: no request');
    assert.equal((await pull(['pull', '--hub-url', hub.url, '--models-dir', dir, 'org/model:Q8_0'])).code, 0);
    const cached = await pull(['pull', '--offline', '--models-dir', dir, 'org/model']);
    assert.equal(cached.code, 0, cached.stderr); // Q4_K_M absent: Q8_0 is the fallback
    assert.equal(cached.stdout.trim(), path.join(dir, 'org/model/Model-Q8_0.gguf'));
    const ls = await pull(['ls'], { env: { LLAMAPI_MODELS_DIR: dir } });
    assert.equal(ls.code, 0);
    assert.match(ls.stdout, /org\/model\s+Model-Q8_0\.gguf\s+80\.0 kB/);
    assert.match(ls.stdout, /org\/model\s+mmproj-Model-F16\.gguf/);
    const rm = await pull(['rm', '--models-dir', dir, 'org/model:Q8_0']);
    assert.equal(rm.code, 0, rm.stderr);
    assert.match(rm.stdout, /removed 2 files/); // the model, then its now lonely projector
    assert.deepEqual(walk(dir), []);
    const again = await pull(['rm', '--models-dir', dir, 'org/model']);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /nothing of org\/model/);
  });
});

async function load(srv, body) {
  const r = await fetch(`${srv.url}/v1/models/load`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}

describe('the server: hf:// model paths, -hf, --offline', () => {
  const dir = freshDir();

  test('hf:// loads download once and serve; hub failures are clear errors', async () => {
    const srv = await startServer(['--threads', '1', '--hub-url', hub.url, '--models-dir', dir]);
    try {
      const ok = await load(srv, { model_id: 'tiny', model_path: 'hf://org/tiny:Q8_0' });
      assert.equal(ok.status, 200, JSON.stringify(ok.json));
      assert.ok(existsSync(path.join(dir, 'org/tiny/tiny-Q8_0.gguf')));
      const chat = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }) });
      assert.equal(chat.status, 200);
      const cases = [
        ['hf://org/nothing', 404, 'hub_model_not_found', /not found on the hub/],
        ['hf://org/model:Q3_K_S', 404, 'hub_no_matching_file', /no Q3_K_S model file/],
        ['hf://org/private', 502, 'hub_unauthorized', /HF_TOKEN/],
        ['hf://org/bad', 502, 'hub_checksum_mismatch', /checksum mismatch/],
        ['hf://org/huge', 507, 'insufficient_storage', /disk full/],
        ['hf://org/split', 400, 'split_model_unsupported', /split in 3 files \(downloaded\).*merge/],
        ['hf://../etc/x.gguf', 400, 'invalid_model_path', /repository name/],
      ];
      for (const [modelPath, status, code, message] of cases) {
        const r = await load(srv, { model_id: `x${status}${code}`, model_path: modelPath });
        assert.equal(r.status, status, `${modelPath}: ${JSON.stringify(r.json)}`);
        assert.equal(errorOf(r.json).code, code);
        assert.equal(errorOf(r.json).param, 'model_path');
        assert.match(errorOf(r.json).message, message);
      }
      assert.equal((await fetch(`${srv.url}/health`)).status, 200);
    } finally {
      await srv.stop();
    }
    assert.match(srv.log(), /hub: tiny-Q8_0\.gguf .*verified/);
  });

  test('two loads of one hub model at once download it once', async () => {
    const fresh = freshDir();
    const srv = await startServer(['--threads', '1', '--hub-url', hub.url, '--models-dir', fresh]);
    try {
      const before = cdnRequests('tiny-Q8_0.gguf').length;
      const [a, b] = await Promise.all(['a', 'b'].map((id) =>
        load(srv, { model_id: id, model_path: 'hf://org/tiny:Q8_0' })));
      assert.equal(a.status, 200, JSON.stringify(a.json));
      assert.equal(b.status, 200, JSON.stringify(b.json));
      assert.equal(cdnRequests('tiny-Q8_0.gguf').length, before + 1);
    } finally {
      await srv.stop();
    }
  });

  test('-hf loads the cached model at start-up; --offline refuses what is not there', async () => {
    const before = hub.log.length;
    const srv = await startServer(['--threads', '1', '--offline', '--hub-url', hub.url, '--models-dir', dir,
      '-hf', 'org/tiny:q8_0', '--alias', 'tiny']);
    try {
      const models = await (await fetch(`${srv.url}/v1/models`)).json();
      assert.deepEqual(models.data.map((m) => m.id), ['tiny']);
      const r = await load(srv, { model_id: 'other', model_path: 'hf://org/model:Q8_0' });
      assert.equal(r.status, 400);
      assert.equal(errorOf(r.json).code, 'hub_offline');
      assert.match(errorOf(r.json).message, /offline: no Q8_0 model file in org\/model/);
    } finally {
      await srv.stop();
    }
    assert.equal(hub.log.length, before, 'offline: the hub was never asked');
  });

  test('-hf downloads when the model is not there; a failure stops the start', async () => {
    const fresh = freshDir();
    const srv = await startServer(['--threads', '1', '--hub-url', hub.url, '--models-dir', fresh,
      '-hf', 'org/tiny', '-hff', 'tiny-Q8_0.gguf']);
    try {
      const models = await (await fetch(`${srv.url}/v1/models`)).json();
      assert.deepEqual(models.data.map((m) => m.id), ['tiny-Q8_0']);
    } finally {
      await srv.stop();
    }
    await assert.rejects(startServer(['--hub-url', hub.url, '--models-dir', fresh, '-hf', 'org/nothing']),
      /--hf-repo org\/nothing: org\/nothing: not found on the hub/);
  });
});
