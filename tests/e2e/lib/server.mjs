// Starts a real llamapi-server on a free loopback port (--port 0; the port is read from the
// server's start-up log line) and stops it after the test.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..', '..');
export const serverBin =
  process.env.LLAMAPI_SERVER_BIN ?? path.join(repoRoot, 'build/release/bin/llamapi-server');
export const cliBin = process.env.LLAMAPI_CLI_BIN ?? path.join(repoRoot, 'build/release/bin/llamapi');
export const toolsDir = process.env.LLAMAPI_TOOLS_DIR ?? path.join(repoRoot, 'build/release/bin');
export const sharedDir = path.resolve(repoRoot, '..', 'shared');
// Set (to "asan") when the server under test is a sanitizer build: stop() then also requires
// a clean exit with no sanitizer report, and checks that measure memory by RSS (which the
// sanitizer's quarantine inflates) leave leaks to LeakSanitizer at that exit.
export const sanitizer = process.env.LLAMAPI_E2E_SANITIZER ?? '';
export const hasShared = existsSync(path.join(sharedDir, 'models'));

// Resolves once the server listens and (unless waitReady is false) its start-up models loaded.
// bin: another server binary (the packaged one).
export async function startServer(args = [], { env = {}, timeoutMs = 20000, waitReady = true, bin = serverBin } = {}) {
  const proc = spawn(bin, ['--port', '0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), timeoutMs);
    proc.stderr.on('data', (chunk) => {
      log += chunk;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(log);
      if (m && (!waitReady || /info: ready\n/.test(log))) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${log}`));
    });
  });
  proc.removeAllListeners('exit');
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    proc,
    log: () => log,
    exited,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const end = await exited;
      if (sanitizer) {
        const report = /(ERROR: (Address|Leak)Sanitizer|runtime error:)[\s\S]*/.exec(log);
        if (report || end.code !== 0) {
          throw new Error(`server (${sanitizer}) exited with ${end.code ?? end.signal}:\n` +
            (report ? report[0].slice(0, 6000) : log.slice(-3000)));
        }
      }
      return end;
    },
  };
}

export function errorOf(body) {
  if (!body || typeof body !== 'object' || !body.error) throw new Error(`not an error body: ${JSON.stringify(body)}`);
  return body.error;
}
