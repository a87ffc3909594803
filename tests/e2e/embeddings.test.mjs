// POST /v1/embeddings with the official OpenAI SDK against tiny_bert: single and batched
// inputs, base64 equals float, order, the reference vectors, token-id inputs, truncation,
// and the errors (empty input, wrong types, wrong model type both ways, context length).
// Decoders as embedding models (synthetic, no ../shared needed): a qwen3 declaring
// pooling_type last, and a plain qwen2 served with --embedding --pooling last. A synthetic
// bert with --pooling none: per-token vectors on /embedding, refused on /v1/embeddings.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, errorOf, hasShared, sharedDir } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';
import { repoRoot } from './lib/server.mjs';

const bertPath = path.join(sharedDir, 'models/bert/tiny_bert.gguf');
const storiesPath = path.join(sharedDir, 'models/llama/stories260K.gguf');
const expected = hasShared
  ? JSON.parse(readFileSync(path.join(sharedDir, 'models/bert/tiny_bert.expected.json'), 'utf8'))
  : null;

function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}

function decodeBase64(s) {
  const buf = Buffer.from(s, 'base64');
  const out = [];
  for (let i = 0; i < buf.length; i += 4) out.push(buf.readFloatLE(i));
  return out;
}

describe('embeddings', { skip: hasShared ? false : 'skip: ../shared absent' }, () => {
  let srv, client;
  before(async () => {
    srv = await startServer(['-m', bertPath, '-m', storiesPath]);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'none', maxRetries: 0 });
  });
  after(async () => {
    await srv?.stop();
  });

  async function post(body) {
    const res = await fetch(`${srv.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }

  test('the model is listed as an embedding model', async () => {
    const list = await (await fetch(`${srv.url}/v1/models`)).json();
    const m = list.data.find((x) => x.id === 'tiny_bert');
    assert.equal(m.model_kind, 'embedding');
    assert.equal(list.data.find((x) => x.id === 'stories260K').model_kind, 'chat');
  });

  test('a single string matches the reference vector', async () => {
    const c = expected.cases[0];
    const r = await client.embeddings.create({ model: 'tiny_bert', input: c.text, encoding_format: 'float' });
    assert.equal(r.object, 'list');
    assert.equal(r.model, 'tiny_bert');
    assert.equal(r.data.length, 1);
    assert.equal(r.data[0].object, 'embedding');
    assert.equal(r.data[0].index, 0);
    assert.equal(r.data[0].embedding.length, 32);
    assert.ok(cosine(r.data[0].embedding, c.embedding) >= 0.999);
    assert.equal(r.usage.prompt_tokens, c.token_ids.length);
    assert.equal(r.usage.total_tokens, c.token_ids.length);
    const norm = Math.sqrt(r.data[0].embedding.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5);
  });

  test('a batch keeps input order and matches every reference', async () => {
    const texts = expected.cases.map((c) => c.text).reverse();
    const r = await client.embeddings.create({ model: 'tiny_bert', input: texts, encoding_format: 'float' });
    assert.equal(r.data.length, texts.length);
    const n = texts.length;
    for (let i = 0; i < n; i++) {
      assert.equal(r.data[i].index, i);
      const c = expected.cases[n - 1 - i];
      assert.ok(cosine(r.data[i].embedding, c.embedding) >= 0.999, `input ${i}`);
    }
    const total = expected.cases.reduce((s, c) => s + c.token_ids.length, 0);
    assert.equal(r.usage.prompt_tokens, total);
  });

  test('base64 decodes to the float vectors', async () => {
    const input = [expected.cases[1].text, expected.cases[2].text];
    const f = await post({ model: 'tiny_bert', input, encoding_format: 'float' });
    const b = await post({ model: 'tiny_bert', input, encoding_format: 'base64' });
    assert.equal(f.status, 200);
    assert.equal(b.status, 200);
    for (let i = 0; i < 2; i++) {
      assert.equal(typeof b.body.data[i].embedding, 'string');
      const dec = decodeBase64(b.body.data[i].embedding);
      assert.deepEqual(dec, f.body.data[i].embedding.map((x) => Math.fround(x)));
    }
    // The SDK asks for base64 by default and decodes it itself.
    const sdk = await client.embeddings.create({ model: 'tiny_bert', input });
    for (let i = 0; i < 2; i++)
      assert.deepEqual(Array.from(sdk.data[i].embedding), decodeBase64(b.body.data[i].embedding));
  });

  test('token id inputs equal their text', async () => {
    const c = expected.cases[3];
    const r = await post({ model: 'tiny_bert', input: [c.token_ids, c.token_ids.slice(0, 3)], encoding_format: 'float' });
    assert.equal(r.status, 200);
    assert.ok(cosine(r.body.data[0].embedding, c.embedding) >= 0.999);
    assert.equal(r.body.usage.prompt_tokens, c.token_ids.length + 3);
    const one = await post({ model: 'tiny_bert', input: c.token_ids, encoding_format: 'float' });
    assert.deepEqual(one.body.data[0].embedding, r.body.data[0].embedding);
  });

  test('dimensions and user are accepted', async () => {
    const r = await post({ model: 'tiny_bert', input: 'the cat', dimensions: 8, user: 'u1' });
    assert.equal(r.status, 200);
    assert.equal(r.body.data[0].embedding.length, 32); // not truncated
  });

  test('an input beyond the context is refused unless truncate is set', async () => {
    const long = 'the cat sat '.repeat(30);
    const r = await post({ model: 'tiny_bert', input: ['the mat', long] });
    assert.equal(r.status, 400);
    const e = errorOf(r.body);
    assert.equal(e.code, 'context_length_exceeded');
    assert.match(e.message, /Input 1/);
    const t = await post({ model: 'tiny_bert', input: ['the mat', long], truncate: true });
    assert.equal(t.status, 200);
    assert.equal(t.body.data.length, 2);
    assert.equal(t.body.usage.prompt_tokens, 4 + 64);
  });

  test('bad requests are 400 with the OpenAI error shape', async () => {
    const cases = [
      [{ model: 'tiny_bert', input: [] }, 'invalid_value', 'input'],
      [{ model: 'tiny_bert', input: '' }, 'invalid_value', 'input'],
      [{ model: 'tiny_bert', input: 42 }, 'invalid_type', 'input'],
      [{ model: 'tiny_bert', input: ['a', {}] }, 'invalid_type', 'input[1]'],
      [{ model: 'tiny_bert', input: [[1, 1000]] }, 'invalid_value', 'input[0]'],
      [{ model: 'tiny_bert', input: 'x', encoding_format: 'int8' }, 'invalid_value', 'encoding_format'],
      [{ model: 'tiny_bert', input: 'x', dimensions: 0 }, undefined, 'dimensions'],
      [{ model: 'tiny_bert' }, 'missing_required_parameter', 'input'],
      [{ model: 'tiny_bert', input: Array(2049).fill('a') }, 'invalid_value', 'input'],
    ];
    for (const [body, code, param] of cases) {
      const r = await post(body);
      assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
      const e = errorOf(r.body);
      assert.equal(e.type, 'invalid_request_error');
      if (code) assert.equal(e.code, code);
      assert.equal(e.param, param);
    }
    const missing = await post({ model: 'nope', input: 'x' });
    assert.equal(missing.status, 404);
    assert.equal(errorOf(missing.body).code, 'model_not_found');
  });

  test('wrong model type both ways', async () => {
    await assert.rejects(client.embeddings.create({ model: 'stories260K', input: 'hello' }), (err) => {
      assert.equal(err.status, 400);
      assert.equal(err.code, 'wrong_model_type');
      return true;
    });
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny_bert', messages: [{ role: 'user', content: 'hi' }] }),
      (err) => {
        assert.equal(err.status, 400);
        assert.equal(err.code, 'wrong_model_type');
        return true;
      },
    );
  });

  test('/tokenize and /detokenize serve an embedding model too (its ids, as embedded)', async () => {
    const tok = await fetch(`${srv.url}/tokenize`, {
      method: 'POST', body: JSON.stringify({ model: 'tiny_bert', content: expected.cases[0].text, add_special: true }),
    });
    assert.equal(tok.status, 200);
    const { tokens } = await tok.json();
    assert.deepEqual(tokens, expected.cases[0].token_ids);
    const detok = await fetch(`${srv.url}/detokenize`, {
      method: 'POST', body: JSON.stringify({ model: 'tiny_bert', tokens: tokens.slice(1, -1) }),
    });
    assert.equal(detok.status, 200);
    assert.equal((await detok.json()).content.trim(), expected.cases[0].text);
  });

  test('concurrent calls all succeed with the same vectors', async () => {
    const text = expected.cases[4].text;
    const rs = await Promise.all(
      Array.from({ length: 6 }, () => post({ model: 'tiny_bert', input: [text, 'the cat'], encoding_format: 'float' })),
    );
    // One instance and a queue of 32: every call is admitted, run in turn or batched together.
    for (const r of rs) {
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.data[0].embedding, rs[0].body.data[0].embedding);
    }
  });
});

// 64 wide, 32-wide heads, a 1024-token context so one input can span two decode steps.
const DECODER = ['--layers', '2', '--embd', '64', '--heads', '2', '--heads-kv', '1', '--ffn', '128',
  '--ctx', '1024', '--type', 'f16'];

// F32/F16 products sum in another order for one token than for several (as the reference's
// do), so a decoder's vector depends on its batch in the last bits only.
function assertClose(a, b, msg) {
  assert.equal(a.length, b.length, msg);
  const worst = Math.max(...a.map((x, i) => Math.abs(x - b[i])));
  assert.ok(worst <= 1e-6, `${msg}: differs by ${worst}`);
}

function norm(v) {
  return Math.sqrt(v.reduce((s, x) => s + x * x, 0));
}

describe('decoder embedding models', () => {
  let srv, forced, client, forcedClient;
  before(async () => {
    const qwen3 = synthModel('qwen3-embed', ['--arch', 'qwen3', ...DECODER, '--seed', '9', '--pooling', '3']);
    const qwen2 = synthModel('qwen2-plain', ['--arch', 'qwen2', ...DECODER, '--seed', '4']);
    const chat = synthModel('small', SMALL);
    srv = await startServer(['-m', qwen3, '-m', chat, '--threads', '2']);
    forced = await startServer(['--embedding', '--pooling', 'last', '-m', qwen2, '--threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'none', maxRetries: 0 });
    forcedClient = new OpenAI({ baseURL: `${forced.url}/v1`, apiKey: 'none', maxRetries: 0 });
  });
  after(async () => {
    await srv?.stop();
    await forced?.stop();
  });

  test('a qwen3 declaring pooling_type last is an embedding model; --embedding makes a qwen2 one', async () => {
    const list = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.equal(list.data.find((x) => x.id === 'qwen3-embed').model_kind, 'embedding');
    assert.equal(list.data.find((x) => x.id === 'small').model_kind, 'chat');
    const f = await (await fetch(`${forced.url}/v1/models`)).json();
    assert.equal(f.data.find((x) => x.id === 'qwen2-plain').model_kind, 'embedding');
  });

  test('vectors are normalized, n_embd long, in input order, and agree with the input alone', async () => {
    const texts = ['the cat sat on the mat', 'hello', 'a quick brown fox jumps over the lazy dog', 'hello'];
    for (const [c, model] of [[client, 'qwen3-embed'], [forcedClient, 'qwen2-plain']]) {
      const r = await c.embeddings.create({ model, input: texts, encoding_format: 'float' });
      assert.equal(r.object, 'list');
      assert.equal(r.model, model);
      assert.equal(r.data.length, texts.length);
      for (let i = 0; i < texts.length; i++) {
        assert.equal(r.data[i].index, i);
        assert.equal(r.data[i].embedding.length, 64);
        assert.ok(Math.abs(norm(r.data[i].embedding) - 1) < 1e-5, `input ${i}`);
        const alone = await c.embeddings.create({ model, input: texts[i], encoding_format: 'float' });
        assertClose(alone.data[0].embedding, r.data[i].embedding, `input ${i} alone`);
      }
      assert.deepEqual(r.data[1].embedding, r.data[3].embedding);
      assert.notDeepEqual(r.data[0].embedding, r.data[1].embedding);
      assert.ok(r.usage.prompt_tokens > 0);
      assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
    }
  });

  test('an input longer than one decode step equals itself alone; base64 equals float', async () => {
    const long = 'the cat sat on the mat and '.repeat(60);
    const input = ['hello', long];
    const f = await client.embeddings.create({ model: 'qwen3-embed', input, encoding_format: 'float' });
    assert.ok(f.usage.prompt_tokens > 512 && f.usage.prompt_tokens <= 1024, `${f.usage.prompt_tokens} tokens`);
    const alone = await client.embeddings.create({ model: 'qwen3-embed', input: long, encoding_format: 'float' });
    assertClose(alone.data[0].embedding, f.data[1].embedding, 'the long input alone');
    const b = await client.embeddings.create({ model: 'qwen3-embed', input }); // the SDK asks for base64
    for (let i = 0; i < 2; i++)
      assert.deepEqual(Array.from(b.data[i].embedding), f.data[i].embedding.map((x) => Math.fround(x)));
  });

  test('chat on a decoder embedding model is 400 wrong_model_type', async () => {
    for (const [c, model] of [[client, 'qwen3-embed'], [forcedClient, 'qwen2-plain']]) {
      await assert.rejects(
        c.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }),
        (err) => {
          assert.equal(err.status, 400);
          assert.equal(err.code, 'wrong_model_type');
          return true;
        },
      );
    }
    await assert.rejects(client.embeddings.create({ model: 'small', input: 'hello' }), (err) => {
      assert.equal(err.status, 400);
      assert.equal(err.code, 'wrong_model_type');
      return true;
    });
  });

  test('an input beyond the context is context_length_exceeded', async () => {
    const r = await fetch(`${srv.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'qwen3-embed', input: ['hi', 'the cat sat '.repeat(400)] }),
    });
    assert.equal(r.status, 400);
    const e = errorOf(await r.json());
    assert.equal(e.code, 'context_length_exceeded');
    assert.match(e.message, /Input 1/);
  });

  test('/v1/models/load with embedding and pooling serves a decoder as an embedding model', async () => {
    const qwen2 = synthModel('qwen2-plain', ['--arch', 'qwen2', ...DECODER, '--seed', '4']);
    const load = (body) => fetch(`${srv.url}/v1/models/load`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model_path: qwen2, ...body }),
    });
    let r = await load({ model_id: 'q2-last', embedding: true, pooling: 'last' });
    assert.equal(r.status, 200, await r.text());
    r = await load({ model_id: 'q2-mean', embedding: true, pooling: 'mean' });
    assert.equal(r.status, 200, await r.text());
    const list = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.equal(list.data.find((x) => x.id === 'q2-last').model_kind, 'embedding');
    // The same weights as the --embedding --pooling last server: the same vectors.
    const text = 'the cat sat on the mat';
    const viaLoad = await client.embeddings.create({ model: 'q2-last', input: text, encoding_format: 'float' });
    const viaFlag = await forcedClient.embeddings.create({ model: 'qwen2-plain', input: text, encoding_format: 'float' });
    assert.deepEqual(viaLoad.data[0].embedding, viaFlag.data[0].embedding);
    const mean = await client.embeddings.create({ model: 'q2-mean', input: text, encoding_format: 'float' });
    assert.notDeepEqual(mean.data[0].embedding, viaLoad.data[0].embedding);
    for (const bad of [{ pooling: 'sideways' }, { pooling: 7 }, { embedding: 'yes' }]) {
      const e = await load({ model_id: 'q2-bad', embedding: true, ...bad });
      assert.equal(e.status, 400);
      assert.equal(errorOf(await e.json()).param, Object.keys(bad)[0]);
    }
    // None (per-token vectors) and rank (a reranker's head) are valid poolings, but not ones
    // a qwen2 decoder is served with.
    for (const pooling of ['none', 'rank']) {
      const r = await load({ model_id: `q2-${pooling}`, embedding: true, pooling });
      assert.equal(r.status, 500);
      assert.match(errorOf(await r.json()).message, new RegExp(`pooling ${pooling}`));
    }
    for (const id of ['q2-last', 'q2-mean'])
      await fetch(`${srv.url}/v1/models/unload`, { method: 'POST', body: JSON.stringify({ model_id: id }) });
  });

  test("llama.cpp's /embedding and /embeddings: content, the native shape, embd_normalize", async () => {
    const post = async (route, body) => {
      const r = await fetch(`${srv.url}${route}`, { method: 'POST', body: JSON.stringify(body) });
      return { status: r.status, json: await r.json() };
    };
    const oai = await client.embeddings.create({ model: 'qwen3-embed', input: 'hello', encoding_format: 'float' });
    // No model named: the first embedding model (the chat model loaded beside it is skipped).
    const one = await post('/embedding', { content: 'hello' });
    assert.equal(one.status, 200, JSON.stringify(one.json));
    assert.equal(one.json.length, 1);
    assert.equal(one.json[0].index, 0);
    assert.equal(one.json[0].embedding.length, 1, 'one pooled row');
    assertClose(one.json[0].embedding[0], oai.data[0].embedding, 'the same vector as /v1/embeddings');
    const two = await post('/embeddings', { model: 'qwen3-embed', input: ['hello', 'the cat'] });
    assert.deepEqual(two.json.map((e) => e.index), [0, 1]);
    const viaV1 = await post('/v1/embeddings', { model: 'qwen3-embed', content: 'hello' });
    assert.ok(Array.isArray(viaV1.json), '`content` on /v1/embeddings answers in the native shape');
    const v = oai.data[0].embedding;
    const sum = (xs) => xs.reduce((a, b) => a + b, 0);
    const taxi = (await post('/embedding', { content: 'hello', embd_normalize: 1 })).json[0].embedding[0];
    assert.ok(Math.abs(sum(taxi.map(Math.abs)) - 1) < 1e-5);
    const maxAbs = (await post('/embedding', { content: 'hello', embd_normalize: 0 })).json[0].embedding[0];
    assert.ok(Math.abs(Math.max(...maxAbs.map(Math.abs)) - 32760) < 0.05);
    const p3 = (await post('/embedding', { content: 'hello', embd_normalize: 3 })).json[0].embedding[0];
    assert.ok(Math.abs(Math.cbrt(sum(p3.map((x) => Math.abs(x) ** 3))) - 1) < 1e-5);
    for (const [a, b] of [[taxi, v], [maxAbs, v], [p3, v]]) assert.ok(cosine(a, b) > 0.99999, 'a rescaling');
    let e = await post('/embedding', { content: 'hello', embd_normalize: -1 });
    assert.equal(e.status, 400);
    assert.equal(errorOf(e.json).param, 'embd_normalize');
    e = await post('/embedding', {});
    assert.equal(e.status, 400);
    e = await post('/embedding', { model: 'small', content: 'hello' });
    assert.equal(errorOf(e.json).code, 'wrong_model_type');
  });

  test('--pooling none is refused for a decoder at start-up', async () => {
    const qwen2 = synthModel('qwen2-plain', ['--arch', 'qwen2', ...DECODER, '--seed', '4']);
    await assert.rejects(startServer(['--embedding', '--pooling', 'none', '-m', qwen2]), /pooling none/);
  });
});

describe('a real llama served with --embedding', { skip: hasShared ? false : 'skip: ../shared absent' }, () => {
  const golden = JSON.parse(readFileSync(path.join(repoRoot, 'tests/data/stories260K-embeddings.json'), 'utf8'));
  for (const pooling of ['last', 'mean']) {
    test(`--pooling ${pooling} agrees with the reference's vectors`, async () => {
      const srv = await startServer(['--embedding', '--pooling', pooling, '-m', storiesPath, '--threads', '2']);
      try {
        const cases = golden.cases.filter((c) => c.pooling === pooling);
        const c = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'none', maxRetries: 0 });
        const r = await c.embeddings.create({ model: 'stories260K', input: cases.map((x) => x.text), encoding_format: 'float' });
        for (let i = 0; i < cases.length; i++) {
          assert.equal(r.data[i].embedding.length, cases[i].embedding.length);
          const cos = cosine(r.data[i].embedding, cases[i].embedding);
          assert.ok(cos >= 0.999, `${pooling} input ${i}: cosine ${cos}`);
        }
      } finally {
        await srv.stop();
      }
    });
  }
});

describe('--pooling none: a vector per token on /embedding', () => {
  let none, mean, cls;
  const BERT = ['--arch', 'bert', '--layers', '2', '--embd', '64', '--heads', '4', '--ffn', '128', '--ctx', '64', '--seed', '15'];
  before(async () => {
    const bert = synthModel('bert-none', BERT);
    none = await startServer(['--pooling', 'none', '-m', bert, '--threads', '2']);
    mean = await startServer(['--pooling', 'mean', '-m', bert, '--threads', '2']);
    cls = await startServer(['--pooling', 'cls', '-m', bert, '--threads', '2']);
  });
  after(async () => {
    await none?.stop();
    await mean?.stop();
    await cls?.stop();
  });
  const post = async (srv, route, body) => {
    const r = await fetch(`${srv.url}${route}`, { method: 'POST', body: JSON.stringify(body) });
    return { status: r.status, json: await r.json() };
  };
  const unit = (v) => {
    const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    return v.map((x) => x / n);
  };

  test('an embedding-only server serves /tokenize, /detokenize, /props and /slots, as llama-server does', async () => {
    // /props and /slots answered 400 wrong_model_type: their lookup asked for a chat model.
    const t = await post(mean, '/tokenize', { content: 'hello world', add_special: true });
    assert.equal(t.status, 200, JSON.stringify(t.json));
    assert.equal(t.json.tokens.length, 4); // [CLS] hello world [SEP]
    const d = await post(mean, '/detokenize', { tokens: t.json.tokens.slice(1, -1) });
    assert.equal(d.status, 200, JSON.stringify(d.json));
    assert.match(d.json.content, /hello world/);
    const props = await fetch(`${mean.url}/props`);
    assert.equal(props.status, 200);
    assert.equal((await props.json()).total_slots, 1);
    const slots = await fetch(`${mean.url}/slots`);
    assert.equal(slots.status, 200);
    assert.equal((await slots.json()).length, 1);
    // Generation stays refused.
    const c = await post(mean, '/completion', { prompt: 'hello', n_predict: 1 });
    assert.equal(c.status, 400);
    assert.equal(c.json.error.code, 'wrong_model_type');
  });

  test('each input has a row per token, unnormalized; their mean is the mean-pooled vector', async () => {
    const texts = ['hello world', 'the world is a world', 'a'];
    const r = await post(none, '/embedding', { content: texts });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.length, 3);
    const m = await post(mean, '/embedding', { content: texts });
    const c = await post(cls, '/embedding', { content: texts });
    for (let i = 0; i < 3; i++) {
      const rows = r.json[i].embedding;
      assert.equal(r.json[i].index, i);
      assert.equal(rows.length, texts[i].split(' ').length + 2); // [CLS] words [SEP]
      for (const row of rows) assert.equal(row.length, 64);
      const norm = Math.sqrt(rows[0].reduce((s, x) => s + x * x, 0));
      assert.ok(Math.abs(norm - 1) > 1e-3, 'not normalized');
      const avg = rows[0].map((_, k) => rows.reduce((s, row) => s + row[k], 0) / rows.length);
      const want = m.json[i].embedding[0];
      unit(avg).forEach((x, k) => assert.ok(Math.abs(x - want[k]) < 1e-5, `mean ${i}[${k}]`));
      unit(rows[0]).forEach((x, k) => assert.ok(Math.abs(x - c.json[i].embedding[0][k]) < 1e-5));
    }
    // embd_normalize does not apply to token vectors (-1 included), as in the reference.
    const e = await post(none, '/embedding', { content: 'hello world', embd_normalize: -1 });
    assert.equal(e.status, 200);
    assert.deepEqual(e.json[0].embedding, r.json[0].embedding);
  });

  test('per-token answers are bounded: at most 16384 tokens per request', async () => {
    // 300 inputs of ~62 tokens each (the context is 64): ~18,600 tokens of vectors
    const long = Array(60).fill('w').join(' ');
    const r = await post(none, '/embedding', { content: Array(300).fill(long) });
    assert.equal(r.status, 400);
    assert.equal(errorOf(r.json).code, 'invalid_value');
    assert.match(errorOf(r.json).message, /at most 16384/);
    const ok = await post(none, '/embedding', { content: Array(200).fill(long) });
    assert.equal(ok.status, 200);
    assert.equal(ok.json.length, 200);
  });

  test('/v1/embeddings refuses a per-token model', async () => {
    const r = await post(none, '/v1/embeddings', { model: 'bert-none', input: 'hello' });
    assert.equal(r.status, 400);
    assert.equal(errorOf(r.json).code, 'wrong_model_type');
    assert.match(errorOf(r.json).message, /pooling 'none'/);
    const ok = await post(none, '/embedding', { content: 'a' });
    assert.equal(ok.status, 200);
  });
});
