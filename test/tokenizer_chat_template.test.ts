/**
 * applyChatTemplate against transformers. The expected strings and ids were produced with the reference
 * venv (../shared/tools/reference-venv.sh: transformers 5.18) from tokenizer folders made exactly as
 * `chatFolder` makes them: AutoTokenizer.from_pretrained(folder).apply_chat_template(CONVERSATION, …).
 */
import assert from "node:assert/strict";
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { AutoTokenizer, type ChatMessage } from "../src/transformers/index.js";
import { missing, STORIES } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

const skip = missing(STORIES);

/** Llama 2's chat template (bos_token per turn, raise_exception, str.strip()). */
const LLAMA2 = String.raw`{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}`;

/** A Qwen-style ChatML template: whitespace control, tools through tojson, a custom enable_thinking kwarg. */
const CHATML = String.raw`{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools><|im_end|>\n" }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role != 'system' %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}
`;

/** Plain {% %} blocks on their own indented lines: only trim_blocks + lstrip_blocks make this render tidily. */
const BLOCKS = `{% for message in messages %}
  {% if message['role'] == 'user' %}
User: {{ message['content'] }}
  {% else %}
Bot: {{ message['content'] }}{{ eos_token }}
  {% endif %}
{% endfor %}
{% if add_generation_prompt %}
Bot:
{% endif %}
`;

const CONVERSATION: ChatMessage[] = [
  { role: "system", content: "You tell short stories." },
  { role: "user", content: "Once upon a time " },
  { role: "assistant", content: " there was a cat." },
  { role: "user", content: "What did the cat do?" },
];

const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Météo of a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

/** A tokenizer folder under the OS temp dir: stories260K's tokenizer.json, this config, maybe a chat_template.jinja. */
function chatFolder(config: object, jinja?: string): string {
  const dir = tempDir("tsorch-chat-");
  copyFileSync(join(STORIES, "tokenizer.json"), join(dir, "tokenizer.json"));
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config));
  if (jinja !== undefined) writeFileSync(join(dir, "chat_template.jinja"), jinja);
  return dir;
}

const LLAMA2_TEXT =
  "<s>[INST] <<SYS>>\nYou tell short stories.\n<</SYS>>\n\nOnce upon a time [/INST] there was a cat. </s><s>[INST] What did the cat do? [/INST]";

test("a Llama 2 template renders and tokenizes as transformers (no second BOS)", { skip }, async () => {
  const bos = { __type: "AddedToken", content: "<s>", lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
  const tok = await AutoTokenizer.fromPretrained(chatFolder({ bos_token: bos, eos_token: "</s>", unk_token: "<unk>", chat_template: LLAMA2 }));
  assert.equal(tok.applyChatTemplate(CONVERSATION, { tokenize: false }), LLAMA2_TEXT);
  // apply_chat_template(CONVERSATION, tokenize=True, return_dict=False)
  const ids = [
    1, 508, 442, 458, 437, 434, 509, 410, 504, 504, 437, 452, 437, 505, 505, 13, 452, 277, 259, 411, 306, 262, 415, 304, 413, 349, 304, 417, 406, 426,
    13, 504, 504, 492, 437, 452, 437, 505, 505, 13, 13, 441, 416, 331, 407, 261, 378, 410, 508, 492, 442, 458, 437, 434, 509, 383, 286, 261, 280, 294,
    426, 410, 2, 1, 508, 442, 458, 437, 434, 509, 410, 448, 415, 294, 279, 292, 265, 280, 294, 400, 450, 410, 508, 492, 442, 458, 437, 434, 509,
  ];
  assert.deepEqual(tok.applyChatTemplate(CONVERSATION), ids);
  assert.throws(
    () => tok.applyChatTemplate([{ role: "user", content: "a" }, { role: "user", content: "b" }], { tokenize: false }),
    /Conversation roles must alternate user\/assistant\/user\/assistant\/\.\.\./,
  );
});

test("a list of named templates: default, tool_use with tools, a name, extra template kwargs", { skip }, async () => {
  const templates = [{ name: "default", template: LLAMA2 }, { name: "tool_use", template: CHATML }];
  const tok = await AutoTokenizer.fromPretrained(chatFolder({ bos_token: "<s>", eos_token: "</s>", chat_template: templates }));
  assert.equal(tok.applyChatTemplate(CONVERSATION, { tokenize: false, addGenerationPrompt: true }), LLAMA2_TEXT);
  // apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False, add_generation_prompt=True)
  assert.equal(
    tok.applyChatTemplate(CONVERSATION, { tools: TOOLS, tokenize: false, addGenerationPrompt: true }),
    '<|im_start|>system\nYou tell short stories.\n\n# Tools\n\n<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Météo of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n</tools><|im_end|>\n<|im_start|>user\nOnce upon a time <|im_end|>\n<|im_start|>assistant\n there was a cat.<|im_end|>\n<|im_start|>user\nWhat did the cat do?<|im_end|>\n<|im_start|>assistant\n',
  );
  // apply_chat_template(CONVERSATION, chat_template="tool_use", tokenize=False, add_generation_prompt=True, enable_thinking=False)
  assert.equal(
    tok.applyChatTemplate(CONVERSATION, { chatTemplate: "tool_use", tokenize: false, addGenerationPrompt: true, templateKwargs: { enable_thinking: false } }),
    "<|im_start|>system\nYou tell short stories.<|im_end|>\n<|im_start|>user\nOnce upon a time <|im_end|>\n<|im_start|>assistant\n there was a cat.<|im_end|>\n<|im_start|>user\nWhat did the cat do?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
});

test("chat_template.jinja wins over the config's template; trim_blocks and lstrip_blocks apply", { skip }, async () => {
  const tok = await AutoTokenizer.fromPretrained(chatFolder({ bos_token: "<s>", eos_token: "</s>", chat_template: LLAMA2 }, BLOCKS));
  const chat = CONVERSATION.slice(1);
  assert.equal(
    tok.applyChatTemplate(chat, { tokenize: false, addGenerationPrompt: true }),
    "User: Once upon a time \nBot:  there was a cat.</s>\nUser: What did the cat do?\nBot:\n",
  );
  assert.equal(tok.applyChatTemplate(chat, { tokenize: false }), "User: Once upon a time \nBot:  there was a cat.</s>\nUser: What did the cat do?\n");
});

test("a tokenizer without a chat template says so", { skip }, async () => {
  const tok = await AutoTokenizer.fromPretrained(STORIES);
  assert.throws(() => tok.applyChatTemplate(CONVERSATION), /has no chat_template/);
});
