// Every newer model family (gemma2, gemma3, phi3, granite, smollm3, olmo2, qwen3moe, olmoe,
// granitemoe, gpt-oss, the hybrids lfm2, lfm2moe, qwen35, qwen35moe, mamba2, granitehybrid,
// nemotron_h, nemotron_h_moe, falcon-h1) loads from a synthetic gguf-synth model with its
// features on and chats through /v1/chat/completions, streamed and not; a prompt cache longer
// than a sliding window is reused without changing the answer; the hybrids resume a continued
// conversation and a retry from state checkpoints, survive a context shift and serve 4 streams
// on 2 instances; lfm2 and gpt-oss answer forced tool calls as tool_calls in their own formats.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { startServer, sharedDir } from './lib/server.mjs';
import { synthModel } from './lib/models.mjs';

const NO_EOS = { 2: -100 };
const FAMILIES = ['gemma2', 'gemma3', 'phi3', 'granite', 'smollm3', 'olmo2', 'qwen3moe', 'olmoe',
  'granitemoe', 'gpt-oss', 'lfm2',
  'qwen35', 'qwen35moe', 'mamba2', 'granitehybrid', 'nemotron_h', 'lfm2moe', 'falcon-h1',
  'nemotron_h_moe'];

function familyArgs(arch) {
  const kv = arch === 'olmo2' || arch === 'olmoe' ? '4' : '2';
  return ['--arch', arch, '--layers', '4', '--embd', '64', '--heads', '4', '--heads-kv', kv,
    '--ffn', '128', '--ctx', '1024', '--type', 'f16', '--seed', '5'];
}

async function chat(srv, body) {
  const r = await fetch(`${srv.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, body: r.headers.get('content-type')?.includes('json') ? await r.json() : await r.text() };
}

describe('model families', () => {
  let srv;
  const paths = {};
  before(async () => {
    srv = await startServer(['--threads', '1']);
    for (const arch of FAMILIES) {
      paths[arch] = synthModel(`fam-${arch}`, familyArgs(arch));
      const r = await fetch(`${srv.url}/v1/models/load`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model_id: arch, model_path: paths[arch] }),
      });
      assert.equal(r.status, 200, `${arch}: ${await r.text()}`);
    }
  });
  after(async () => {
    await srv.stop();
  });

  for (const arch of FAMILIES) {
    test(`${arch} loads and chats, streamed and not`, async () => {
      const body = { model: arch, messages: [{ role: 'user', content: 'Hello there, how are you?' }],
        max_tokens: 10, temperature: 0, logit_bias: NO_EOS };
      const r = await chat(srv, body);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.choices[0].finish_reason, 'length');
      assert.equal(r.body.usage.completion_tokens, 10);
      const text = r.body.choices[0].message.content;
      assert.equal(typeof text, 'string');
      const s = await chat(srv, { ...body, stream: true });
      assert.equal(s.status, 200);
      let streamed = '';
      for (const line of s.body.split('\n')) {
        if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
        const ev = JSON.parse(line.slice(6));
        streamed += ev.choices?.[0]?.delta?.content ?? '';
      }
      assert.equal(streamed, text, 'greedy stream equals the whole answer');
      const m = await (await fetch(`${srv.url}/v1/models/${arch}`)).json();
      assert.equal(m.status, 'ready');
      assert.equal(m.meta.n_embd, 64);
    });
  }
});

describe('new block types', () => {
  for (const [arch, type] of [['gpt-oss', 'mxfp4'], ['llama', 'iq4_nl'], ['qwen3moe', 'iq4_xs']]) {
    test(`${arch} with ${type} weights chats`, async () => {
      const model = synthModel(`fam-${arch}-${type}`, ['--arch', arch, '--layers', '2', '--embd', '256',
        '--heads', '4', '--heads-kv', '2', '--ffn', '512', '--ctx', '512', '--type', type, '--seed', '3']);
      const srv = await startServer(['--threads', '1', '-m', model, '--alias', 'q']);
      try {
        const r = await chat(srv, { model: 'q', messages: [{ role: 'user', content: 'Hello there' }],
          max_tokens: 8, temperature: 0, logit_bias: NO_EOS });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.usage.completion_tokens, 8);
      } finally {
        await srv.stop();
      }
    });
  }
});

describe('sliding window and the prompt cache', () => {
  // gemma3 with a window of 4: its sliding layers keep rings of 4 + 512 positions.
  const model = () => synthModel('fam-gemma3-swa', [...familyArgs('gemma3'), '--swa', '4']);
  const long = 'Hello world and the you was it is of to and the world hello '.repeat(20);
  const first = [{ role: 'user', content: long }];
  const follow = [...first, { role: 'assistant', content: 'the world' }, { role: 'user', content: 'and you?' }];
  // shares only the start of the long prompt: its window left the rings long ago
  const diverge = [{ role: 'user', content: `${long.slice(0, 120)} and then something else entirely` }];
  const body = (messages) => ({ model: 'g', messages, max_tokens: 12, temperature: 0, logit_bias: NO_EOS });

  test('cached prefixes longer than the rings are reused or dropped, never misused', async () => {
    const warm = await startServer(['--threads', '1', '-m', model(), '--alias', 'g', '-np', '1']);
    let a, b, c;
    try {
      a = await chat(warm, body(first));
      b = await chat(warm, body(follow));
      c = await chat(warm, body(diverge));
    } finally {
      await warm.stop();
    }
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.ok(a.body.usage.prompt_tokens > 600, `a prompt longer than the rings (${a.body.usage.prompt_tokens})`);
    assert.ok(b.body.usage.prompt_tokens_details.cached_tokens > 600,
      'the follow-up reuses the whole cached conversation');
    assert.equal(c.body.usage.prompt_tokens_details.cached_tokens ?? 0, 0,
      'a shared start whose window the rings dropped is recomputed');
    const cold = await startServer(['--threads', '1', '-m', model(), '--alias', 'g', '-np', '1']);
    try {
      for (const [warmAnswer, messages] of [[b, follow], [c, diverge]]) {
        const fresh = await chat(cold, body(messages));
        assert.equal(fresh.status, 200);
        assert.equal(warmAnswer.body.choices[0].message.content, fresh.body.choices[0].message.content);
        // each cold request starts from the other's cache at most partially; drop it
        await chat(cold, body([{ role: 'user', content: 'x' }]));
      }
    } finally {
      await cold.stop();
    }
  });
});

for (const arch of ['lfm2', 'qwen35', 'granitehybrid', 'falcon-h1']) describe(`${arch}: recurrent state and the prompt cache`, () => {
  // A recurrent state cannot be cut back, so reuse goes through state checkpoints taken at the
  // end of each prompt, a few tokens before it, at chunk boundaries and after a reply.
  const model = () => synthModel(`fam-${arch}`, familyArgs(arch));
  const long = 'Hello world and the you was it is of to and the world hello '.repeat(4);
  const first = [{ role: 'user', content: long }];
  const follow = [...first, { role: 'assistant', content: 'the world' }, { role: 'user', content: 'and you?' }];
  const body = (messages, extra = {}) => ({ model: 'h', messages, max_tokens: 12, temperature: 0,
    logit_bias: NO_EOS, ...extra });

  test('a continued conversation and a retry resume from checkpoints, with the cold answers', { timeout: 120000 }, async () => {
    const warm = await startServer(['--threads', '1', '-m', model(), '--alias', 'h', '-np', '1']);
    let a, b, c;
    try {
      a = await chat(warm, body(first));
      b = await chat(warm, body(follow));
      c = await chat(warm, body(follow)); // a retry of the same prompt
    } finally {
      await warm.stop();
    }
    for (const r of [a, b, c]) assert.equal(r.status, 200, JSON.stringify(r.body));
    const n = a.body.usage.prompt_tokens;
    assert.ok(b.body.usage.prompt_tokens_details.cached_tokens >= n,
      `the follow-up resumes after the first prompt (${JSON.stringify(b.body.usage)})`);
    const m = b.body.usage.prompt_tokens;
    assert.ok(c.body.usage.prompt_tokens_details.cached_tokens >= m - 4,
      `the retry resumes a few tokens before the end (${JSON.stringify(c.body.usage)})`);
    assert.equal(c.body.choices[0].message.content, b.body.choices[0].message.content);
    const cold = await startServer(['--threads', '1', '-m', model(), '--alias', 'h', '-np', '1']);
    try {
      const fresh = await chat(cold, body(follow));
      assert.equal(fresh.status, 200);
      assert.equal(fresh.body.usage.prompt_tokens_details?.cached_tokens ?? 0, 0);
      assert.equal(b.body.choices[0].message.content, fresh.body.choices[0].message.content);
    } finally {
      await cold.stop();
    }
  });

  test('a context shift recomputes the kept tokens and generation goes on', { timeout: 120000 }, async () => {
    const srv = await startServer(['--threads', '1', '-m', model(), '-c', '64', '--context-shift']);
    try {
      const body = { prompt: Array.from({ length: 40 }, (_, i) => 100 + i), n_predict: 70,
        temperature: 0, logit_bias: [[2, -100]] };
      const post = async () => {
        const r = await fetch(`${srv.url}/completion`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
        });
        assert.equal(r.status, 200);
        return r.json();
      };
      const a = await post();
      assert.equal(a.timings.predicted_n, 70);
      assert.equal(a.truncated, true);
      const again = await post(); // the instance is sound afterwards
      assert.equal(again.content, a.content);
    } finally {
      await srv.stop();
    }
  });

  test('-np 2 with 4 concurrent streams gives each request its own answer', { timeout: 120000 }, async () => {
    const srv = await startServer(['--threads', '1', '-m', model(), '--alias', 'h', '-np', '2']);
    try {
      const prompts = ['Hello there', 'the world was', 'and you of it', 'Hello world and the'];
      const alone = [];
      for (const p of prompts) alone.push(await chat(srv, body([{ role: 'user', content: p }])));
      const together = await Promise.all(prompts.map((p) =>
        chat(srv, body([{ role: 'user', content: `${p}` }], { stream: true }))));
      for (let i = 0; i < prompts.length; i++) {
        assert.equal(alone[i].status, 200);
        assert.equal(together[i].status, 200);
        let text = '';
        for (const line of together[i].body.split('\n')) {
          if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
          text += JSON.parse(line.slice(6)).choices?.[0]?.delta?.content ?? '';
        }
        assert.equal(text, alone[i].body.choices[0].message.content, `stream ${i}`);
      }
    } finally {
      await srv.stop();
    }
  });
});

describe('lfm2 tool calls', () => {
  // The real LFM2.5 template, so the server reads calls in LFM2's markers.
  const template = path.join(sharedDir, 'templates', 'LFM2.5-8B-A1B.jinja');
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } },
      required: ['city'], additionalProperties: false } } }];
  test('a required call comes back as tool_calls, whole and streamed', { timeout: 120000 }, async (t) => {
    if (!existsSync(template)) return t.skip(`${template} not found`);
    const srv = await startServer(['--threads', '1', '-m', synthModel('fam-lfm2', familyArgs('lfm2')),
      '--alias', 'lfm', '--chat-template-file', template]);
    try {
      const body = { model: 'lfm', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools,
        tool_choice: 'required', max_tokens: 300, temperature: 0 };
      const r = await chat(srv, body);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const msg = r.body.choices[0].message;
      assert.equal(r.body.choices[0].finish_reason, 'tool_calls', JSON.stringify(msg));
      assert.equal(msg.tool_calls.length, 1);
      assert.equal(msg.tool_calls[0].function.name, 'get_weather');
      assert.equal(typeof JSON.parse(msg.tool_calls[0].function.arguments).city, 'string');
      assert.ok(!(msg.content ?? '').includes('<|tool_call'), `no markers in content: ${msg.content}`);
      const s = await chat(srv, { ...body, stream: true });
      assert.equal(s.status, 200);
      let name = null;
      let args = '';
      for (const line of s.body.split('\n')) {
        if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
        for (const tc of JSON.parse(line.slice(6)).choices?.[0]?.delta?.tool_calls ?? []) {
          name = tc.function?.name ?? name;
          args += tc.function?.arguments ?? '';
        }
      }
      assert.equal(name, 'get_weather');
      assert.equal(args, msg.tool_calls[0].function.arguments);
    } finally {
      await srv.stop();
    }
  });
});

describe('gpt-oss harmony tool calls', () => {
  // The real gpt-oss template, so the server detects the harmony formats from it.
  const template = path.join(sharedDir, 'templates', 'openai-gpt-oss-120b.jinja');
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } },
      required: ['city'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'The time now',
    parameters: { type: 'object', properties: {}, additionalProperties: false } } }];
  let srv;
  before(async () => {
    if (!existsSync(template)) return;
    const model = synthModel('fam-gpt-oss', familyArgs('gpt-oss'));
    srv = await startServer(['--threads', '1', '-m', model, '--alias', 'oss', '--chat-template-file', template]);
  });
  after(async () => {
    await srv?.stop();
  });

  test('without tools the harmony messages still parse and nothing becomes a call', async (t) => {
    if (!srv) return t.skip(`${template} not found`);
    const r = await chat(srv, { model: 'oss', messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 12, temperature: 0, logit_bias: NO_EOS });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.choices[0].finish_reason, 'length');
    assert.deepEqual(r.body.choices[0].message.tool_calls ?? [], []);
  });

  for (const choice of [{ type: 'function', function: { name: 'get_weather' } }, 'required']) {
    test(`tool_choice ${JSON.stringify(choice)} gives tool_calls, whole and streamed`, async (t) => {
      if (!srv) return t.skip(`${template} not found`);
      const body = { model: 'oss', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools,
        tool_choice: choice, max_tokens: 400, temperature: 0 };
      const r = await chat(srv, body);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const msg = r.body.choices[0].message;
      assert.equal(r.body.choices[0].finish_reason, 'tool_calls', JSON.stringify(msg));
      assert.equal(msg.tool_calls.length, 1);
      const call = msg.tool_calls[0];
      if (typeof choice === 'object') assert.equal(call.function.name, 'get_weather');
      else assert.ok(['get_weather', 'get_time'].includes(call.function.name));
      assert.equal(typeof JSON.parse(call.function.arguments), 'object');
      assert.ok(!(msg.content ?? '').includes('<|'), `no harmony markup in content: ${msg.content}`);
      const s = await chat(srv, { ...body, stream: true });
      assert.equal(s.status, 200);
      const calls = [];
      let finish = null;
      for (const line of s.body.split('\n')) {
        if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
        const ev = JSON.parse(line.slice(6));
        for (const tc of ev.choices?.[0]?.delta?.tool_calls ?? []) {
          if (tc.function?.name) calls[tc.index] = { name: tc.function.name, arguments: '' };
          calls[tc.index].arguments += tc.function?.arguments ?? '';
        }
        finish = ev.choices?.[0]?.finish_reason ?? finish;
      }
      assert.equal(finish, 'tool_calls');
      assert.deepEqual(calls, [{ name: call.function.name, arguments: call.function.arguments }]);
    });
  }
});
