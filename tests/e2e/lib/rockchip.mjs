// Rockchip test fixtures: the fake vendor runtimes (built by make beside the server under
// test, in <build>/fakes), a fake board under --sysfs-root, model directories, and the fake
// runtime's record of what it was called with.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, existsSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serverBin } from './server.mjs';

export const fakesDir = path.resolve(path.dirname(serverBin), '..', 'fakes');

// The fake RKLLM runtime of a release family: '1.3' (1.3.0), '1.2' (1.2.1-1.2.3) or '1.2.0'
// (a 1.2.0 / 1.2.1b1 look-alike the server must refuse).
export function rkllmFake(abi = '1.3') {
  const file = { '1.3': 'librkllm_fake.so', '1.2': 'librkllm_fake_1_2.so', '1.2.0': 'librkllm_fake_1_2_0.so' }[abi];
  if (!file) throw new Error(`no fake RKLLM runtime for ${abi}`);
  return path.join(fakesDir, file);
}

export function tmpDir(prefix) {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}

// A board: the device tree names the SoC (board entry first, SoC last, NUL-separated), the NPU
// driver reports its version in /sys/module (world-readable, as rknpu 0.9.8's MODULE_VERSION),
// and the NPU's device node is there: npu 'drm' (the driver's DRM-GEM build: a render node
// whose sysfs device is bound to RKNPU, beside a panfrost GPU node that does not count), 'misc'
// (its DMA-heap build: /dev/rknpu), 'gpu-only' (a panfrost render node and nothing else) or
// null (none).
export function makeBoard(root, { soc = 'rk3588', driver = '0.9.8', npu = 'drm' } = {}) {
  mkdirSync(path.join(root, 'proc/device-tree'), { recursive: true });
  writeFileSync(path.join(root, 'proc/device-tree/compatible'),
    `rockchip,${soc}-evb\0rockchip,${soc}\0`);
  if (driver) {
    mkdirSync(path.join(root, 'sys/module/rknpu'), { recursive: true });
    writeFileSync(path.join(root, 'sys/module/rknpu/version'), `${driver}\n`);
  }
  addNpuNode(root, npu);
  return root;
}

// Lays out the device nodes makeBoard describes under root/dev and root/sys.
export function addNpuNode(root, npu) {
  const render = (minor, driver, how) => {
    mkdirSync(path.join(root, 'dev/dri'), { recursive: true });
    writeFileSync(path.join(root, `dev/dri/renderD${minor}`), '');
    const dev = path.join(root, `sys/class/drm/renderD${minor}/device`);
    mkdirSync(dev, { recursive: true });
    if (how === 'link') symlinkSync(`../../../../bus/platform/drivers/${driver}`, path.join(dev, 'driver'));
    else writeFileSync(path.join(dev, 'uevent'), `DRIVER=${driver}\nOF_NAME=npu\n`);
  };
  if (npu === 'drm' || npu === 'gpu-only') render(128, 'panfrost', 'uevent');
  if (npu === 'drm') render(129, 'RKNPU', 'link');
  if (npu === 'misc') {
    mkdirSync(path.join(root, 'dev'), { recursive: true });
    writeFileSync(path.join(root, 'dev/rknpu'), '');
  }
}

// A Qwen3-style chat template of the project's own (ChatML, tools listed in a <tools> block,
// Hermes <tool_call> tags, think blocks closed when enable_thinking is false), so the rkllm
// tests need nothing beside the checkout. What the tests assert of it: tool names and tool
// results reach the prompt, the generation prompt ends "<|im_start|>assistant\n", and
// enable_thinking=false renders an empty "<think>\n\n</think>".
const QWEN3_STYLE_TEMPLATE = `{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools
<tools>
{% for t in tools %}{{ t | tojson }}
{% endfor %}</tools>
Call a tool with <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for m in messages %}{% if m.role == 'user' or (m.role == 'system' and not loop.first) %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% elif m.role == 'assistant' %}<|im_start|>assistant
{% if m.content %}{{ m.content }}{% endif %}{% if m.tool_calls %}{% for c in m.tool_calls %}
<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}{% endif %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% endif %}{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}`;

export function qwen3Template() {
  return QWEN3_STYLE_TEMPLATE;
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
