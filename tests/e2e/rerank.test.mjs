// POST /rerank, /reranking, /v1/rerank and /v1/reranking against synthetic rerankers written
// by gguf-synth --cls-out: the answer's shape (Jina's, and TEI's with `texts`), ordering,
// top_n, return_text, usage, scores independent of the other documents, every 400 path, the
// model choice, --reranking and /v1/models/load {pooling: "rank"}; a qwen3 reranker (last
// token, cls.output, softmax); the reference implementation's scores.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, errorOf, hasShared, sharedDir, repoRoot } from './lib/server.mjs';
import { synthModel, SMALL } from './lib/models.mjs';

const BERT = ['--arch', 'bert', '--layers', '2', '--embd', '64', '--heads', '4', '--ffn', '128'];
const ROUTES = ['/rerank', '/reranking', '/v1/rerank', '/v1/reranking'];
const QUERY = 'hello world';
const DOCS = ['the world', 'hello world, hello!', 'a', 'world is the hello of a world', 'to and of the'];

async function post(url, route, body) {
  const res = await fetch(`${url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

// Scores in document order from a Jina-shaped answer.
function scoresOf(body, n) {
  const s = new Array(n).fill(null);
  for (const r of body.results) s[r.index] = r.relevance_score;
  return s;
}

describe('rerank', () => {
  let srv, rrPath;
  before(async () => {
    rrPath = synthModel('rr', [...BERT, '--ctx', '48', '--cls-out', '1', '--seed', '5']);
    const embedder = synthModel('rr-embedder', [...BERT, '--ctx', '48', '--seed', '6']);
    const chat = synthModel('rr-chat', SMALL);
    // The embedder first: a request without `model` must still find the reranker.
    srv = await startServer(['-m', embedder, '-m', rrPath, '-m', chat, '--threads', '2', '-np', '2']);
  });
  after(async () => {
    await srv?.stop();
  });

  test('a file with pooling_type rank is listed as an embedding model', async () => {
    const list = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.equal(list.data.find((x) => x.id === 'rr').model_kind, 'embedding');
  });

  test('the answer: every document once, highest score first, usage, the model', async () => {
    const r = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(Object.keys(r.body).sort(), ['model', 'object', 'results', 'usage']);
    assert.equal(r.body.model, 'rr');
    assert.equal(r.body.object, 'list');
    assert.equal(r.body.results.length, DOCS.length);
    assert.deepEqual(r.body.results.map((x) => x.index).sort(), [0, 1, 2, 3, 4]);
    for (const x of r.body.results) {
      assert.deepEqual(Object.keys(x).sort(), ['index', 'relevance_score']);
      assert.ok(Number.isFinite(x.relevance_score));
    }
    for (let i = 1; i < r.body.results.length; i++)
      assert.ok(r.body.results[i - 1].relevance_score >= r.body.results[i].relevance_score);
    // The scores are not all alike: the head sees the pair.
    assert.ok(new Set(r.body.results.map((x) => x.relevance_score)).size > 1);
    // usage counts every pair's tokens: the sum of the one-document requests.
    let sum = 0;
    for (const d of DOCS) {
      const one = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: [d] });
      assert.equal(one.status, 200);
      assert.equal(one.body.usage.prompt_tokens, one.body.usage.total_tokens);
      assert.ok(one.body.usage.prompt_tokens >= 2);
      sum += one.body.usage.prompt_tokens;
    }
    assert.equal(r.body.usage.prompt_tokens, sum);
    assert.equal(r.body.usage.total_tokens, sum);
  });

  test('a score does not depend on the other documents; all four routes agree', async () => {
    const all = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS });
    const batch = scoresOf(all.body, DOCS.length);
    for (let i = 0; i < DOCS.length; i++) {
      const one = await post(srv.url, '/rerank', { model: 'rr', query: QUERY, documents: [DOCS[i]] });
      assert.equal(one.body.results[0].relevance_score, batch[i], `document ${i}`);
    }
    for (const route of ROUTES) {
      const r = await post(srv.url, route, { model: 'rr', query: QUERY, documents: DOCS });
      assert.equal(r.status, 200, route);
      assert.deepEqual(r.body.results, all.body.results, route);
    }
    // Another query scores the same documents differently.
    const other = await post(srv.url, '/v1/rerank', { model: 'rr', query: 'the world is a world', documents: DOCS });
    assert.notDeepEqual(scoresOf(other.body, DOCS.length), batch);
  });

  test('without `model` the first reranker answers (not the embedding model before it)', async () => {
    const named = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS });
    const r = await post(srv.url, '/v1/rerank', { query: QUERY, documents: DOCS });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.model, 'rr');
    assert.deepEqual(r.body.results, named.body.results);
    const q = await post(srv.url, '/rerank?model=rr', { query: QUERY, documents: DOCS });
    assert.deepEqual(q.body.results, named.body.results);
  });

  test('top_n keeps the highest; more than the documents keeps all', async () => {
    const all = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS });
    const two = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS, top_n: 2 });
    assert.deepEqual(two.body.results, all.body.results.slice(0, 2));
    assert.equal(two.body.usage.prompt_tokens, all.body.usage.prompt_tokens); // every pair ran
    const one = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS, top_n: 1 });
    assert.deepEqual(one.body.results, all.body.results.slice(0, 1));
    const many = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS, top_n: 99 });
    assert.deepEqual(many.body.results, all.body.results);
  });

  test("`texts` answers in TEI's shape: a bare array of {index, score, text?}", async () => {
    const jina = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS });
    const tei = await post(srv.url, '/rerank', { model: 'rr', query: QUERY, texts: DOCS });
    assert.equal(tei.status, 200);
    assert.ok(Array.isArray(tei.body));
    assert.deepEqual(tei.body, jina.body.results.map((x) => ({ index: x.index, score: x.relevance_score })));
    const text = await post(srv.url, '/rerank', { model: 'rr', query: QUERY, texts: DOCS, return_text: true, top_n: 3 });
    assert.equal(text.body.length, 3);
    for (const x of text.body) {
      assert.deepEqual(Object.keys(x).sort(), ['index', 'score', 'text']);
      assert.equal(x.text, DOCS[x.index]);
    }
    // return_text belongs to TEI's shape only, as in the reference.
    const jt = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS, return_text: true });
    assert.deepEqual(jt.body.results, jina.body.results);
    // documents win over texts; the shape follows texts.
    const both = await post(srv.url, '/rerank', { model: 'rr', query: QUERY, documents: DOCS, texts: ['x'] });
    assert.equal(both.body.length, DOCS.length);
  });

  test('every invalid request is a 400 naming the field; the server keeps serving', async () => {
    const cases = [
      [{ documents: DOCS }, 'query', 'missing_required_parameter'],
      [{ query: 5, documents: DOCS }, 'query', 'invalid_type'],
      [{ query: null, documents: DOCS }, 'query'],
      [{ query: QUERY }, 'documents', 'missing_required_parameter'],
      [{ query: QUERY, documents: 'the cat' }, 'documents', 'invalid_type'],
      [{ query: QUERY, documents: [] }, 'documents', 'invalid_value'],
      [{ query: QUERY, documents: ['a', 3] }, 'documents', 'invalid_type'],
      [{ query: QUERY, texts: [] }, 'texts', 'invalid_value'],
      [{ query: QUERY, documents: DOCS, top_n: 0 }, 'top_n'],
      [{ query: QUERY, documents: DOCS, top_n: -1 }, 'top_n'],
      [{ query: QUERY, documents: DOCS, top_n: '3' }, 'top_n'],
      [{ query: QUERY, documents: DOCS, top_n: 1.5 }, 'top_n'],
      [{ query: QUERY, documents: DOCS, return_text: 'yes' }, 'return_text'],
      [{ query: QUERY, documents: DOCS, model: 7 }, 'model'],
    ];
    for (const [body, param, code] of cases) {
      const r = await post(srv.url, '/v1/rerank', { model: 'rr', ...body });
      assert.equal(r.status, 400, JSON.stringify(body));
      const e = errorOf(r.body);
      assert.equal(e.type, 'invalid_request_error');
      assert.equal(e.param, param, JSON.stringify(body));
      if (code) assert.equal(e.code, code, JSON.stringify(body));
    }
    const bad = await post(srv.url, '/v1/rerank', '{"query": ');
    assert.equal(bad.status, 400);
    const ok = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCS });
    assert.equal(ok.status, 200);
  });

  test('a pair over the context is refused naming the document', async () => {
    const long = Array(60).fill('hello').join(' ');
    const r = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: ['the cat', long] });
    assert.equal(r.status, 400);
    const e = errorOf(r.body);
    assert.equal(e.code, 'context_length_exceeded');
    assert.equal(e.param, 'documents');
    assert.match(e.message, /Document 1\b/);
    assert.match(e.message, /48/);
    const ok = await post(srv.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: ['the cat'] });
    assert.equal(ok.status, 200);
  });

  test('models that are not rerankers, and rerankers on the embedding endpoints', async () => {
    for (const model of ['rr-embedder', 'rr-chat']) {
      const r = await post(srv.url, '/v1/rerank', { model, query: QUERY, documents: DOCS });
      assert.equal(r.status, 400, model);
      assert.equal(errorOf(r.body).code, 'wrong_model_type');
      assert.equal(errorOf(r.body).param, 'model');
    }
    const missing = await post(srv.url, '/v1/rerank', { model: 'nope', query: QUERY, documents: DOCS });
    assert.equal(missing.status, 404);
    assert.equal(errorOf(missing.body).code, 'model_not_found');
    for (const [route, body] of [['/v1/embeddings', { model: 'rr', input: 'hello' }],
      ['/embedding', { model: 'rr', content: 'hello' }]]) {
      const r = await post(srv.url, route, body);
      assert.equal(r.status, 400, route);
      assert.equal(errorOf(r.body).code, 'wrong_model_type');
      assert.match(errorOf(r.body).message, /rerank/);
    }
    const emb = await post(srv.url, '/v1/embeddings', { model: 'rr-embedder', input: 'hello' });
    assert.equal(emb.status, 200);
  });

  test('concurrent requests on two instances give the same answers as one at a time', async () => {
    const queries = ['hello world', 'the world', 'a hello is', 'to and of'];
    const alone = [];
    for (const q of queries) alone.push((await post(srv.url, '/v1/rerank', { model: 'rr', query: q, documents: DOCS })).body);
    const together = await Promise.all(
      queries.map((q) => post(srv.url, '/v1/rerank', { model: 'rr', query: q, documents: DOCS })));
    for (let i = 0; i < queries.length; i++) assert.deepEqual(together[i].body, alone[i]);
  });
});

describe('--reranking and /v1/models/load {pooling: "rank"}', () => {
  let flagged, plain, headPath;
  before(async () => {
    // The head is in the file but pooling_type says mean: an embedding model unless asked.
    headPath = synthModel('rr-mean', [...BERT, '--ctx', '64', '--cls-out', '1', '--pooling', '1', '--seed', '8']);
    flagged = await startServer(['--reranking', '-m', headPath, '--threads', '2']);
    plain = await startServer(['-m', headPath, '--threads', '2']);
  });
  after(async () => {
    await flagged?.stop();
    await plain?.stop();
  });

  test('--reranking makes the file a reranker; without it, it embeds', async () => {
    const r = await post(flagged.url, '/v1/rerank', { query: QUERY, documents: DOCS });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.results.length, DOCS.length);
    const e = await post(plain.url, '/v1/rerank', { query: QUERY, documents: DOCS });
    assert.equal(e.status, 400);
    assert.equal(errorOf(e.body).code, 'wrong_model_type');
    const v = await post(plain.url, '/v1/embeddings', { model: 'rr-mean', input: 'hello' });
    assert.equal(v.status, 200);
    assert.equal(v.body.data[0].embedding.length, 64);
  });

  test('loading with pooling "rank" serves the same scores as --reranking', async () => {
    const load = await fetch(`${plain.url}/v1/models/load`, {
      method: 'POST',
      body: JSON.stringify({ model_id: 'rr-loaded', model_path: headPath, pooling: 'rank' }),
    });
    assert.equal(load.status, 200, await load.text());
    const viaLoad = await post(plain.url, '/v1/rerank', { model: 'rr-loaded', query: QUERY, documents: DOCS });
    const viaFlag = await post(flagged.url, '/v1/rerank', { query: QUERY, documents: DOCS });
    assert.deepEqual(viaLoad.body.results, viaFlag.body.results);
    const noHead = synthModel('rr-nohead', [...BERT, '--ctx', '64', '--seed', '9']);
    const bad = await fetch(`${plain.url}/v1/models/load`, {
      method: 'POST',
      body: JSON.stringify({ model_id: 'rr-nohead', model_path: noHead, pooling: 'rank' }),
    });
    assert.equal(bad.status, 500);
    assert.match(errorOf(await bad.json()).message, /classification head/);
    const after = await post(plain.url, '/v1/rerank', { model: 'rr-loaded', query: QUERY, documents: DOCS });
    assert.equal(after.status, 200);
  });
});

describe('a qwen3 reranker (last token, cls.output, softmax)', () => {
  let srv;
  const DEC = ['--layers', '2', '--embd', '64', '--heads', '4', '--heads-kv', '2', '--ffn', '128', '--ctx', '512'];
  before(async () => {
    const q3 = synthModel('rr-q3', ['--arch', 'qwen3', ...DEC, '--cls-out', '2', '--seed', '13']);
    srv = await startServer(['-m', q3, '--threads', '2']);
  });
  after(async () => {
    await srv?.stop();
  });

  test('scores are probabilities, sorted, and do not depend on the other documents', async () => {
    const docs = ['there was a little girl', 'the cat sat', 'and then they went home', ''];
    const r = await post(srv.url, '/v1/rerank', { query: 'Once upon a time', documents: docs });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.results.length, docs.length);
    for (let i = 0; i < docs.length; i++) {
      const x = r.body.results[i];
      assert.ok(x.relevance_score > 0 && x.relevance_score < 1);
      if (i > 0) assert.ok(r.body.results[i - 1].relevance_score >= x.relevance_score);
      const one = await post(srv.url, '/v1/rerank', { query: 'Once upon a time', documents: [docs[x.index]] });
      assert.ok(Math.abs(one.body.results[0].relevance_score - x.relevance_score) < 1e-6);
    }
  });

  test('--reranking on a decoder other than qwen3 is refused at start-up', async () => {
    const qwen2 = synthModel('rr-qwen2', ['--arch', 'qwen2', ...DEC, '--seed', '14']);
    await assert.rejects(startServer(['--reranking', '-m', qwen2]), /pooling rank/);
  });
});

// The reference's scores for each synthetic reranker (tests/data/rerank-reference.json: a
// bert on the bge vocabulary from ../shared, a qwen3 with a two-label head on the built-in
// vocabulary), each case sent as one request.
const golden = JSON.parse(readFileSync(path.join(repoRoot, 'tests/data/rerank-reference.json'), 'utf8'));
for (const model of golden.models) {
  const needsShared = model.gguf_synth_args.some((a) => a.startsWith('../shared/'));
  const skip = needsShared && !hasShared ? 'skip: ../shared absent' : false;
  describe(`the reference implementation's scores: ${model.name}`, { skip }, () => {
    let srv;
    before(async () => {
      const args = model.gguf_synth_args.map((a) => a.replace(/^\.\.\/shared\//, `${sharedDir}/`));
      srv = await startServer(['-m', synthModel(model.name, args), '--threads', '2']);
    });
    after(async () => {
      await srv?.stop();
    });

    test('every score within 1e-3 of the reference, the same order and token count', async () => {
      for (const c of model.cases) {
        const r = await post(srv.url, '/v1/rerank', { query: c.query, documents: c.documents });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.usage.prompt_tokens, c.prompt_tokens);
        const got = scoresOf(r.body, c.documents.length);
        for (let i = 0; i < got.length; i++) {
          const rel = Math.abs(got[i] - c.scores[i]) / Math.abs(c.scores[i]);
          assert.ok(rel <= 1e-3, `"${c.query}" document ${i}: ${got[i]} vs ${c.scores[i]} (${rel})`);
        }
        const order = c.scores.map((s, i) => [s, i]).sort((a, b) => b[0] - a[0]).map((x) => x[1]);
        assert.deepEqual(r.body.results.map((x) => x.index), order);
      }
    });
  });
}
