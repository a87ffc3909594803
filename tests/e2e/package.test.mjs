// The Debian package (scripts/build-deb.sh, `make deb`): it builds, dpkg-deb lists what it
// should, the man pages carry every flag of --help, systemd accepts the unit, and the
// packaged binaries started with the packaged configuration serve a model on loopback.
// Runs on the release build (a sanitizer build is not what gets packaged).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, cpSync, existsSync, readFileSync, rmSync, copyFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot, serverBin, sanitizer, startServer } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const buildDir = path.dirname(path.dirname(serverBin));
const hostArch = has('dpkg') ? execFileSync('dpkg', ['--print-architecture']).toString().trim() : '';
const armDir = process.env.LLAMAPI_AARCH64_DIR ?? path.join(repoRoot, 'build/aarch64-release');
const skip = sanitizer ? 'the package is built from the release build, not a sanitizer one'
  : !has('dpkg-deb') ? 'dpkg-deb is not installed' : false;

const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { cwd: repoRoot, ...opts }).toString();

const CONTENTS = ['./usr/bin/llamapi-server', './usr/bin/llamapi', './etc/llamapi/llamapi.conf',
  './etc/llamapi/models.ini', './lib/systemd/system/llamapi.service',
  './usr/share/man/man8/llamapi-server.8.gz', './usr/share/man/man1/llamapi.1.gz',
  './usr/share/doc/llamapi/README.md'];

describe('Debian package', { skip }, () => {
  let out, debs = {}, root;
  before(() => {
    out = mkdtempSync(path.join(os.tmpdir(), 'llamapi-deb-'));
    debs[hostArch] = run('scripts/build-deb.sh', [buildDir, hostArch, out]).trim();
    if (hostArch === 'amd64' && existsSync(path.join(armDir, 'bin/llamapi-server')))
      debs.arm64 = run('scripts/build-deb.sh', [armDir, 'arm64', out, buildDir]).trim();
    root = path.join(out, 'root');
    run('dpkg-deb', ['-x', debs[hostArch], root]);
  });
  after(() => { if (out) rmSync(out, { recursive: true, force: true }); });

  test('dpkg-deb --info: name, architecture, dependencies, conffiles, maintainer scripts', () => {
    for (const [arch, deb] of Object.entries(debs)) {
      assert.equal(path.basename(deb), `llamapi_${/LLAMAPI_VERSION "(.*)"/.exec(
        readFileSync(path.join(repoRoot, 'src/server/version.h'), 'utf8'))[1]}_${arch}.deb`);
      const info = run('dpkg-deb', ['--info', deb]);
      assert.match(info, /^ Package: llamapi$/m);
      assert.match(info, new RegExp(`^ Architecture: ${arch}$`, 'm'));
      const depends = /^ Depends: (.*)$/m.exec(info)[1].split(', ');
      for (const d of ['adduser', 'libc6', 'libmicrohttpd12', 'libjansson4', 'libcurl4'])
        assert.ok(depends.includes(d), `${arch} Depends has ${d}: ${depends}`);
      for (const f of ['conffiles', 'postinst', 'prerm', 'postrm']) assert.match(info, new RegExp(` ${f} `));
      assert.equal(run('dpkg-deb', ['-I', deb, 'conffiles']),
        '/etc/llamapi/llamapi.conf\n/etc/llamapi/models.ini\n');
      const postinst = run('dpkg-deb', ['-I', deb, 'postinst']);
      assert.match(postinst, /adduser --system --group .*llamapi/);
      assert.match(postinst, /\/var\/lib\/llamapi\/models/);
    }
  });

  test('dpkg-deb --contents: binaries of the right architecture, configuration, unit, man pages', () => {
    for (const [arch, deb] of Object.entries(debs)) {
      const listing = run('dpkg-deb', ['--contents', deb]);
      const files = listing.split('\n').filter(Boolean).map((l) => l.split(/\s+/).pop());
      for (const f of CONTENTS) assert.ok(files.includes(f), `${arch}: ${f} in ${files}`);
      assert.ok(listing.split('\n').every((l) => !l || l.includes('root/root')), 'owned by root');
      const dir = path.join(out, `x-${arch}`);
      run('dpkg-deb', ['-x', deb, dir]);
      const elf = readFileSync(path.join(dir, 'usr/bin/llamapi-server'));
      const machine = elf.readUInt16LE(18); // e_machine
      assert.equal(machine, arch === 'arm64' ? 183 : 62, `${arch} binary machine`);
      const qemu = ['/usr/bin/qemu-aarch64-static', '/usr/bin/qemu-aarch64'].find((q) => existsSync(q));
      const runner = arch === hostArch ? [] : arch === 'arm64' && qemu ? [qemu] : null;
      if (runner) { // the stripped binary still runs (under qemu-user for arm64)
        const cmd = [...runner, path.join(dir, 'usr/bin/llamapi-server'), '--version'];
        assert.match(execFileSync(cmd[0], cmd.slice(1)).toString(), /^llamapi-server \d/);
      }
      for (const script of ['postinst', 'prerm', 'postrm']) {
        const r = spawnSync('sh', ['-n'], { input: run('dpkg-deb', ['-I', deb, script]) });
        assert.equal(r.status, 0, `${script} parses: ${r.stderr}`);
      }
    }
  });

  test('the unit: user, hardening, conffile, reload by SIGHUP', () => {
    const unit = readFileSync(path.join(root, 'lib/systemd/system/llamapi.service'), 'utf8');
    for (const line of ['User=llamapi', 'ProtectSystem=strict', 'NoNewPrivileges=true', 'PrivateTmp=true',
      'ReadWritePaths=/var/lib/llamapi', 'DeviceAllow=char-drm rw', 'DeviceAllow=/dev/rknpu rw',
      'Restart=on-failure', 'ExecReload=/bin/kill -HUP $MAINPID',
      'ExecStart=/usr/bin/llamapi-server --config /etc/llamapi/llamapi.conf'])
      assert.ok(unit.split('\n').includes(line), line);
  });

  test('systemd-analyze verify accepts the unit', (t) => {
    if (!has('systemd-analyze') || !existsSync('/lib/systemd/system/basic.target')) {
      t.skip('systemd-analyze or the systemd units are not installed');
      return;
    }
    // A root holding the package, systemd's own units and /bin/kill, so verify checks the
    // unit's executables and dependencies without installing anything.
    const vroot = path.join(out, 'verify');
    cpSync(root, vroot, { recursive: true });
    // Beside the package's unit, links kept as links (absolute ones resolve inside the root).
    cpSync('/lib/systemd/system', path.join(vroot, 'lib/systemd/system'), { recursive: true, verbatimSymlinks: true });
    mkdirSync(path.join(vroot, 'bin'), { recursive: true });
    copyFileSync('/bin/kill', path.join(vroot, 'bin/kill'));
    const r = spawnSync('systemd-analyze', ['verify', '--man=no', `--root=${vroot}`,
      path.join(vroot, 'lib/systemd/system/llamapi.service')]);
    const said = (r.stdout.toString() + r.stderr.toString()).trim();
    assert.equal(r.status, 0, said);
    assert.equal(said, '', 'no warnings'); // verify warns about unknown keys but still exits 0
  });

  test('the man pages list every flag of --help and render cleanly', (t) => {
    const page = execFileSync('zcat', [path.join(root, 'usr/share/man/man8/llamapi-server.8.gz')]).toString();
    const help = run(serverBin, ['--help']);
    const flags = [...help.matchAll(/^ {2}(?:\S+, )*(--[a-z0-9._-]+)/gm)].map((m) => m[1]);
    assert.ok(flags.length > 100 && flags.includes('--config') && flags.includes('--models-preset'));
    for (const f of flags) assert.ok(page.includes(`\\fB${f.replaceAll('-', '\\-')}\\fR`), `${f} in llamapi-server(8)`);
    const cli = execFileSync('zcat', [path.join(root, 'usr/share/man/man1/llamapi.1.gz')]).toString();
    assert.match(cli, /^\.TH LLAMAPI 1/m);
    assert.match(cli, /unload ID/);
    if (!has('groff')) { t.diagnostic('groff not installed: rendering not checked'); return; }
    for (const p of ['usr/share/man/man8/llamapi-server.8.gz', 'usr/share/man/man1/llamapi.1.gz']) {
      const src = execFileSync('zcat', [path.join(root, p)]);
      const r = spawnSync('groff', ['-k', '-man', '-ww', '-z'], { input: src });
      assert.equal(r.status, 0);
      assert.equal(r.stderr.toString(), '', `${p} renders without warnings`);
    }
  });

  test('the packaged server, with the packaged configuration, serves a model on loopback', async () => {
    const models = mkdtempSync(path.join(out, 'models-'));
    copyFileSync(synthModel('small', SMALL), path.join(models, 'tiny.gguf'));
    const conf = path.join(root, 'etc/llamapi/llamapi.conf');
    assert.match(readFileSync(conf, 'utf8'), /^host = 127\.0\.0\.1$/m);
    // Only what cannot hold outside an installed system is overridden: the port (any free
    // one), and the two paths under /var/lib and /etc.
    const bin = path.join(root, 'usr/bin/llamapi-server');
    const srv = await startServer(['--config', conf, '--models-dir', models,
      '--models-preset', path.join(root, 'etc/llamapi/models.ini'), '--threads', '1'],
    { bin });
    try {
      assert.match(srv.log(), /listening on http:\/\/127\.0\.0\.1:/);
      const cli = path.join(root, 'usr/bin/llamapi');
      const env = { ...process.env, LLAMAPI_PORT: String(srv.port) };
      run(cli, ['load', 'tiny.gguf', '--id', 'tiny'], { env });
      const res = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }) });
      assert.equal(res.status, 200);
      const body = await res.json();
      assert.equal(body.model, 'tiny');
      assert.ok(body.usage.completion_tokens > 0);
      assert.equal((await fetch(`${srv.url}/health?model=tiny`)).status, 200);
    } finally {
      await srv.stop();
    }
  });
});
