// The chat page on GET / in a real browser: Debian's chromium driven by puppeteer-core. Skips
// (with the reason) when chromium or puppeteer-core is missing. Every step is bounded; the
// page must make no request to anything but this server and break no CSP rule. A screenshot
// goes to <build>/artifacts/webui.png.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, serverBin } from './lib/server.mjs';
import { synthModel, tmpDir } from './lib/models.mjs';

// LLAMAPI_CHROMIUM names the browser (only it is tried); else Debian's.
const CHROMIUM = (process.env.LLAMAPI_CHROMIUM ? [process.env.LLAMAPI_CHROMIUM]
  : ['/usr/bin/chromium', '/usr/bin/chromium-browser']).find((p) => existsSync(p));
let puppeteer = null;
try {
  puppeteer = (await import('puppeteer-core')).default;
} catch {
  // reported by the skip below
}
const skip = !CHROMIUM ? `chromium is not installed (apt-get install chromium, or set LLAMAPI_CHROMIUM)${
  process.env.LLAMAPI_CHROMIUM ? `: no ${process.env.LLAMAPI_CHROMIUM}` : ''}`
  : !puppeteer ? 'puppeteer-core is not installed (cd tests/e2e && npm ci)' : false;
if (skip) console.log(`# webui: skipped: ${skip}`);

// The demo model as make run writes it, and a slower one of the same vocabulary.
const DEMO = ['--arch', 'qwen2', '--layers', '4', '--embd', '256', '--heads', '4', '--heads-kv', '2',
  '--ffn', '512', '--ctx', '2048', '--type', 'q8_0', '--seed', '42', '--words'];
const LONG = ['--arch', 'qwen2', '--layers', '6', '--embd', '512', '--heads', '8', '--heads-kv', '2',
  '--ffn', '2048', '--ctx', '4096', '--type', 'f32', '--seed', '3', '--words'];
const READABLE = /^[A-Za-z.,\s]+$/;
const STEP_MS = 30000;
// A 1x1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
// A short 8 kHz mono 16-bit WAV.
function wavFile() {
  const n = 800;
  const b = Buffer.alloc(44 + n * 2);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + n * 2, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(16000, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write('data', 36);
  b.writeUInt32LE(n * 2, 40);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(8000 * Math.sin(i / 4)), 44 + i * 2);
  return b;
}
const artifacts = path.join(path.dirname(path.dirname(serverBin)), 'artifacts');

async function launch() {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    defaultViewport: { width: 1100, height: 760 },
    timeout: STEP_MS,
    protocolTimeout: STEP_MS * 2,
    // As root (CI, this sandbox) chromium refuses to start without --no-sandbox.
    args: [...(process.getuid?.() === 0 ? ['--no-sandbox'] : []), '--disable-dev-shm-usage',
      '--no-first-run', '--disable-gpu'],
  });
}

// A page that records requests to other origins, CSP refusals and script errors.
async function openPage(context, server) {
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_MS);
  const problems = [];
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith(server.url) && !url.startsWith('data:') && !url.startsWith('blob:'))
      problems.push(`request to ${url}`);
  });
  page.on('console', (m) => {
    if (/Content.Security.Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(`${server.url}/`, { waitUntil: 'load' });
  return { page, problems };
}

const text = (page, sel) => page.$eval(sel, (e) => e.textContent);
const count = (page, sel) => page.$$eval(sel, (l) => l.length);

describe('chat page', { skip, timeout: 300000 }, () => {
  let server;
  let browser;
  let page;
  let problems;
  let firstAnswer;

  before(async () => {
    server = await startServer(['-m', synthModel('demo', DEMO), '--alias', 'demo',
      '-m', synthModel('long', LONG), '--ignore-eos', '--threads', '1']);
    browser = await launch();
    ({ page, problems } = await openPage(browser.defaultBrowserContext(), server));
  });
  after(async () => {
    if (page && !page.isClosed()) {
      mkdirSync(artifacts, { recursive: true });
      await page.screenshot({ path: path.join(artifacts, 'webui.png') }).catch(() => {});
    }
    await browser?.close();
    await server?.stop();
  });

  test('the page comes from the binary with a strict policy', { timeout: STEP_MS }, async () => {
    const res = await fetch(`${server.url}/`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/html/);
    const csp = res.headers.get('content-security-policy');
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /connect-src 'self'/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal((await fetch(`${server.url}/webui/app.js`)).status, 200);
    assert.equal((await fetch(`${server.url}/webui/missing.js`)).status, 404);
  });

  test('models are listed; the demo answers, streamed, with tokens per second', { timeout: STEP_MS * 2 }, async () => {
    await page.waitForFunction(() => document.querySelectorAll('#model option').length >= 2);
    const ids = await page.$$eval('#model option', (l) => l.map((o) => o.value));
    assert.deepEqual(ids.sort(), ['demo', 'long']);
    await page.select('#model', 'demo');
    await page.waitForFunction(() => document.querySelector('#model-info').textContent.includes('text only'));
    // The sampling settings are sent: a bounded answer (the server ignores end tokens).
    await page.click('#settings summary');
    await page.type('#set-max_tokens', '40');
    await page.type('#set-seed', '7');
    await page.type('#input', 'Hello, who are you?');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('.msg.assistant .stats')?.textContent.includes('tokens/s'));
    firstAnswer = await text(page, '.msg.assistant .content');
    assert.match(firstAnswer, READABLE);
    assert.ok(firstAnswer.trim().split(/\s+/).length >= 10, firstAnswer);
    assert.match(await text(page, '.msg.assistant .stats'), /^40 tokens · [\d.]+ tokens\/s · finish: length$/);
    assert.equal(await text(page, '.msg.user .body'), 'Hello, who are you?');
    assert.equal(await text(page, '#send'), 'Send');
  });

  test('a long answer streams in and the stop button ends it', { timeout: STEP_MS * 3 }, async () => {
    await page.click('#new-chat');
    await page.select('#model', 'long');
    // No token limit: the long model would write until its 4096-token context is full.
    await page.$eval('#set-max_tokens', (e) => {
      e.value = '';
      e.dispatchEvent(new Event('input'));
    });
    await page.type('#input', 'Tell me a very long story');
    await page.click('#send');
    // Text on the page while the answer is still running: it streams.
    await page.waitForFunction(() => {
      const c = document.querySelector('.msg.assistant .content');
      return c && c.textContent.trim().split(/\s+/).length >= 3 && document.querySelector('#send').textContent === 'Stop';
    });
    await page.click('#send');
    await page.waitForFunction(() => document.querySelector('#send').textContent === 'Send');
    const stopped = await text(page, '.msg.assistant .content');
    assert.match(await text(page, '.msg.assistant .stats'), /stopped/);
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await text(page, '.msg.assistant .content'), stopped, 'nothing more arrives');
    assert.match(stopped, READABLE);
    // The server let the request go: the long model is idle again.
    const deadline = Date.now() + 10000;
    for (;;) {
      const slots = await (await fetch(`${server.url}/slots?model=long`)).json();
      assert.ok(Array.isArray(slots) && slots.length >= 1, JSON.stringify(slots));
      if (slots.every((s) => !s.is_processing)) break;
      assert.ok(Date.now() < deadline, 'the stopped request still runs');
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  test('conversations survive a reload; rename and delete', { timeout: STEP_MS * 2 }, async () => {
    await page.reload({ waitUntil: 'load' });
    await page.waitForSelector('#conversations li');
    assert.equal(await count(page, '#conversations li'), 2);
    // The first conversation (listed last) holds the demo's answer as it was.
    await page.click('#conversations li:last-child .title');
    await page.waitForFunction(() => document.querySelector('.msg.user .body')?.textContent === 'Hello, who are you?');
    assert.equal(await text(page, '.msg.assistant .content'), firstAnswer);
    assert.equal(await page.$eval('#model', (e) => e.value), 'demo');
    assert.equal(await page.$eval('#set-seed', (e) => e.value), '7', 'settings are kept too');
    await page.click('#conversations li:last-child .rename');
    await page.keyboard.down('Control');
    await page.keyboard.press('a');
    await page.keyboard.up('Control');
    await page.keyboard.type('Greetings');
    await page.keyboard.press('Enter');
    assert.equal(await text(page, '#conversations li:last-child .title'), 'Greetings');
    await page.click('#conversations li:first-child .delete');
    assert.equal(await count(page, '#conversations li'), 2, 'the first click only arms the button');
    await page.click('#conversations li:first-child .delete');
    assert.equal(await count(page, '#conversations li'), 1);
    await page.reload({ waitUntil: 'load' });
    await page.waitForSelector('#conversations li');
    assert.deepEqual(await page.$$eval('#conversations li .title', (l) => l.map((e) => e.textContent)), ['Greetings']);
  });

  test('model text is never markup: stored HTML and scripts render as text', { timeout: STEP_MS }, async () => {
    await page.evaluate(() => {
      const convs = JSON.parse(localStorage.getItem('llamapi.conversations'));
      convs[0].messages.push({ role: 'assistant', model: 'demo', reasoning: 'thinking <b>hard</b>',
        content: '<img src=x onerror="window.pwned=1"> **bold** [bad](javascript:window.pwned=2) ' +
          '[good](https://example.org/)\n\n```html\n<script>window.pwned=3</script>\n```' });
      localStorage.setItem('llamapi.conversations', JSON.stringify(convs));
    });
    await page.reload({ waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant').length === 2);
    const r = await page.evaluate(() => {
      const c = document.querySelectorAll('.msg.assistant .content')[1];
      const details = document.querySelectorAll('.msg.assistant .reasoning')[1];
      return { pwned: window.pwned ?? null, imgs: c.querySelectorAll('img').length,
        scripts: document.querySelectorAll('script:not([src])').length, strong: c.querySelector('strong')?.textContent,
        links: [...c.querySelectorAll('a')].map((a) => a.getAttribute('href')), code: c.querySelector('pre code')?.textContent,
        text: c.textContent, reasoningOpen: details.open, reasoning: details.querySelector('div').textContent };
    });
    assert.equal(r.pwned, null);
    assert.equal(r.imgs, 0);
    assert.equal(r.scripts, 0);
    assert.equal(r.strong, 'bold');
    assert.deepEqual(r.links, ['https://example.org/']);
    assert.equal(r.code, '<script>window.pwned=3</script>');
    assert.ok(r.text.includes('<img src=x onerror="window.pwned=1">'), r.text);
    assert.equal(r.reasoningOpen, false, 'reasoning is collapsed');
    assert.equal(r.reasoning, 'thinking <b>hard</b>');
  });

  test('an image for a text-only model is refused on the page', { timeout: STEP_MS }, async () => {
    await page.select('#model', 'demo');
    const file = path.join(tmpDir, 'pixel.png');
    writeFileSync(file, PNG);
    const input = await page.$('#file');
    await input.uploadFile(file);
    await page.waitForFunction(() => !document.querySelector('#notice').hidden);
    assert.match(await text(page, '#notice'), /demo is text-only: it cannot read images/);
    assert.equal(await count(page, '#attachments .chip'), 0);
  });

  test('a model that takes images and audio: attachments go out as content parts', { timeout: STEP_MS * 2 }, async () => {
    // The demo is text-only; the page is told otherwise (its /v1/models entry and /props
    // answer are replaced), so it attaches, and the server's own refusal is what the answer
    // shows.
    const list = await (await fetch(`${server.url}/v1/models`)).json();
    for (const m of list.data) m.modalities = { vision: true, audio: true };
    const context = await browser.createBrowserContext();
    const p = await context.newPage();
    p.setDefaultTimeout(STEP_MS);
    await p.setRequestInterception(true);
    const sent = [];
    p.on('request', (r) => {
      if (r.url().endsWith('/v1/models')) {
        r.respond({ status: 200, contentType: 'application/json', body: JSON.stringify(list) });
        return;
      }
      if (r.url().includes('/props?model=')) {
        r.respond({ status: 200, contentType: 'application/json',
          body: JSON.stringify({ modalities: { vision: true, audio: true } }) });
        return;
      }
      if (r.url().endsWith('/v1/chat/completions')) sent.push(JSON.parse(r.postData()));
      r.continue();
    });
    await p.goto(`${server.url}/`, { waitUntil: 'load' });
    await p.waitForFunction(() => document.querySelector('#model-info').textContent.includes('accepts images and audio'));
    await p.select('#model', 'demo');
    const png = path.join(tmpDir, 'pixel.png');
    writeFileSync(png, PNG);
    const wav = path.join(tmpDir, 'tone.wav');
    writeFileSync(wav, wavFile());
    await (await p.$('#file')).uploadFile(png, wav);
    await p.waitForFunction(() => document.querySelectorAll('#attachments .chip').length === 2);
    await p.type('#input', 'What is in these?');
    await p.click('#send');
    await p.waitForFunction(() => document.querySelector('.msg.assistant .error')?.textContent);
    assert.match(await text(p, '.msg.assistant .error'), /does not accept (image|audio) input/);
    assert.equal(await count(p, '.msg.user .thumbs img'), 1);
    assert.equal(await count(p, '.msg.user .thumbs audio'), 1);
    assert.equal(await count(p, '#attachments .chip'), 0);
    assert.equal(sent.length, 1);
    const parts = sent[0].messages.at(-1).content;
    assert.deepEqual(parts.map((x) => x.type), ['text', 'image_url', 'input_audio']);
    assert.equal(parts[1].image_url.url, `data:image/png;base64,${PNG.toString('base64')}`);
    assert.deepEqual(parts[2].input_audio, { data: wavFile().toString('base64'), format: 'wav' });
    assert.equal(sent[0].stream, true);
    await context.close();
  });

  test('reasoning deltas go to a collapsed block; a mid-stream error is shown', { timeout: STEP_MS * 2 }, async () => {
    // Canned event streams in the server's framing (a reasoning model is not at hand here).
    const chunk = (delta, extra = {}) => `data: ${JSON.stringify({ object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`;
    const streams = [
      chunk({ role: 'assistant', content: null }) + chunk({ reasoning_content: 'Let me ' }) +
        chunk({ reasoning_content: 'think.' }) + chunk({ content: 'The **answer**' }) +
        chunk({ content: ' is 42.' }) +
        `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n` +
        `data: ${JSON.stringify({ choices: [], usage: { completion_tokens: 6 },
          timings: { predicted_n: 6, predicted_per_second: 12.5 } })}\n\ndata: [DONE]\n\n`,
      chunk({ content: 'Half an' }) +
        `event: error\ndata: ${JSON.stringify({ error: { message: 'the model file was truncated' } })}\n\n`,
    ];
    const context = await browser.createBrowserContext();
    const p = await context.newPage();
    p.setDefaultTimeout(STEP_MS);
    await p.setRequestInterception(true);
    p.on('request', (r) => {
      if (r.url().endsWith('/v1/chat/completions'))
        r.respond({ status: 200, contentType: 'text/event-stream', body: streams.shift() });
      else r.continue();
    });
    await p.goto(`${server.url}/`, { waitUntil: 'load' });
    await p.waitForFunction(() => document.querySelector('#model').value);
    await p.type('#input', 'What is the answer?');
    await p.click('#send');
    await p.waitForFunction(() => document.querySelector('.msg.assistant .stats')?.textContent.includes('tokens/s'));
    const r = await p.evaluate(() => {
      const d = document.querySelector('.msg.assistant .reasoning');
      return { hidden: d.hidden, open: d.open, reasoning: d.querySelector('div').textContent,
        content: document.querySelector('.msg.assistant .content').textContent,
        strong: document.querySelector('.msg.assistant .content strong')?.textContent,
        stats: document.querySelector('.msg.assistant .stats').textContent };
    });
    assert.deepEqual(r, { hidden: false, open: false, reasoning: 'Let me think.', content: 'The answer is 42.',
      strong: 'answer', stats: '6 tokens · 12.5 tokens/s' });
    await p.type('#input', 'And then?');
    await p.click('#send');
    await p.waitForFunction(() => document.querySelectorAll('.msg.assistant .error')[1]?.textContent);
    assert.equal(await p.$$eval('.msg.assistant .error', (l) => l[1].textContent), 'the model file was truncated');
    assert.equal(await p.$$eval('.msg.assistant .content', (l) => l[1].textContent), 'Half an');
    assert.equal(await p.$$eval('.msg.assistant .reasoning', (l) => l[1].hidden), true, 'no reasoning, no block');
    await context.close();
  });

  test('no request left this server, no policy was broken', () => {
    assert.deepEqual(problems, []);
  });
});

describe('chat page with --api-key', { skip, timeout: 120000 }, () => {
  let server;
  let browser;

  before(async () => {
    server = await startServer(['-m', synthModel('demo', DEMO), '--alias', 'demo', '--api-key', 'sesame']);
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('asks for the key once, says when it is wrong, keeps it', { timeout: STEP_MS * 2 }, async () => {
    const context = await browser.createBrowserContext(); // fresh storage
    const { page, problems } = await openPage(context, server);
    await page.waitForSelector('#key-dialog:not([hidden])');
    await page.type('#key-input', 'wrong');
    await page.click('#key-save');
    await page.waitForFunction(() => document.querySelector('#key-error').textContent.includes('refused'));
    await page.type('#key-input', 'sesame');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#key-dialog', { hidden: true });
    await page.waitForFunction(() => document.querySelector('#model').value === 'demo');
    await page.reload({ waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelector('#model').value === 'demo');
    assert.equal(await page.$eval('#key-dialog', (e) => e.hidden), true, 'not asked again');
    assert.deepEqual(problems, []);
    await context.close();
  });
});

describe('the Markdown renderer (no browser needed)', () => {
  test('text stays text; only safe links; code kept verbatim', async () => {
    const { parseMarkdown, parseInline, safeUrl } = await import('../../web/markdown.js');
    const strings = (nodes) => JSON.stringify(nodes);
    // Markup in model output is a string node, never a tag of its own.
    const p = parseMarkdown('<img src=x onerror=alert(1)> <script>alert(2)</script>');
    assert.deepEqual(p, [{ t: 'p', c: ['<img src=x onerror=alert(1)> <script>alert(2)</script>'] }]);
    for (const bad of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', 'data:text/html,<b>x</b>',
      'vbscript:x', ' javascript:alert(1)', 'file:///etc/passwd'])
      assert.equal(safeUrl(bad), null, bad);
    assert.equal(safeUrl('https://example.org/a?b=c'), 'https://example.org/a?b=c');
    assert.ok(!strings(parseInline('[x](javascript:alert(1))')).includes('"href"'));
    assert.deepEqual(parseInline('[x](https://a.example/)'), [{ t: 'a', href: 'https://a.example/', c: ['x'] }]);
    assert.deepEqual(parseMarkdown('```js\nif (a < b) { x(); }\n```'),
      [{ t: 'pre', lang: 'js', text: 'if (a < b) { x(); }' }]);
    // While streaming, an open fence is already a code block.
    assert.deepEqual(parseMarkdown('Look:\n```py\nprint(1)'),
      [{ t: 'p', c: ['Look:'] }, { t: 'pre', lang: 'py', text: 'print(1)' }]);
  });

  test('blocks and inline spans', async () => {
    const { parseMarkdown, parseInline } = await import('../../web/markdown.js');
    assert.deepEqual(parseMarkdown('# Title\n\n- a\n- b\n\n2. x\n3. y\n\n> q\n\n---'), [
      { t: 'h', level: 1, c: ['Title'] },
      { t: 'ul', start: 1, items: [['a'], ['b']] },
      { t: 'ol', start: 2, items: [['x'], ['y']] },
      { t: 'quote', c: [{ t: 'p', c: ['q'] }] },
      { t: 'hr' },
    ]);
    assert.deepEqual(parseInline('**b** *i* `c` ~~s~~ snake_case_name'), [
      { t: 'strong', c: ['b'] }, ' ', { t: 'em', c: ['i'] }, ' ', { t: 'code', text: 'c' }, ' ',
      { t: 'del', c: ['s'] }, ' snake_case_name',
    ]);
    assert.deepEqual(parseInline('line one\nline two'), ['line one', { t: 'br' }, 'line two']);
    assert.deepEqual(parseInline('\\*not em\\*'), ['*not em*']);
  });
});

describe('--no-webui', () => {
  test('/ is an unknown path again', { timeout: STEP_MS }, async () => {
    const server = await startServer(['--no-webui']);
    try {
      for (const p of ['/', '/webui/app.js']) {
        const res = await fetch(`${server.url}${p}`);
        assert.equal(res.status, 404);
        assert.equal((await res.json()).error.code, 'not_found');
      }
    } finally {
      await server.stop();
    }
  });
});
