// Synthetic models written by the project's own gguf-synth, cached for one test run.
import { execFileSync } from 'node:child_process';
import { mkdirSync, existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { toolsDir } from './server.mjs';

const dir = mkdtempSync(path.join(os.tmpdir(), 'llamapi-e2e-'));

// Small and fast: 2 layers, 128 wide, deterministic varied greedy output.
export const SMALL = ['--arch', 'llama', '--layers', '2', '--embd', '128', '--heads', '4', '--heads-kv', '2',
  '--ffn', '256', '--ctx', '4096', '--type', 'f16', '--seed', '7'];
// Slower per token, so concurrency tests have time to overlap requests.
export const SLOW = ['--arch', 'qwen2', '--layers', '6', '--embd', '512', '--heads', '8', '--heads-kv', '2',
  '--ffn', '2048', '--ctx', '4096', '--type', 'f32', '--seed', '3'];

export function synthModel(name, args) {
  const out = path.join(dir, name, `${name}.gguf`);
  if (!existsSync(out)) {
    mkdirSync(path.dirname(out), { recursive: true });
    execFileSync(path.join(toolsDir, 'gguf-synth'), [...args, '-o', out]);
  }
  return out;
}

export const tmpDir = dir;
