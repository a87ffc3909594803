// The OpenAI Responses API through the official openai SDK: responses.create with and without
// streaming (typed events with sequence numbers, the SDK's stream helper), input items with
// function_call / function_call_output, previous_response_id chaining through the in-memory
// store, input token counting (also for chat completions bodies), structured output and forced
// function calls (the grammar scripts the synthetic model's output), and refusals.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './lib/server.mjs';
import { toolTemplateModel } from './lib/tool_template.mjs';

const NO_EOS = { 2: -100 };
const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const callItems = [
  { role: 'user', content: [{ type: 'input_text', text: 'What is the weather in Paris?' }] },
  { type: 'function_call', call_id: 'call_e2e_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
  { type: 'function_call_output', call_id: 'call_e2e_1', output: 'Sunny, 24 C' },
];

describe('responses', () => {
  let srv, client;
  before(async () => {
    srv = await startServer(['--threads', '1', '-m', toolTemplateModel(), '--alias', 'small', '-np', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await srv.stop();
  });

  test('responses.create: response object, incomplete at max_output_tokens, usage', async () => {
    const r = await client.responses.create({ model: 'small', input: 'Hello there', instructions: 'Be brief.',
      max_output_tokens: 8, temperature: 0, logit_bias: NO_EOS });
    assert.match(r.id, /^resp_/);
    assert.equal(r.object, 'response');
    assert.equal(r.model, 'small');
    assert.equal(r.status, 'incomplete');
    assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(r.instructions, 'Be brief.');
    assert.ok(Number.isInteger(r.created_at));
    assert.equal(r.output.length, 1);
    const msg = r.output[0];
    assert.equal(msg.type, 'message');
    assert.equal(msg.role, 'assistant');
    assert.equal(msg.status, 'incomplete', 'the cut message says so, as OpenAI marks it');
    assert.match(msg.id, /^msg_/);
    assert.equal(msg.content[0].type, 'output_text');
    assert.deepEqual(msg.content[0].annotations, []);
    assert.ok(r.output_text.length > 0);
    assert.equal(r.output_text, msg.content[0].text);
    assert.equal(r.usage.output_tokens, 8);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + 8);
    const counted = await client.responses.inputTokens.count({ model: 'small', input: 'Hello there',
      instructions: 'Be brief.' });
    assert.equal(counted.object, 'response.input_tokens');
    assert.equal(counted.input_tokens, r.usage.input_tokens);
  });

  test('echoed sampling defaults read as set (0.8, 0.95), not as float32 digits', async () => {
    const r = await fetch(`${srv.url}/v1/responses`, { method: 'POST',
      body: JSON.stringify({ model: 'small', input: 'Hello', max_output_tokens: 2 }) });
    const text = await r.text();
    assert.match(text, /"temperature":0\.8,"top_p":0\.95,/);
  });

  test('streaming: event order, sequence numbers, deltas add up to the final text', async () => {
    const stream = await client.responses.create({ model: 'small', input: 'Tell me a story', stream: true,
      max_output_tokens: 10, temperature: 0, logit_bias: NO_EOS });
    const events = [];
    for await (const ev of stream) events.push(ev);
    const types = events.map((e) => e.type);
    assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added',
      'response.content_part.added']);
    assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done',
      'response.output_item.done', 'response.incomplete']);
    events.forEach((e, i) => assert.equal(e.sequence_number, i));
    const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
    assert.ok(text.length > 0);
    assert.equal(events.find((e) => e.type === 'response.output_text.done').text, text);
    const created = events[0].response;
    const final = events.at(-1).response;
    assert.equal(created.status, 'in_progress');
    assert.equal(final.id, created.id);
    assert.equal(final.status, 'incomplete');
    assert.equal(final.output[0].content[0].text, text);
    assert.equal(final.output[0].id, events[2].item.id);
    assert.equal(final.output[0].status, 'incomplete');
    assert.equal(events.find((e) => e.type === 'response.output_item.done').item.status, 'incomplete');
    assert.equal(final.usage.output_tokens, 10);
    const whole = await client.responses.create({ model: 'small', input: 'Tell me a story', max_output_tokens: 10,
      temperature: 0, logit_bias: NO_EOS });
    assert.equal(whole.output_text, text);
  });

  test('responses.stream helper reaches response.completed (stop string)', async () => {
    const base = await client.responses.create({ model: 'small', input: 'Once upon a time', max_output_tokens: 16,
      temperature: 0, logit_bias: NO_EOS });
    const text = base.output_text;
    assert.ok(text.length >= 6);
    const stop = text.slice(3, 6);
    let deltas = '';
    const stream = client.responses.stream({ model: 'small', input: 'Once upon a time', max_output_tokens: 16,
      temperature: 0, logit_bias: NO_EOS, stop: [stop] });
    stream.on('response.output_text.delta', (e) => (deltas += e.delta));
    const final = await stream.finalResponse();
    assert.equal(final.status, 'completed');
    assert.equal(final.incomplete_details, null);
    assert.equal(final.output[0].status, 'completed');
    assert.equal(final.output_text, text.slice(0, text.indexOf(stop)));
    assert.equal(deltas, final.output_text);
  });

  test('function_call and function_call_output items render; tools count', async () => {
    const plain = await client.responses.inputTokens.count({ model: 'small', input: callItems.slice(0, 1) });
    const withTools = await client.responses.inputTokens.count({ model: 'small', input: callItems.slice(0, 1),
      tools: [weatherTool] });
    const hidden = await client.responses.inputTokens.count({ model: 'small', input: callItems.slice(0, 1),
      tools: [weatherTool], tool_choice: 'none' });
    const round = await client.responses.inputTokens.count({ model: 'small', input: callItems, tools: [weatherTool] });
    assert.ok(withTools.input_tokens > plain.input_tokens);
    assert.equal(hidden.input_tokens, plain.input_tokens);
    assert.ok(round.input_tokens > withTools.input_tokens + 10);
    const r = await client.responses.create({ model: 'small', input: callItems, tools: [weatherTool],
      max_output_tokens: 5, logit_bias: NO_EOS });
    assert.equal(r.usage.input_tokens, round.input_tokens);
    for (const item of r.output) assert.ok(['message', 'function_call', 'reasoning'].includes(item.type));
    assert.deepEqual(r.tools.map((t) => t.name), ['get_weather']);
  });

  test('previous_response_id continues a stored conversation; store:false is not kept', async () => {
    const first = await client.responses.create({ model: 'small', input: 'My name is Ada.', max_output_tokens: 6,
      temperature: 0, logit_bias: NO_EOS });
    const alone = await client.responses.inputTokens.count({ model: 'small', input: 'What is my name?' });
    const chained = await client.responses.inputTokens.count({ model: 'small', input: 'What is my name?',
      previous_response_id: first.id });
    // The earlier turn (input and answer) is part of the prompt now.
    assert.ok(chained.input_tokens >= alone.input_tokens + first.usage.output_tokens);
    const second = await client.responses.create({ model: 'small', input: 'What is my name?',
      previous_response_id: first.id, max_output_tokens: 4, logit_bias: NO_EOS });
    assert.equal(second.previous_response_id, first.id);
    assert.equal(second.usage.input_tokens, chained.input_tokens);
    // Chains go on: the second response is stored too.
    const third = await client.responses.inputTokens.count({ model: 'small', input: 'Thanks',
      previous_response_id: second.id });
    assert.ok(third.input_tokens > chained.input_tokens);

    const unstored = await client.responses.create({ model: 'small', input: 'x', store: false, max_output_tokens: 2 });
    assert.equal(unstored.store, false);
    await assert.rejects(client.responses.create({ model: 'small', input: 'y', previous_response_id: unstored.id }),
      (err) => err.status === 400 && err.code === 'previous_response_not_found' && err.param === 'previous_response_id');
  });

  test('a forced function call comes back as a function_call item and its output is answered', async () => {
    const tool = { ...weatherTool, parameters: { type: 'object', required: ['city'],
      properties: { city: { type: 'string', maxLength: 20 } } } };
    const r = await client.responses.create({ model: 'small', input: 'Weather in Paris?', tools: [tool],
      tool_choice: { type: 'function', name: 'get_weather' }, parallel_tool_calls: false, max_output_tokens: 2000 });
    assert.equal(r.status, 'completed');
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'get_weather');
    assert.match(calls[0].id, /^fc_/);
    assert.equal(calls[0].status, 'completed');
    assert.equal(typeof JSON.parse(calls[0].arguments).city, 'string');
    // Answer it by chaining: the stored turn holds the call, the input its output.
    const next = await client.responses.create({ model: 'small', previous_response_id: r.id, tools: [tool],
      input: [{ type: 'function_call_output', call_id: calls[0].call_id, output: 'Sunny, 24 C' }],
      max_output_tokens: 5, logit_bias: NO_EOS });
    assert.equal(next.status, 'incomplete');
    assert.equal(next.output[0].type, 'message');

    // Streaming: the arguments arrive through function_call_arguments events.
    const events = [];
    const stream = await client.responses.create({ model: 'small', input: 'Weather?', tools: [tool], stream: true,
      tool_choice: 'required', max_output_tokens: 2000 });
    for await (const ev of stream) events.push(ev);
    const done = events.find((e) => e.type === 'response.function_call_arguments.done');
    assert.ok(done, events.map((e) => e.type).join(' '));
    // Parallel calls are allowed here: compare the deltas of the call that `done` closes.
    const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta' &&
      e.item_id === done.item_id).map((e) => e.delta).join('');
    assert.equal(deltas, done.arguments);
    const final = events.at(-1);
    assert.equal(final.type, 'response.completed');
    const item = final.response.output.find((o) => o.type === 'function_call');
    assert.equal(item.id, done.item_id);
    assert.equal(item.arguments, done.arguments);
  });

  test('text.format json_schema constrains the answer', async () => {
    const schema = { type: 'object', required: ['name', 'age'], additionalProperties: false,
      properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 } } };
    const r = await client.responses.create({ model: 'small', input: 'A person, please.', max_output_tokens: 2000,
      text: { format: { type: 'json_schema', name: 'person', schema, strict: true } } });
    assert.equal(r.status, 'completed');
    const v = JSON.parse(r.output_text);
    assert.deepEqual(Object.keys(v).sort(), ['age', 'name']);
    assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120);
    assert.equal(typeof v.name, 'string');
    const obj = await client.responses.create({ model: 'small', input: 'JSON!', max_output_tokens: 2000,
      text: { format: { type: 'json_object' } } });
    assert.equal(typeof JSON.parse(obj.output_text), 'object');
  });

  test('chat completions input_tokens counts like llama-server', async () => {
    const r = await fetch(`${srv.url}/v1/chat/completions/input_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'small', messages: [{ role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello there' }] }),
    });
    assert.equal(r.status, 200);
    const body = await r.json();
    assert.equal(body.object, 'response.input_tokens');
    const same = await client.responses.inputTokens.count({ model: 'small', input: 'Hello there',
      instructions: 'Be brief.' });
    assert.equal(body.input_tokens, same.input_tokens);
    const chat = await client.chat.completions.create({ model: 'small', max_tokens: 1,
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }] });
    assert.equal(chat.usage.prompt_tokens, body.input_tokens);
  });

  test('an input over the context is 400 context_length_exceeded naming input (not chat\'s messages)', async () => {
    const r = await fetch(`${srv.url}/v1/responses`, {
      method: 'POST',
      body: JSON.stringify({ model: 'small', input: 'hello '.repeat(6000), max_output_tokens: 4 }),
    });
    assert.equal(r.status, 400);
    const e = (await r.json()).error;
    assert.equal(e.code, 'context_length_exceeded');
    assert.equal(e.param, 'input');
  });

  test('refusals: bad formats, unknown tools, non-function tools, unknown model, bad types', async () => {
    const bad = async (params, status, code, param) => {
      await assert.rejects(client.responses.create({ model: 'small', ...params }), (err) => {
        assert.equal(err.status, status);
        if (code) assert.equal(err.code, code);
        if (param) assert.equal(err.param, param);
        return true;
      });
    };
    await bad({ input: 'x', text: { format: { type: 'xml' } } }, 400, 'invalid_value', 'text.format.type');
    await bad({ input: 'x', text: { format: { type: 'json_schema', name: 'n', schema: { type: 'object',
      properties: { a: { type: 'string', pattern: '(?=x)' } } } } } }, 400, 'unsupported_schema', 'text.format.schema');
    await bad({ input: 'x', tools: [{ type: 'function', name: 'a' }], tool_choice: { type: 'function', name: 'b' } },
      400, null, 'tool_choice');
    await bad({ input: 'x', tools: [{ type: 'web_search' }] }, 400, 'unsupported_value', 'tools[0]');
    await bad({ input: 42 }, 400, 'invalid_type', 'input');
    await bad({ input: 'x', max_output_tokens: 'many' }, 400, 'invalid_type', 'max_output_tokens');
    await bad({ input: [{ type: 'function_call', call_id: 'c', name: 'n', arguments: {} }] }, 400, 'invalid_type',
      'input[0].arguments');
    await bad({ input: 'x', model: 7 }, 400, 'invalid_type', 'model');
  });
});
