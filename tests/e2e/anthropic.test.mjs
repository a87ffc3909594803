// The Anthropic Messages API through the official @anthropic-ai/sdk: messages.create, the
// messages.stream helpers, countTokens, stop sequences, x-api-key auth, Anthropic error
// shapes, and a tool-use round trip (assistant tool_use + user tool_result) rendered and
// answered. The model is synthetic with a test-only chat template that renders tools, calls
// and results (so token counts prove they reach the prompt); a forced tool_choice scripts its
// output through the grammar, so a real tool_use comes back and is answered.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startServer } from './lib/server.mjs';
import { toolTemplateModel } from './lib/tool_template.mjs';

const NO_EOS = { 2: -100 }; // keeps the synthetic model talking until max_tokens
const KEY = 'e2e-key';
const user = (content) => [{ role: 'user', content }];

const weatherTool = {
  name: 'get_weather',
  description: 'Current weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const toolConversation = [
  { role: 'user', content: 'What is the weather in Paris?' },
  {
    role: 'assistant',
    content: [
      { type: 'text', text: 'Let me check.' },
      { type: 'tool_use', id: 'toolu_e2e_1', name: 'get_weather', input: { city: 'Paris' } },
    ],
  },
  {
    role: 'user',
    content: [{ type: 'tool_result', tool_use_id: 'toolu_e2e_1', content: [{ type: 'text', text: 'Sunny, 24 C' }] }],
  },
];

describe('anthropic messages', () => {
  let srv, client;
  before(async () => {
    const small = toolTemplateModel();
    srv = await startServer(['--threads', '1', '-m', small, '--alias', 'small', '-np', '2', '--api-key', KEY]);
    client = new Anthropic({ baseURL: srv.url, apiKey: KEY, maxRetries: 0 });
  });
  after(async () => {
    await srv.stop();
  });

  test('messages.create: message shape, max_tokens stop, usage matches countTokens', async () => {
    const params = { model: 'small', messages: user('Hello there'), system: 'Be brief.' };
    const counted = await client.messages.countTokens(params);
    assert.ok(Number.isInteger(counted.input_tokens) && counted.input_tokens > 0);
    const m = await client.messages.create({ ...params, max_tokens: 8, temperature: 0, logit_bias: NO_EOS },
      { headers: { 'anthropic-version': '2023-06-01' } });
    assert.match(m.id, /^msg_/);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, 'small');
    assert.equal(m.content.length, 1);
    assert.equal(m.content[0].type, 'text');
    assert.ok(m.content[0].text.length > 0);
    assert.equal(m.stop_reason, 'max_tokens');
    assert.equal(m.stop_sequence, null);
    assert.equal(m.usage.output_tokens, 8);
    assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, counted.input_tokens);
  });

  test('countTokens grows with a system prompt and with tools', async () => {
    const base = await client.messages.countTokens({ model: 'small', messages: user('Hi') });
    const sys = await client.messages.countTokens({ model: 'small', messages: user('Hi'),
      system: [{ type: 'text', text: 'You are a careful assistant who answers briefly.' }] });
    const tools = await client.messages.countTokens({ model: 'small', messages: user('Hi'), tools: [weatherTool] });
    const hidden = await client.messages.countTokens({ model: 'small', messages: user('Hi'), tools: [weatherTool],
      tool_choice: { type: 'none' } });
    assert.ok(sys.input_tokens > base.input_tokens);
    assert.ok(tools.input_tokens > base.input_tokens);
    assert.equal(hidden.input_tokens, base.input_tokens);
  });

  test('messages.stream: events in order, helpers collect the final message', async () => {
    const stream = client.messages.stream({ model: 'small', max_tokens: 10, temperature: 0, logit_bias: NO_EOS,
      messages: user('Tell me a story') });
    let text = '';
    const types = [];
    stream.on('text', (delta) => (text += delta));
    stream.on('streamEvent', (ev) => types.push(ev.type));
    const final = await stream.finalMessage();
    assert.equal(types[0], 'message_start');
    assert.equal(types.at(-1), 'message_stop');
    assert.equal(types.at(-2), 'message_delta');
    assert.ok(types.includes('content_block_start') && types.includes('content_block_delta'));
    assert.ok(types.indexOf('content_block_stop') < types.indexOf('message_delta'));
    assert.match(final.id, /^msg_/);
    assert.equal(final.content.length, 1);
    assert.equal(final.content[0].type, 'text');
    assert.equal(final.content[0].text, text);
    assert.ok(text.length > 0);
    assert.equal(final.stop_reason, 'max_tokens');
    assert.equal(final.usage.output_tokens, 10);

    // The same request without streaming gives the same greedy text.
    const whole = await client.messages.create({ model: 'small', max_tokens: 10, temperature: 0, logit_bias: NO_EOS,
      messages: user('Tell me a story') });
    assert.equal(whole.content[0].text, text);
  });

  test('raw SSE carries ping and Anthropic event names', async () => {
    const r = await fetch(`${srv.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'small', max_tokens: 3, stream: true, logit_bias: NO_EOS, messages: user('Hi') }),
    });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/event-stream/);
    const body = await r.text();
    const events = [...body.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
    assert.deepEqual(events.slice(0, 3), ['message_start', 'ping', 'content_block_start']);
    assert.deepEqual(events.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
    const delta = JSON.parse(/^event: message_delta\ndata: (.*)$/m.exec(body)[1]);
    assert.equal(delta.delta.stop_reason, 'max_tokens');
    assert.equal(delta.usage.output_tokens, 3);
  });

  test('stop_sequences end the answer with stop_sequence', async () => {
    const params = { model: 'small', max_tokens: 16, temperature: 0, logit_bias: NO_EOS, messages: user('Once upon a time') };
    const free = await client.messages.create(params);
    const text = free.content[0].text;
    assert.ok(text.length >= 6, `need some text, got ${JSON.stringify(text)}`);
    const stop = text.slice(3, 6);
    const cut = await client.messages.create({ ...params, stop_sequences: [stop] });
    assert.equal(cut.stop_reason, 'stop_sequence');
    assert.equal(cut.stop_sequence, stop);
    assert.equal(cut.content[0].text, text.slice(0, text.indexOf(stop)));
  });

  test('tool-use round trip: tool_use and tool_result render and the model answers', async () => {
    const plain = await client.messages.countTokens({ model: 'small', tools: [weatherTool],
      messages: user('What is the weather in Paris?') });
    const round = await client.messages.countTokens({ model: 'small', tools: [weatherTool], messages: toolConversation });
    assert.ok(round.input_tokens > plain.input_tokens + 10, `${round.input_tokens} vs ${plain.input_tokens}`);
    // Each piece of the exchange is rendered: dropping the tool_use input or the result shrinks it.
    const noInput = structuredClone(toolConversation);
    noInput[1].content[1].input = {};
    const noResult = structuredClone(toolConversation);
    noResult[2].content[0].content = [];
    for (const conv of [noInput, noResult]) {
      const c = await client.messages.countTokens({ model: 'small', tools: [weatherTool], messages: conv });
      assert.ok(c.input_tokens < round.input_tokens);
    }
    const m = await client.messages.create({ model: 'small', max_tokens: 6, tools: [weatherTool],
      tool_choice: { type: 'auto' }, messages: toolConversation, logit_bias: NO_EOS });
    assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(m.stop_reason));
    assert.ok(m.content.length >= 1);
    for (const b of m.content) assert.ok(['text', 'tool_use'].includes(b.type));
    assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, round.input_tokens);
    const final = await client.messages.stream({ model: 'small', max_tokens: 6, tools: [weatherTool],
      messages: toolConversation, logit_bias: NO_EOS }).finalMessage();
    assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(final.stop_reason));
  });

  test('tool_choice tool forces a tool_use; the result goes back and is answered', async () => {
    const tool = { ...weatherTool, input_schema: { type: 'object', required: ['city'],
      properties: { city: { type: 'string', maxLength: 20 } } } };
    const ask = user('What is the weather in Paris?');
    const m = await client.messages.create({ model: 'small', max_tokens: 2000, tools: [tool],
      tool_choice: { type: 'tool', name: 'get_weather' }, messages: ask });
    assert.equal(m.stop_reason, 'tool_use');
    const uses = m.content.filter((b) => b.type === 'tool_use');
    assert.ok(uses.length >= 1);
    assert.equal(uses[0].name, 'get_weather');
    assert.match(uses[0].id, /^\S+$/);
    assert.equal(typeof uses[0].input.city, 'string');
    assert.ok([...uses[0].input.city].length <= 20);

    const next = await client.messages.create({ model: 'small', max_tokens: 6, tools: [tool], logit_bias: NO_EOS,
      messages: [...ask, { role: 'assistant', content: m.content },
        { role: 'user', content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: 'Sunny, 24 C' })) }] });
    assert.equal(next.stop_reason, 'max_tokens');
    assert.equal(next.content[0].type, 'text');

    // Streaming: the SDK rebuilds the tool_use input from input_json_delta; any forces a call too.
    const stream = client.messages.stream({ model: 'small', max_tokens: 2000, tools: [tool],
      tool_choice: { type: 'any', disable_parallel_tool_use: true }, messages: ask });
    let json = '';
    stream.on('inputJson', (delta) => (json += delta));
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    const use = final.content.find((b) => b.type === 'tool_use');
    assert.equal(use.name, 'get_weather');
    assert.deepEqual(use.input, JSON.parse(json));
  });

  test('assistant thinking blocks are rendered as reasoning', async () => {
    const conv = (thinking) => [
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: [...(thinking ? [{ type: 'thinking', thinking, signature: 's' }] : []),
        { type: 'text', text: 'Hello.' }] },
      { role: 'user', content: 'And?' },
    ];
    const without = await client.messages.countTokens({ model: 'small', messages: conv(null) });
    const withIt = await client.messages.countTokens({ model: 'small', messages: conv('The user greets me.') });
    assert.ok(withIt.input_tokens > without.input_tokens);
  });

  test('thinking and metadata are accepted', async () => {
    const m = await client.messages.create({ model: 'small', max_tokens: 4, logit_bias: NO_EOS, messages: user('Hi'),
      thinking: { type: 'enabled', budget_tokens: 1024 }, metadata: { user_id: 'u-1' }, top_k: 5, top_p: 0.9 });
    assert.equal(m.stop_reason, 'max_tokens');
  });

  test('errors use the Anthropic shape and status', async () => {
    await assert.rejects(client.messages.create({ model: 'small', messages: user('Hi') }), (err) => {
      assert.equal(err.status, 400);
      assert.equal(err.error.type, 'error');
      assert.equal(err.error.error.type, 'invalid_request_error');
      assert.match(err.error.error.message, /max_tokens/);
      return true;
    });
    // One -m model: any name is served by it, as llama-server serves it (404s need several).
    const anyName = await client.messages.create({ model: 'no-such-model', max_tokens: 4, messages: user('Hi') });
    assert.equal(anyName.type, 'message');
    await assert.rejects(client.messages.create({ model: 'small', max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } }] }] }), (err) => {
      assert.equal(err.status, 400);
      assert.equal(err.error.error.type, 'invalid_request_error');
      assert.match(err.error.error.message, /base64/);
      return true;
    });
    await assert.rejects(client.messages.create({ model: 'small', max_tokens: 4, temperature: 5, messages: user('Hi') }),
      (err) => err.status === 400 && /temperature/.test(err.error.error.message));
    await assert.rejects(client.messages.countTokens({ model: 'small', messages: [] }),
      (err) => err.status === 400 && err.error.error.type === 'invalid_request_error');
  });

  test('x-api-key is required when the server has a key', async () => {
    const bad = new Anthropic({ baseURL: srv.url, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.messages.create({ model: 'small', max_tokens: 4, messages: user('Hi') }), (err) => {
      assert.ok(err instanceof Anthropic.AuthenticationError);
      assert.equal(err.status, 401);
      assert.equal(err.error.type, 'error');
      assert.equal(err.error.error.type, 'authentication_error');
      return true;
    });
  });

  test('errors raised before the handler (bad JSON) use the Anthropic shape too', async () => {
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      const r = await fetch(`${srv.url}${path}`, { method: 'POST', body: '{"model": ',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY } });
      assert.equal(r.status, 400);
      const body = await r.json();
      assert.equal(body.type, 'error');
      assert.equal(body.error.type, 'invalid_request_error');
      assert.match(body.error.message, /JSON/);
    }
    // Other routes keep the OpenAI shape.
    const r = await fetch(`${srv.url}/v1/responses`, { method: 'POST', body: '{',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` } });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.code, 'invalid_json');
  });
});
