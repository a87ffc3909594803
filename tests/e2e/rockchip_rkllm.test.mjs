// The rkllm platform against the fake RKLLM runtime (tests/fakes/fake_rkllm.c) on a fake
// RK3588 board (--sysfs-root): discovery in /v1/platforms (the runtime's ABI probed, a
// 1.2.0/1.2.1b1 look-alike refused, the NPU device node checked), load/resize/unload with one
// runtime handle per instance in NPU memory domains 1..15, chat as JSON and SSE (the whole
// conversation rendered with the model's template, text streamed from the runtime's own thread
// with split UTF-8 joined whichever way the runtime re-sends it, usage from the runtime's
// perf), per-request sampling (ABI 1.3) and its warnings (ABI 1.2), stop strings, tools,
// thinking, cancellation and unload during a run, partial loads, and every refusal. The fake
// reports misuse (a second run on a busy handle, abort from a callback, destroy during a run,
// a base_domain_id of 16 or more, an init on the 1.2.0 look-alike) as FAKE-RKLLM-VIOLATION on
// the server's stderr.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import { startServer } from './lib/server.mjs';
import { rkllmFake, tmpDir, makeBoard, makeRkllmModel, readRecord, post, sseEvents } from './lib/rockchip.mjs';

const root = tmpDir('llamapi-rkllm-');
const board = makeBoard(path.join(root, 'board'));
const models = path.join(root, 'models');
const record = path.join(root, 'record.jsonl');
makeRkllmModel(path.join(models, 'qwen3'));
makeRkllmModel(path.join(models, 'plain'), { template: null });
makeRkllmModel(path.join(models, 'rk3576'), { file: 'Qwen3-rk3576-w8a8.rkllm' });
makeRkllmModel(path.join(models, 'two'), { file: 'a.rkllm' });
makeRkllmModel(path.join(models, 'two'), { file: 'b.rkllm' });
makeRkllmModel(path.join(models, 'chip-manifest'), { manifest: { platform: 'rkllm', chip: 'rk3562' } });

const rkArgs = (lib = rkllmFake('1.3')) => ['--rkllm-lib', lib, '--sysfs-root', board, '--models-dir', models];
let srv;

function noViolations(s) {
  assert.doesNotMatch(s.log(), /FAKE-RKLLM-VIOLATION/, 'the fake runtime saw no misuse');
}

function runs() {
  return readRecord(record).filter((e) => e.event === 'run');
}

const chat = (body) => post(srv, '/v1/chat/completions', { model: 'q', ...body });
const user = (content) => ({ messages: [{ role: 'user', content }] });

before(async () => {
  srv = await startServer(rkArgs(), { env: { FAKE_RKLLM_RECORD: record } });
  const r = await post(srv, '/v1/models/load', { model_id: 'q', model_path: 'qwen3', instance_count: 2 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
});

after(async () => {
  noViolations(srv);
  await srv.stop();
});

test('/v1/platforms lists cpu, rkllm, rknn2, rknn3 with the board, driver and library', async () => {
  const body = await (await fetch(`${srv.url}/v1/platforms`)).json();
  assert.deepEqual(body.platforms.map((p) => p.id), ['cpu', 'rkllm', 'rknn2', 'rknn3']);
  const rk = body.platforms.find((p) => p.id === 'rkllm');
  assert.equal(rk.available, true);
  assert.deepEqual(rk.detected_chips, [{ chip_type: 'RK3588', count: 1 }]);
  assert.equal(rk.npu_driver_version, '0.9.8');
  assert.equal(rk.library, rkllmFake('1.3'));
  assert.equal(rk.abi, '1.3');
  assert.equal(rk.reason, undefined);
  for (const id of ['rknn2', 'rknn3']) {
    const p = body.platforms.find((x) => x.id === id);
    assert.equal(p.available, false);
    assert.match(p.reason, /cannot open shared object file/);
  }
});

test('load: one runtime handle per instance, distinct base_domain_id off 0, big cores, template cleared', async () => {
  const inits = readRecord(record).filter((e) => e.event === 'init' && e.ok);
  // Domain 0 stays with rknn2 on an RK3588: the LLM handles start at 1.
  assert.deepEqual(inits.map((e) => e.domain).sort(), [1, 2]);
  for (const e of inits) {
    assert.equal(e.abi, '1.3');
    assert.equal(e.cpus_mask, 0xf0); // CPU4-7 on an RK3588
    assert.equal(e.embed_flash, 1);
    assert.equal(e.max_context_len, 4096);
  }
  const m = await (await fetch(`${srv.url}/v1/models/q`)).json();
  assert.equal(m.platform, 'rkllm');
  assert.equal(m.instance_count, 2);
  assert.equal(m.model_kind, 'chat');
});

test('chat JSON: the whole conversation through the template, text and usage from the runtime', async () => {
  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'first question' },
    { role: 'assistant', content: 'first answer' },
    { role: 'user', content: 'second question' },
  ];
  const r = await chat({ messages });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const run = runs().at(-1);
  assert.equal(run.template_cleared, true);
  assert.equal(run.role, 'user');
  for (const t of ['Be brief.', 'first question', 'first answer', 'second question'])
    assert.ok(run.prompt.includes(t), `the prompt holds "${t}"`);
  assert.ok(run.prompt.endsWith('<|im_start|>assistant\n'), 'generation prompt added');
  const bytes = Buffer.byteLength(run.prompt);
  const choice = r.body.choices[0];
  assert.equal(choice.message.content, `Hello user (${bytes} bytes): café € ok.`);
  assert.equal(choice.finish_reason, 'stop');
  assert.deepEqual(r.body.usage.prompt_tokens, Math.ceil(bytes / 4));
  assert.equal(r.body.usage.completion_tokens, 11); // the fake's 11 callbacks (perf)
  assert.equal(r.body.usage.total_tokens, Math.ceil(bytes / 4) + 11);
});

test('chat SSE: deltas from the runtime thread, split characters whole, usage chunk', async () => {
  const res = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({
    model: 'q', stream: true, stream_options: { include_usage: true }, ...user('stream please') }) });
  assert.equal(res.status, 200);
  const events = sseEvents(await res.text());
  assert.equal(events.at(-1), '[DONE]');
  const chunks = events.slice(0, -1);
  const deltas = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? '')).filter(Boolean);
  for (const d of deltas) assert.doesNotMatch(d, /\uFFFD/, 'no broken character in any delta');
  // The fake sends € as two callbacks (WAITING with its first two bytes): it must arrive whole
  // inside one delta (how many events a delta holds depends on timing).
  assert.ok(deltas.some((d) => d.includes('€')), 'the split € arrives whole in one delta');
  const bytes = Buffer.byteLength(runs().at(-1).prompt);
  assert.equal(deltas.join(''), `Hello user (${bytes} bytes): café € ok.`);
  const fin = chunks.find((c) => c.choices[0]?.finish_reason);
  assert.equal(fin.choices[0].finish_reason, 'stop');
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.completion_tokens, 11);
  assert.equal(usage.usage.prompt_tokens, Math.ceil(bytes / 4));
});

test('WAITING then a NORMAL that sends the held bytes again: nothing doubled, nothing lost', async () => {
  const r = await chat(user('FAKE_RESEND'));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.choices[0].message.content, 'Hi café € x😀 ok.');
  const res = await fetch(`${srv.url}/v1/chat/completions`, {
    method: 'POST', body: JSON.stringify({ model: 'q', stream: true, ...user('FAKE_RESEND') }),
  });
  const text = sseEvents(await res.text()).filter((e) => e !== '[DONE]' && e.choices?.length)
    .map((e) => e.choices[0].delta.content ?? '').join('');
  assert.equal(text, 'Hi café € x😀 ok.');
});

test('ABI 1.3: sampling and max_tokens per request', async () => {
  let r = await chat({ ...user('sample'), temperature: 0.3, top_p: 0.5, top_k: 7, frequency_penalty: 0.25,
    presence_penalty: -0.5, repeat_penalty: 1.2 });
  assert.equal(r.status, 200);
  assert.deepEqual(runs().at(-1).sampling, { temperature: 0.3, top_p: 0.5, top_k: 7, repeat_penalty: 1.2,
    frequency_penalty: 0.25, presence_penalty: -0.5 });
  r = await chat({ ...user('short'), max_tokens: 3 });
  assert.equal(r.status, 200);
  assert.equal(runs().at(-1).max_new_tokens, 3);
  assert.equal(r.body.choices[0].finish_reason, 'length');
  assert.equal(r.body.choices[0].message.content, 'Hello user');
  assert.equal(r.body.usage.completion_tokens, 3);
});

test('stop strings are matched by the API layer and end the run', async () => {
  const r = await chat({ ...user('FAKE_STOP'), stop: ['STOPHERE'] });
  assert.equal(r.status, 200);
  assert.equal(r.body.choices[0].message.content, 'alpha beta ');
  assert.equal(r.body.choices[0].finish_reason, 'stop');
});

test('tools go through the template and come back through our tool-call parser', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const r = await chat({ ...user('FAKE_TOOL weather in Paris?'), tools });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.ok(runs().at(-1).prompt.includes('get_weather'), 'the template listed the tool');
  const msg = r.body.choices[0].message;
  assert.equal(r.body.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.tool_calls.length, 1);
  assert.equal(msg.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(msg.tool_calls[0].function.arguments), { city: 'Paris' });
  // The tool's answer goes back as a tool message, rendered by the template.
  const r2 = await chat({ tools, messages: [
    { role: 'user', content: 'weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: msg.tool_calls },
    { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: '21 degrees' },
  ] });
  assert.equal(r2.status, 200, JSON.stringify(r2.body));
  assert.ok(runs().at(-1).prompt.includes('21 degrees'));
});

test('enable_thinking reaches the template and the runtime; reasoning is split out', async () => {
  let r = await chat({ ...user('no thinking'), enable_thinking: false });
  assert.equal(r.status, 200);
  let run = runs().at(-1);
  assert.equal(run.enable_thinking, false);
  assert.ok(run.prompt.includes('<think>\n\n</think>'), 'Qwen3 template closed the think block');
  r = await chat({ ...user('FAKE_THINK') });
  assert.equal(r.status, 200);
  run = runs().at(-1);
  assert.equal(run.enable_thinking, true);
  assert.equal(r.body.choices[0].message.reasoning_content, 'pondering');
  assert.equal(r.body.choices[0].message.content, 'Answer.');
});

test('what the runtime cannot do is refused by name', async () => {
  // ABI 1.3 (this server). Under ABI 1.2, min_p, seed and sampling values other than the
  // load-time ones are answered with a warning instead: see the ABI 1.2 test.
  const cases = [
    [{ grammar: 'root ::= "a"' }, 'grammar'],
    [{ json_schema: { type: 'object' } }, 'json_schema'],
    [{ response_format: { type: 'json_object' } }, 'response_format'],
    [{ logprobs: true }, 'logprobs'],
    [{ n: 2 }, 'n'],
    [{ logit_bias: { 5: 1 } }, 'logit_bias'],
    [{ min_p: 0.1 }, 'min_p'],
    [{ seed: 42 }, 'seed'],
    [{ tool_choice: 'required', tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }] },
      'tool_choice'],
  ];
  const before = runs().length;
  for (const [extra, param] of cases) {
    const r = await chat({ ...user('hi'), ...extra });
    assert.equal(r.status, 400, `${param}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, 'unsupported_parameter', param);
    assert.equal(r.body.error.param, param);
    assert.match(r.body.error.message, /rkllm/);
  }
  assert.equal(runs().length, before, 'nothing reached the runtime');
  let r = await post(srv, '/v1/completions', { model: 'q', prompt: 'hi' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'unsupported_platform');
  r = await post(srv, '/v1/chat/completions/input_tokens', { model: 'q', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'unsupported_platform');
  assert.match(r.body.error.message, /tokenizes internally/);
  r = await post(srv, '/v1/messages/count_tokens', { model: 'q', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /tokenizes internally/);
});

test('a runtime ERROR is a 500 and the instance serves the next request', async () => {
  const r = await chat(user('FAKE_ERROR'));
  assert.equal(r.status, 500);
  assert.match(r.body.error.message, /RKLLM runtime reported an error/);
  const ok = await chat(user('after the error'));
  assert.equal(ok.status, 200);
});

test('Anthropic Messages and Responses run on the same text path', async () => {
  let r = await post(srv, '/v1/messages', { model: 'q', max_tokens: 50, messages: [{ role: 'user', content: 'anthropic' }] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.match(r.body.content[0].text, /^Hello user \(\d+ bytes\): café € ok\.$/);
  assert.equal(r.body.usage.output_tokens, 11);
  r = await post(srv, '/v1/responses', { model: 'q', input: 'responses' });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.match(JSON.stringify(r.body.output), /café € ok\./);
});

test('client disconnect aborts the run; the handle is free again soon after', async () => {
  await post(srv, '/v1/models/resize', { model_id: 'q', instance_count: 1 });
  const ctl = new AbortController();
  const res = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', signal: ctl.signal,
    body: JSON.stringify({ model: 'q', stream: true, ...user('FAKE_SLOW') }) });
  const reader = res.body.getReader();
  await reader.read(); // the role chunk
  await reader.read(); // a first tick
  const t0 = Date.now();
  ctl.abort();
  // The only instance runs the slow request (8 s if nobody aborts it): the next request gets it
  // once the abort took hold (150 ms in the fake) and the run returned.
  const r = await chat(user('next'));
  assert.equal(r.status, 200);
  assert.ok(Date.now() - t0 < 4000, `the aborted run ended early (${Date.now() - t0} ms)`);
  const r2 = await post(srv, '/v1/models/resize', { model_id: 'q', instance_count: 2 });
  assert.equal(r2.body.actual_instance_count, 2);
});

test('shrinking while every instance is busy retires one when its run ends', async () => {
  const slow = () => chat({ ...user('FAKE_SLOW'), max_tokens: 10 });
  const busy = [slow(), slow()];
  await new Promise((res) => setTimeout(res, 50));
  const r = await post(srv, '/v1/models/resize', { model_id: 'q', instance_count: 1 });
  assert.equal(r.status, 200);
  for (const b of await Promise.all(busy)) assert.equal(b.status, 200, JSON.stringify(b.body));
  let m;
  for (let k = 0; k < 50; k++) {
    m = await (await fetch(`${srv.url}/v1/models/q`)).json();
    if (m.instance_count === 1) break;
    await new Promise((res) => setTimeout(res, 20));
  }
  assert.equal(m.instance_count, 1);
  assert.equal((await chat(user('after the shrink'))).status, 200);
  const g = await post(srv, '/v1/models/resize', { model_id: 'q', instance_count: 2 });
  assert.equal(g.body.actual_instance_count, 2);
  noViolations(srv);
});

test('requests beyond the instances queue; each handle runs one at a time', async () => {
  const all = await Promise.all(Array.from({ length: 8 }, (_, i) => chat(user(`parallel ${i}`))));
  for (const r of all) assert.equal(r.status, 200, JSON.stringify(r.body));
  noViolations(srv);
});

test('a busy instance with no queue room is 429, as on cpu', async () => {
  let r = await post(srv, '/v1/models/load', { model_id: 'z', model_path: 'qwen3', instance_count: 1,
    request_queue_size: 0 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const slow = post(srv, '/v1/chat/completions', { model: 'z', ...user('FAKE_SLOW'), max_tokens: 15 });
  await new Promise((res) => setTimeout(res, 100));
  r = await post(srv, '/v1/chat/completions', { model: 'z', ...user('me too') });
  assert.equal(r.status, 429);
  assert.equal(r.body.error.code, 'queue_full');
  assert.equal((await slow).status, 200);
  assert.equal((await post(srv, '/v1/models/unload', { model_id: 'z' })).status, 200);
});

test('unload during a run aborts it, waits for it, then destroys the handles', async () => {
  // A second model on the same runtime: its handle gets a base_domain_id of its own.
  const r = await post(srv, '/v1/models/load', { model_id: 'u', model_path: 'qwen3', instance_count: 1 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(readRecord(record).filter((e) => e.event === 'init').at(-1).domain, 3);
  const pending = post(srv, '/v1/chat/completions', { model: 'u', ...user('FAKE_SLOW') });
  await new Promise((res) => setTimeout(res, 200));
  const t0 = Date.now();
  const un = await post(srv, '/v1/models/unload', { model_id: 'u' });
  assert.equal(un.status, 200);
  assert.ok(Date.now() - t0 < 4000, 'unload did not wait for the whole slow run');
  const done = await pending;
  assert.equal(done.status, 404);
  assert.match(done.body.error.message, /unloaded/);
  noViolations(srv);
});

test('detection and host refusals', async () => {
  let r = await post(srv, '/v1/models/load', { model_id: 'x', model_path: 'two' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'platform_detection_failed');
  assert.match(r.body.error.message, /a\.rkllm \(rkllm\)/);
  assert.match(r.body.error.message, /b\.rkllm \(rkllm\)/);
  r = await post(srv, '/v1/models/load', { model_id: 'x', model_path: 'rk3576' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'unsupported_platform');
  assert.match(r.body.error.message, /rk3576/);
  assert.match(r.body.error.message, /RK3588/);
  r = await post(srv, '/v1/models/load', { model_id: 'x', model_path: 'chip-manifest' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'unsupported_platform');
  assert.match(r.body.error.message, /rk3562/);
});

test('detection: the NPU device node must be the rknpu driver\'s; RV1126B and RK3582 by name', { timeout: 60000 }, async () => {
  const platformsOf = async (board) => {
    const s = await startServer(['--rkllm-lib', rkllmFake('1.3'), '--rknn-lib', path.join(path.dirname(rkllmFake('1.3')), 'librknn2_fake.so'),
      '--sysfs-root', board, '--models-dir', models]);
    try {
      return (await (await fetch(`${s.url}/v1/platforms`)).json()).platforms;
    } finally {
      await s.stop();
    }
  };
  let ps = await platformsOf(makeBoard(path.join(root, 'board-none'), { npu: null }));
  for (const id of ['rkllm', 'rknn2']) {
    const p = ps.find((x) => x.id === id);
    assert.equal(p.available, false, id);
    assert.match(p.reason, /no NPU device node: no \/dev\/dri\/renderD\* of the rknpu driver and no \/dev\/rknpu/);
    assert.equal(p.npu_driver_version, '0.9.8');
  }
  ps = await platformsOf(makeBoard(path.join(root, 'board-gpu'), { npu: 'gpu-only' }));
  assert.match(ps.find((x) => x.id === 'rkllm').reason, /\/dev\/dri\/renderD128 is panfrost/);
  ps = await platformsOf(makeBoard(path.join(root, 'board-misc'), { npu: 'misc', soc: 'rv1126b' }));
  let rk = ps.find((x) => x.id === 'rkllm');
  assert.equal(rk.available, true, rk.reason);
  assert.deepEqual(rk.detected_chips, [{ chip_type: 'RV1126B', count: 1 }]);
  assert.equal(ps.find((x) => x.id === 'rknn2').available, true);
  const b3582 = makeBoard(path.join(root, 'board-3582'));
  writeFileSync(path.join(b3582, 'proc/device-tree/compatible'), 'radxa,rock-5c\0rockchip,rk3582\0rockchip,rk3588s\0');
  rk = (await platformsOf(b3582)).find((x) => x.id === 'rkllm');
  assert.deepEqual(rk.detected_chips, [{ chip_type: 'RK3582', count: 1 }]);
});

test('without a chat template: the runtime template, last message only, with its role', async () => {
  let r = await post(srv, '/v1/models/load', { model_id: 'p', model_path: 'plain', instance_count: 1 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.match(srv.log(), /no chat_template: the rkllm runtime's own template is used/);
  r = await post(srv, '/v1/chat/completions', { model: 'p', messages: [
    { role: 'user', content: 'earlier' }, { role: 'assistant', content: 'ok' },
    { role: 'tool', tool_call_id: 't', content: 'tool result text' }] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const run = runs().at(-1);
  assert.equal(run.prompt, 'tool result text');
  assert.equal(run.role, 'tool');
  assert.equal(run.template_cleared, false);
  assert.match(r.body.choices[0].message.content, /^Hello tool \(16 bytes\)/);
  r = await post(srv, '/v1/chat/completions', { model: 'p', messages: [{ role: 'assistant', content: 'x' }] });
  assert.equal(r.status, 400);
  r = await post(srv, '/v1/chat/completions', { model: 'p', ...user('hi'),
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }] });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'unsupported_parameter');
  assert.equal(r.body.error.param, 'tools');
  r = await post(srv, '/tokenize', { model: 'p', content: 'hi' });
  assert.equal(r.status, 400);
  await post(srv, '/v1/models/unload', { model_id: 'p' });
});

test('partial load when a runtime init fails; resize creates and destroys handles', async () => {
  const rec = path.join(root, 'record-partial.jsonl');
  const s = await startServer(rkArgs(), { env: { FAKE_RKLLM_RECORD: rec, FAKE_RKLLM_FAIL_INIT: '2' } });
  try {
    let r = await post(s, '/v1/models/load', { model_id: 'm', model_path: 'qwen3', instance_count: 3 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.message, "model 'm' partially loaded");
    assert.equal(r.body.requested_instance_count, 3);
    assert.equal(r.body.actual_instance_count, 1);
    r = await post(s, '/v1/models/resize', { model_id: 'm', instance_count: 3 });
    assert.equal(r.body.actual_instance_count, 3);
    const inits = readRecord(rec).filter((e) => e.event === 'init');
    assert.deepEqual(inits.map((e) => e.ok), [true, false, true, true]);
    r = await post(s, '/v1/models/resize', { model_id: 'm', instance_count: 1 });
    assert.equal(r.body.actual_instance_count, 1);
    r = await post(s, '/v1/chat/completions', { model: 'm', ...user('still serving') });
    assert.equal(r.status, 200);
    noViolations(s);
  } finally {
    await s.stop();
  }
});

test('memory domains: never 16 or more; past 15 a partial load says why; RK3562 shares 0', { timeout: 60000 }, async () => {
  const rec = path.join(root, 'record-domains.jsonl');
  const s = await startServer(rkArgs(), { env: { FAKE_RKLLM_RECORD: rec } });
  try {
    const r = await post(s, '/v1/models/load', { model_id: 'm', model_path: 'qwen3', instance_count: 16 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.actual_instance_count, 15);
    assert.match(JSON.stringify(r.body), /no NPU memory domain left .*within 1-15/);
    const domains = readRecord(rec).filter((e) => e.event === 'init' && e.ok).map((e) => e.domain);
    assert.deepEqual([...domains].sort((a, b) => a - b), Array.from({ length: 15 }, (_, k) => k + 1));
    noViolations(s);
  } finally {
    await s.stop();
  }
  const small = makeBoard(path.join(root, 'board-3562'), { soc: 'rk3562' });
  makeRkllmModel(path.join(models, 'neutral'), { file: 'Qwen3-0.6B-w8a8.rkllm' });
  const rec2 = path.join(root, 'record-3562.jsonl');
  const t = await startServer(['--rkllm-lib', rkllmFake('1.3'), '--sysfs-root', small, '--models-dir', models],
    { env: { FAKE_RKLLM_RECORD: rec2 } });
  try {
    const r = await post(t, '/v1/models/load', { model_id: 'm', model_path: 'neutral', instance_count: 2 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.actual_instance_count ?? 2, 2);
    const inits = readRecord(rec2).filter((e) => e.event === 'init' && e.ok);
    assert.deepEqual(inits.map((e) => e.domain), [0, 0]);
    assert.equal(inits[0].cpus_mask, 0x0f);
    noViolations(t);
  } finally {
    await t.stop();
  }
});

test('ABI 1.2: init-time sampling; what a request asks for and 1.2 cannot apply is a warning', { timeout: 60000 }, async () => {
  const rec = path.join(root, 'record-12.jsonl');
  // No --rkllm-abi: the probe finds 1.2.1-1.2.3.
  const s = await startServer(rkArgs(rkllmFake('1.2')), { env: { FAKE_RKLLM_RECORD: rec } });
  try {
    const plat = (await (await fetch(`${s.url}/v1/platforms`)).json()).platforms.find((p) => p.id === 'rkllm');
    assert.equal(plat.abi, '1.2');
    let r = await post(s, '/v1/models/load', { model_id: 'm', model_path: 'qwen3' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    r = await post(s, '/v1/chat/completions', { model: 'm', ...user('hello 1.2') });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.match(r.body.choices[0].message.content, /café € ok\.$/);
    const run = readRecord(rec).filter((e) => e.event === 'run').at(-1);
    assert.equal(run.abi, '1.2');
    assert.equal(run.sampling, undefined);
    // What ABI 1.2 cannot apply per request runs with the load-time values, said in the log
    // and in an x-llamapi-warning header, not refused (clients that always send a temperature
    // must still work).
    const warned = async (model, extra, pattern) => {
      const res = await fetch(`${s.url}/v1/chat/completions`, {
        method: 'POST', body: JSON.stringify({ model, ...user('warned'), ...extra }),
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.match(res.headers.get('x-llamapi-warning') ?? '', pattern);
      assert.match(body.choices[0].message.content, /ok\.$/);
      return res;
    };
    await warned('m', { temperature: 0.3 }, /^rkllm ABI 1\.2 applies sampling fixed at load; not applied: temperature=0\.3$/);
    await warned('m', { seed: 42, min_p: 0.1, top_p: 0.5 }, /not applied: top_p=0\.5, seed=42, min_p=0\.1$/);
    assert.equal(readRecord(rec).filter((e) => e.event === 'run').at(-1).sampling, undefined);
    assert.match(s.log(), /model m: rkllm ABI 1\.2 applies sampling fixed at load; not applied: temperature=0\.3/);
    // Streaming carries the header too.
    const res = await fetch(`${s.url}/v1/chat/completions`, {
      method: 'POST', body: JSON.stringify({ model: 'm', stream: true, ...user('warned'), temperature: 0.2 }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('x-llamapi-warning') ?? '', /temperature=0\.2/);
    await res.text();
    r = await post(s, '/v1/chat/completions', { model: 'm', ...user('same'), temperature: 0.8, top_k: 40 });
    assert.equal(r.status, 200, 'the init-time values themselves are fine');
    // default_params 1.2 cannot apply are named the same way, not dropped silently.
    r = await post(s, '/v1/models/load', { model_id: 'd', model_path: 'qwen3', default_params: { top_p: 0.5 } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await warned('d', {}, /not applied: default_params\.top_p=0\.5$/);
    const plain = await fetch(`${s.url}/v1/chat/completions`, {
      method: 'POST', body: JSON.stringify({ model: 'm', ...user('plain') }),
    });
    assert.equal(plain.headers.get('x-llamapi-warning'), null, 'no warning when nothing is asked');
    await plain.text();
    // max_tokens on 1.2: counted by us, the run aborted.
    r = await post(s, '/v1/chat/completions', { model: 'm', ...user('FAKE_SLOW'), max_tokens: 4 });
    assert.equal(r.status, 200);
    assert.equal(r.body.choices[0].finish_reason, 'length');
    assert.equal(r.body.choices[0].message.content, 'tick tick tick tick ');
    assert.equal(r.body.usage.completion_tokens, 4);
    noViolations(s);
  } finally {
    await s.stop();
  }
});

test('the runtime ABI is probed: 1.2.0/1.2.1b1 refused by name, --rkllm-abi overrides', { timeout: 60000 }, async () => {
  const old = await startServer(rkArgs(rkllmFake('1.2.0')));
  try {
    const plat = (await (await fetch(`${old.url}/v1/platforms`)).json()).platforms.find((p) => p.id === 'rkllm');
    assert.equal(plat.available, false);
    assert.equal(plat.abi, undefined);
    assert.match(plat.reason, /looks like 1\.2\.0 or 1\.2\.1b1 .*rkllm_get_kv_cache_size/);
    assert.match(plat.reason, /1\.2\.1-1\.2\.3 and 1\.3\.0/);
    const r = await post(old, '/v1/models/load', { model_id: 'm', model_path: 'qwen3' });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'unsupported_platform');
    assert.match(r.body.error.message, /1\.2\.0 or 1\.2\.1b1/);
    noViolations(old);
  } finally {
    await old.stop();
  }
  // The flag is the user's word against the probe: believed, with a warning in the log.
  const forced = await startServer([...rkArgs(rkllmFake('1.2.0')), '--rkllm-abi', '1.2']);
  try {
    const plat = (await (await fetch(`${forced.url}/v1/platforms`)).json()).platforms.find((p) => p.id === 'rkllm');
    assert.equal(plat.available, true);
    assert.equal(plat.abi, '1.2');
    assert.match(forced.log(), /--rkllm-abi 1\.2 overrides the probe, which found 1\.2\.0 or 1\.2\.1b1/);
  } finally {
    await forced.stop();
  }
  // model.json naming another ABI than the runtime's fails the load before any rkllm_init
  // (a load the platform refuses is model_load_failed, as every platform's).
  const dir = makeRkllmModel(path.join(models, 'wants-12'), { manifest: { platform: 'rkllm', abi: '1.2' } });
  const before = readRecord(record).filter((e) => e.event === 'init').length;
  const r = await post(srv, '/v1/models/load', { model_id: 'w12', model_path: dir });
  assert.equal(r.status, 500, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'model_load_failed');
  assert.equal(readRecord(record).filter((e) => e.event === 'init').length, before);
  assert.match(r.body.error.message, /model\.json asks for rkllm ABI 1\.2 but the runtime .* speaks 1\.3/);
});

test('shutdown during a run aborts it and exits cleanly', async () => {
  const s = await startServer(rkArgs());
  const r = await post(s, '/v1/models/load', { model_id: 'm', model_path: 'qwen3' });
  assert.equal(r.status, 200);
  const pending = post(s, '/v1/chat/completions', { model: 'm', ...user('FAKE_SLOW') }).catch(() => null);
  await new Promise((res) => setTimeout(res, 300));
  const t0 = Date.now();
  const end = await s.stop(); // SIGTERM; under a sanitizer also no report and exit code 0
  assert.equal(end.code, 0);
  assert.ok(Date.now() - t0 < 5000, `shutdown did not wait out the slow run (${Date.now() - t0} ms)`);
  await pending;
  noViolations(s);
});

test('a missing or wrong runtime library: unavailable with the reason; its models refused', async () => {
  const missing = path.join(root, 'no-such-librkllmrt.so');
  const s = await startServer(['--rkllm-lib', missing, '--sysfs-root', board, '--models-dir', models]);
  try {
    const plat = (await (await fetch(`${s.url}/v1/platforms`)).json()).platforms.find((p) => p.id === 'rkllm');
    assert.equal(plat.available, false);
    assert.match(plat.reason, /no-such-librkllmrt\.so/);
    const r = await post(s, '/v1/models/load', { model_id: 'm', model_path: 'qwen3' });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'unsupported_platform');
    assert.match(r.body.error.message, /no-such-librkllmrt\.so/);
  } finally {
    await s.stop();
  }
  const w = await startServer(['--rkllm-lib', 'libm.so.6', '--sysfs-root', board, '--models-dir', models]);
  try {
    const plat = (await (await fetch(`${w.url}/v1/platforms`)).json()).platforms.find((p) => p.id === 'rkllm');
    assert.equal(plat.available, false);
    assert.equal(plat.reason, 'libm.so.6 does not export rkllm_createDefaultParam (not a supported version)');
  } finally {
    await w.stop();
  }
});
