// Fixtures for the rknn2 / rknn3 e2e tests: the fake runtimes built beside the server
// (build/<kind>/fakes/lib<name>_fake.so), a fake board under a --sysfs-root directory, and
// model directories the fakes accept.
import { mkdirSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { addNpuNode, fakesDir, tmpDir } from './rockchip.mjs';

export { fakesDir, tmpDir };
export const rknn2Fake = path.join(fakesDir, 'librknn2_fake.so');
export const rknn3Fake = path.join(fakesDir, 'librknn3_fake.so');

// A board: device-tree compatible naming the SoC, the NPU driver version (in debugfs) and the
// NPU's device node (npu as in rockchip.mjs's makeBoard).
export function fakeBoard({ soc = 'rk3588', driver = '0.9.8', npu = 'drm' } = {}) {
  const root = tmpDir('llamapi-board-');
  addNpuNode(root, npu);
  mkdirSync(path.join(root, 'proc/device-tree'), { recursive: true });
  writeFileSync(path.join(root, 'proc/device-tree/compatible'),
    `rockchip,${soc}-evb\0rockchip,${soc}\0`);
  mkdirSync(path.join(root, 'sys/kernel/debug/rknpu'), { recursive: true });
  writeFileSync(path.join(root, 'sys/kernel/debug/rknpu/version'), `RKNPU driver: v${driver}\n`);
  return root;
}

// An XLM-R-shaped Unigram tokenizer.json: <s> 0, <pad> 1, </s> 2, <unk> 3, then pieces.
export const XLMR_VOCAB = ['<s>', '<pad>', '</s>', '<unk>', '\u2581', '\u2581hello', '\u2581world',
  'hel', 'lo', 'a', '\u2581a', '\u2581boom', '\u2581the', '\u2581cat', '\u2581sat', '\u2581on', '\u2581mat'];
export const XLMR_IDS = Object.fromEntries(XLMR_VOCAB.map((t, i) => [t, i]));

export function xlmrTokenizer() {
  const scores = XLMR_VOCAB.map((t, i) => (i < 4 ? 0 : -(i % 7) - 2));
  return {
    version: '1.0',
    added_tokens: ['<s>', '<pad>', '</s>', '<unk>'].map((content, id) =>
      ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKC' },
      { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] },
    pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true },
    post_processor: { type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [],
      special_tokens: { '<s>': { id: '<s>', ids: [0], tokens: ['<s>'] },
        '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } } },
    decoder: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true },
    model: { type: 'Unigram', unk_id: 3, byte_fallback: false,
      vocab: XLMR_VOCAB.map((t, i) => [t, scores[i]]) },
  };
}

// A model directory for the rknn2 fake. opts: seqLen, hidden, inputs (types), output
// ('tokens'|'pooled'), cores, failInit, errorToken, runMs, manifest (model.json object or
// null), tokenizerJson (false: leave it out), name of the .rknn file.
export function rknn2Model(opts = {}) {
  const dir = tmpDir('llamapi-rknn2-');
  const o = { seqLen: 16, hidden: 8, inputs: ['int64', 'int64'], output: 'tokens', cores: 3,
    failInit: 0, errorToken: -1, runMs: 0, file: 'model.rknn', tokenizerJson: true, ...opts };
  writeFileSync(path.join(dir, o.file), ['fake-rknn2', `seq_len ${o.seqLen}`, `hidden ${o.hidden}`,
    `inputs ${o.inputs.join(' ')}`, `output ${o.output}`, `cores ${o.cores}`,
    `fail_init ${o.failInit}`, `error_token ${o.errorToken}`, `run_ms ${o.runMs}`, ''].join('\n'));
  if (o.tokenizerJson) writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(xlmrTokenizer()));
  writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
    bos_token: '<s>', eos_token: '</s>', sep_token: '</s>', cls_token: '<s>', unk_token: '<unk>',
    pad_token: '<pad>', mask_token: '<mask>', model_max_length: 8192 }));
  if (o.manifest) writeFileSync(path.join(dir, 'model.json'), JSON.stringify(o.manifest));
  return dir;
}

// The fake's output row s for token id `id` (see tests/fakes/fake_rknn2.c).
export function fakeRow(id, s, hidden, mask = 1) {
  return Array.from({ length: hidden }, (_, h) => {
    const k = (((id * 31 + h * 7 + s) % 17) + 17) % 17;
    return mask * (k - 8) / 8;
  });
}

export function l2(v) {
  const n = Math.sqrt(v.reduce((a, x) => a + x * x, 0));
  return v.map((x) => (n > 0 ? x / n : 0));
}

// What the server should answer for token ids `ids` (already framed) with the given pooling.
export function expectedEmbedding(ids, hidden, pooling) {
  if (pooling === 'cls') return l2(fakeRow(ids[0], 0, hidden));
  const sum = new Array(hidden).fill(0);
  ids.forEach((id, s) => fakeRow(id, s, hidden).forEach((x, h) => { sum[h] += x; }));
  return l2(sum.map((x) => x / ids.length));
}

export function readLog(file) {
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
}

export async function post(url, body) {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body) });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: r.status, body: json };
}

// An rknn3 model set for the fake: X.rknn (the fake's settings), X.weight, X.tokenizer.gguf
// (a copy of tokenizerGguf) and X.embed.bin (float16 [vocab, dim], row t: embedRow(t, dim)).
export function rknn3Model(tokenizerGguf, opts = {}) {
  const dir = tmpDir('llamapi-rknn3-');
  const o = { task: 'generate', vocab: 2048, dim: 8, maxCtx: 512, failInit: 0, errorToken: -1,
    replyLen: 6, tokenMs: 0, runtimeTemplate: 0, name: 'qwen', manifest: null, ...opts };
  writeFileSync(path.join(dir, `${o.name}.rknn`), ['fake-rknn3', `task ${o.task}`, `vocab ${o.vocab}`,
    `dim ${o.dim}`, `max_ctx ${o.maxCtx}`, `fail_init ${o.failInit}`, `error_token ${o.errorToken}`,
    `reply_len ${o.replyLen}`, `token_ms ${o.tokenMs}`, `runtime_template ${o.runtimeTemplate}`,
    ''].join('\n'));
  writeFileSync(path.join(dir, `${o.name}.weight`), 'weights');
  writeFileSync(path.join(dir, `${o.name}.tokenizer.gguf`), readFileSync(tokenizerGguf));
  const buf = Buffer.alloc(o.vocab * o.dim * 2);
  for (let t = 0; t < o.vocab; t++) {
    embedRow(t, o.dim).forEach((x, h) => buf.writeUInt16LE(toHalf(x), (t * o.dim + h) * 2));
  }
  writeFileSync(path.join(dir, `${o.name}.embed.bin`), buf);
  if (o.manifest) writeFileSync(path.join(dir, 'model.json'), JSON.stringify(o.manifest));
  return dir;
}

// Multiples of 1/8 in [-5/8, 5/8]: exact in float16.
export function embedRow(t, dim) {
  return Array.from({ length: dim }, (_, h) => (((t * 13 + h * 5) % 11) - 5) / 8);
}

function toHalf(x) {
  if (x === 0) return 0;
  const sign = x < 0 ? 0x8000 : 0;
  let a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  const man = Math.round((a / 2 ** e - 1) * 1024);
  return sign | ((e + 15) << 10) | man;
}
