// A test-only chat template that renders everything the Anthropic and Responses translations
// produce (tools, assistant tool calls, tool results, reasoning), so token counts show each
// piece reached the prompt. `<tool_call>` in it selects the Hermes tool-call parser.
import path from 'node:path';
import { synthModel, SMALL, tmpDir } from './models.mjs';
import { withChatTemplate } from './gguf_template.mjs';

export const TOOL_TEMPLATE = `{%- if tools %}{%- for t in tools %}<tool>{{ t.function.name }}: {{ t.function.description }} {{ t.function.parameters | tojson }}</tool>
{% endfor %}{%- endif %}
{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}
{%- if m.tool_calls %}{%- for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{%- endif %}
{%- if m.tool_call_id %} [result of {{ m.tool_call_id }}]{% endif %}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`;

export function toolTemplateModel() {
  return withChatTemplate(synthModel('small', SMALL), TOOL_TEMPLATE, path.join(tmpDir, 'small-tools.gguf'));
}
