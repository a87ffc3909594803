// The `llamapi` CLI against a real server: the management commands (tables and --json), their
// errors, the hint when no server runs, `chat` (one turn with -p, a prompt loop on stdin that
// keeps the history) giving exactly what the chat API gives for the same conversation, and
// `run` (load the model when the server does not have it, then chat).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startServer, cliBin } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

let srv;
let model;

function cli(args, { input, host = srv.url } = {}) {
  const r = spawnSync(cliBin, ['--host', host, ...args], { input, encoding: 'utf8', timeout: 60000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function chatApi(messages, extra = {}) {
  const r = await fetch(`${srv.url}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: 'm', messages, temperature: 0, max_tokens: 12, ...extra }),
  });
  assert.equal(r.status, 200);
  return (await r.json()).choices[0].message.content;
}

async function modelIds() {
  return (await (await fetch(`${srv.url}/v1/models`)).json()).data.map((d) => d.id);
}

// The CLI ends an answer with a newline unless the answer already does.
const asPrinted = (text) => (text.endsWith('\n') ? text : `${text}\n`);

before(async () => {
  model = synthModel('small', SMALL);
  srv = await startServer(['-m', model, '--alias', 'm']);
});

after(async () => {
  await srv?.stop();
});

test('platforms and ps print tables; --json prints the raw answer', () => {
  const p = cli(['platforms']);
  assert.equal(p.status, 0);
  assert.match(p.stdout, /^ID\s+NAME\s+AVAILABLE\s+CHIPS\n/);
  assert.match(p.stdout, /\ncpu\s+.*\syes\s/);
  const ps = cli(['ps']);
  assert.equal(ps.status, 0);
  assert.match(ps.stdout, /\nm\s+chat\s+cpu\s+1\s+ready\s/);
  const raw = JSON.parse(cli(['--json', 'ps']).stdout);
  assert.equal(raw.object, 'list');
  assert.deepEqual(raw.data.map((d) => d.id), ['m']);
});

test('load, resize and unload go through the management API', () => {
  const load = cli(['load', model, '--id', 'two', '--instances', '2']);
  assert.equal(load.status, 0, load.stderr);
  assert.match(cli(['ps']).stdout, /\ntwo\s+chat\s+cpu\s+2\s+ready\s/);
  assert.equal(cli(['resize', 'two', '1']).status, 0);
  assert.match(cli(['ps']).stdout, /\ntwo\s+chat\s+cpu\s+1\s+ready\s/);
  assert.equal(cli(['unload', 'two']).status, 0);
  assert.doesNotMatch(cli(['ps']).stdout, /\ntwo\s/);
});

test('a refused request exits 1 with the server message; bad usage exits 2', () => {
  const r = cli(['unload', 'nope']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /server answered 404: .*nope/);
  assert.equal(cli(['resize', 'm']).status, 2);
  assert.equal(cli(['chat']).status, 2);
  assert.equal(cli(['chat', 'm', '--max-tokens', 'many']).status, 2);
});

test('no server: one line that says how to start one', () => {
  const r = cli(['ps'], { host: 'http://127.0.0.1:9' });
  assert.equal(r.status, 1);
  assert.equal(r.stderr.trim().split('\n').length, 1);
  assert.match(r.stderr, /no server at http:\/\/127\.0\.0\.1:9 \(start one with `llamapi serve`/);
  assert.equal(cli(['chat', 'm', '-p', 'hi'], { host: 'http://127.0.0.1:9' }).status, 1);
});

test('chat -p streams the same answer the API gives', async () => {
  const expected = await chatApi([{ role: 'user', content: 'Tell me a story' }]);
  const r = cli(['chat', 'm', '-p', 'Tell me a story', '--temperature', '0', '--max-tokens', '12']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, asPrinted(expected));
  const withSystem = await chatApi([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }]);
  const s = cli(['chat', 'm', '--system', 'Be brief.', '-p', 'Hi', '--temperature', '0', '--max-tokens', '12']);
  assert.equal(s.stdout, asPrinted(withSystem));
});

test('chat on stdin keeps the history, /clear forgets it, /bye ends', async () => {
  const first = await chatApi([{ role: 'user', content: 'One' }]);
  const second = await chatApi([
    { role: 'user', content: 'One' }, { role: 'assistant', content: first }, { role: 'user', content: 'Two' },
  ]);
  const fresh = await chatApi([{ role: 'user', content: 'Three' }]);
  assert.notEqual(second, await chatApi([{ role: 'user', content: 'Two' }]), 'the history changes the answer');
  const r = cli(['chat', 'm', '--temperature', '0', '--max-tokens', '12'],
    { input: 'One\n\nTwo\n/clear\nThree\n/bye\nnever sent\n' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, asPrinted(first) + asPrinted(second) + asPrinted(fresh));
});

test('chat with a refused request exits 1 with the server message', () => {
  // (A model name the server lacks is served by its one -m model, as llama-server does.)
  const r = cli(['chat', 'm', '-p', 'hi', '--temperature', '9']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /server answered 400: .*temperature/);
});

test('run loads a model file the server does not have, then chats; later runs reuse it', async () => {
  const expected = await chatApi([{ role: 'user', content: 'Go' }]); // same weights as 'm'
  const first = cli(['run', model, '-p', 'Go', '--temperature', '0', '--max-tokens', '12']);
  assert.equal(first.status, 0, first.stderr);
  assert.match(first.stderr, /model 'small' loaded/);
  assert.equal(first.stdout, asPrinted(expected), 'stdout carries the answer alone');
  assert.ok((await modelIds()).includes('small'));
  const again = cli(['run', model, '-p', 'Go', '--temperature', '0', '--max-tokens', '12']);
  assert.equal(again.status, 0, again.stderr);
  assert.doesNotMatch(again.stderr, /loaded/);
  assert.equal(again.stdout, asPrinted(expected));
  const byId = cli(['run', 'small', '-p', 'Go', '--temperature', '0', '--max-tokens', '12']);
  assert.equal(byId.stdout, asPrinted(expected));
  const named = cli(['run', model, '--id', 'named', '-p', 'Go', '--temperature', '0', '--max-tokens', '12']);
  assert.match(named.stderr, /model 'named' loaded/);
  assert.equal(named.stdout, asPrinted(expected));
  for (const id of ['small', 'named']) assert.equal(cli(['unload', id]).status, 0);
});

test('run of a file that does not exist exits 1 with the server message', () => {
  const r = cli(['run', '/nonexistent/model.gguf', '-p', 'hi']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /does not exist/);
  assert.equal(cli(['run']).status, 2);
});
