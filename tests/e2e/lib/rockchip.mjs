// Rockchip test fixtures: the fake vendor runtimes (built by make beside the server under
// test, in <build>/fakes), a fake board under --sysfs-root, model directories, and the fake
// runtime's record of what it was called with.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serverBin, sharedDir } from './server.mjs';

export const fakesDir = path.resolve(path.dirname(serverBin), '..', 'fakes');

// The fake RKLLM runtime for an ABI ('1.3' or '1.2').
export function rkllmFake(abi = '1.3') {
  return path.join(fakesDir, abi === '1.2' ? 'librkllm_fake_1_2.so' : 'librkllm_fake.so');
}

export function tmpDir(prefix) {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}

// A board: the device tree names the SoC (board entry first, SoC last, NUL-separated) and the
// NPU driver reports its version.
export function makeBoard(root, { soc = 'rk3588', driver = '0.9.8' } = {}) {
  mkdirSync(path.join(root, 'proc/device-tree'), { recursive: true });
  writeFileSync(path.join(root, 'proc/device-tree/compatible'),
    `rockchip,${soc}-evb\0rockchip,${soc}\0`);
  if (driver) {
    mkdirSync(path.join(root, 'sys/kernel/debug/rknpu'), { recursive: true });
    writeFileSync(path.join(root, 'sys/kernel/debug/rknpu/version'), `RKNPU driver: v${driver}\n`);
  }
  return root;
}

// Qwen3's chat template (Hermes tool calls, think blocks), from the shared template set.
export function qwen3Template() {
  return readFileSync(path.join(sharedDir, 'templates', 'Qwen-Qwen3-0.6B.jinja'), 'utf8');
}

// A model directory: a .rkllm file (the fake only opens it), tokenizer_config.json with a
// chat template unless template is null, and model.json when manifest is given.
export function makeRkllmModel(dir, { file = 'Qwen3-4B-rk3588-w8a8.rkllm', template = qwen3Template(),
  manifest } = {}) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, file), 'not really a model');
  if (template !== null) {
    writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
      chat_template: template, bos_token: null, eos_token: { content: '<|im_end|>' },
    }));
  }
  if (manifest) writeFileSync(path.join(dir, 'model.json'), JSON.stringify(manifest));
  return dir;
}

// The fake runtime's JSON lines (init and run events), in order.
export function readRecord(file) {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

export async function post(srv, route, body) {
  const r = await fetch(`${srv.url}${route}`, { method: 'POST', body: JSON.stringify(body) });
  let json = null;
  const text = await r.text();
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: r.status, body: json };
}

// The SSE events of a streamed response (the data lines, parsed; "[DONE]" kept as a string).
export function sseEvents(text) {
  return text.split('\n\n').map((b) => b.split('\n').find((l) => l.startsWith('data: ')))
    .filter(Boolean).map((l) => l.slice(6)).map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
}
