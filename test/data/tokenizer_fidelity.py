"""Reference ids for test/tokenizer_fidelity.test.ts, from transformers' AutoTokenizer.

Each case is a tokenizer folder made from a base tokenizer.json plus edits: stories260K's SentencePiece-style
BPE (../shared/models/stories260K) or a small byte-level BPE trained here (tokenizer_bytelevel.json, committed
next to this script). The edits set the transformers class (tokenizer_config.json's tokenizer_class and
config.json's model_type, which AutoTokenizer both reads), the pre-tokenizer, normalizer, legacy,
add_prefix_space, add_bos_token/add_eos_token and AddedToken flags. For every case and text the JSON records
AutoTokenizer.from_pretrained(folder) ids with and without special tokens, both decodes, and chat template ids.

usage: /tmp/reference-venv/bin/python test/data/tokenizer_fidelity.py   (from the project root; needs ../shared)
"""
import copy
import json
import os
import sys
import tempfile

import tokenizers
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
STORIES = os.path.join(HERE, "../../../shared/models/stories260K")
TINY = os.path.join(HERE, "../../../shared/fixtures/tiny")
BYTELEVEL = os.path.join(HERE, "tokenizer_bytelevel.json")
OUT = os.path.join(HERE, "tokenizer_fidelity.json")

QWEN_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
CORPUS = [
    "Once upon a time there was a little cat. The cat liked to play in the garden with a red ball.",
    "def main():\n    print('hello world')\n    return 42\n",
    "Lily and Ben went to the park. They're happy, aren't they? I'll see, we'd go, you've been.",
    "héllo wörld, naïve café. Ünïcödé 日本語 テキスト 🙂 numbers 12345 67890",
    "  two  spaces\tand tabs\n\nnew lines\r\n",
]


def train_bytelevel() -> None:
    """A 400-token byte-level BPE in Qwen2's layout (NFC, Split regex + ByteLevel, ByteLevel decoder)."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(tokenizers.Regex(QWEN_REGEX), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.save(BYTELEVEL)


def added(id_, content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return dict(id=id_, content=content, single_word=single_word, lstrip=lstrip, rstrip=rstrip, normalized=normalized, special=special)


def decoder_entry(token):
    """An added_tokens_decoder entry of tokenizer_config.json: the token without its id."""
    return {k: v for k, v in token.items() if k != "id"}


LLAMA2_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'].strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'].strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n'"
    " + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
CONVERSATION = [
    {"role": "user", "content": "Hello there"},
    {"role": "assistant", "content": " Once upon a time"},
    {"role": "user", "content": "\nand then?"},
]

COMMON_TEXTS = [
    "", " ", "   ", "\n", "Hello", " Hello", "Hello world", "  Hello   world  ", "Hello\nworld", "\n\nHello\n\n",
    "Hello\tworld", "héllo wörld 🙂", "日本語", "a\u00a0b", "I'll go, they're here", "x  \n  y", "\u00e9 vs e\u0301",
    "12345 678.9", "a\r\nb", "\u2581Hello \u2581", "\ufeffBOM", "<0x41>", "\U0001F9D1\u200D\U0001F4BB",
]
# Enough to tell the classes apart (prefix space, digits, ▁ after an added token) where only the class choice is tested.
CLASS_TEXTS = ["Hello world", " Hello", "12345 678.9", "<s>Hello", "Hello</s> <s> world", "\n\nHello\n\n"]
LLAMA_SPECIAL_TEXTS = [
    "<s>Hello", "<s> Hello", "<s>  Hello", "Hello</s>", "Hello</s><s>world", "Hello</s> <s> world", "</s>\n<s>",
    "<s><s>", "Hi <unk> there", "<s>", " <s>", "<s>\n",
]

with open(os.path.join(STORIES, "tokenizer.json")) as f:
    STORIES_JSON = json.load(f)

LEGACY_NORMALIZER = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
LEGACY_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
STORIES_CONFIG = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "clean_up_tokenization_spaces": False, "tokenizer_class": "LlamaTokenizer"}
METASPACE_ALWAYS = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False}
TOOL_TOKENS = [
    added(512, "<tool>", lstrip=True), added(513, "</tool>", rstrip=True), added(514, "<both>", lstrip=True, rstrip=True),
    added(515, "cat", special=False, single_word=True), added(516, "[N]", special=False, normalized=True),
    added(517, "<plain>", special=False),
]
TOOL_TEXTS = [
    "Hi <tool> x </tool> y", "Hi  <tool>\n\nx\n</tool>\n\ny", "a <both> b", "a<both>b", "a \n <both> \n b",
    "cat", "a cat sat", "concat cats", "the cat.", "(cat)", "cat_cat", "écat", "[N] and [N]x", "x[N]", " <plain> ", "<plain><plain>",
    "<s><tool>Hi</tool></s>",
]
GEMMA_TEXTS = [
    "<bos>Hello", "Hello<eos>", "<start_of_turn>user\nHi<end_of_turn>\n", "  two  spaces", "<bos> <eos>",
]
CHATML_TEXTS = [
    "<|im_start|>user\nHi<|im_end|>\n", "<|im_start|> user", "Hello<|endoftext|>", "<|endoftext|><|endoftext|>", " <|im_end|> ",
]


def stories_case(name, *, tokenizer=None, config=None, model_type="llama", texts=(), chat=None, few_texts=False):
    base_texts = CLASS_TEXTS if few_texts else COMMON_TEXTS + LLAMA_SPECIAL_TEXTS
    return dict(name=name, base="stories", tokenizer=tokenizer or {}, config={**STORIES_CONFIG, **(config or {})},
                model_type=model_type, texts=base_texts + list(texts), chat=chat)


def gemma_edits():
    tokens = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>"), added(512, "<pad>"), added(513, "<bos>"), added(514, "<eos>"),
              added(515, "<start_of_turn>"), added(516, "<end_of_turn>"), added(517, "\t\t", special=False),
              added(518, "my cat", special=False, normalized=True), added(519, " <sp>", special=False)]
    post = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<bos>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [513], "tokens": ["<bos>"]}}}
    return {"added_tokens": tokens, "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}, "pre_tokenizer": None,
            "post_processor": post, "decoder": {"type": "Sequence", "decoders": LEGACY_DECODER["decoders"][:3]}}


GEMMA_CONFIG = {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>", "tokenizer_class": "GemmaTokenizer",
                "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]}
BYTE_CONFIG = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None, "bos_token": None, "tokenizer_class": "Qwen2Tokenizer",
               "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}
GPT2_PRE = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def bytelevel_case(name, *, tokenizer=None, config=None, model_type="qwen2", texts=(), chat=None, few_texts=False):
    base_texts = CLASS_TEXTS if few_texts else COMMON_TEXTS + CHATML_TEXTS
    return dict(name=name, base="bytelevel", tokenizer=tokenizer or {}, config={**BYTE_CONFIG, **(config or {})},
                model_type=model_type, texts=base_texts + list(texts), chat=chat)


def llama3_edits():
    post = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [400], "tokens": ["<|endoftext|>"]}}}
    return {"post_processor": post, "normalizer": None}


# (fixture, base tokenizer, tokenizer_class of the family's Hub checkpoints)
FAMILY_CLASSES = [
    ("llama", "stories", "LlamaTokenizerFast"), ("mistral", "stories", "LlamaTokenizer"), ("mixtral", "stories", "LlamaTokenizer"),
    ("phi3", "stories", "LlamaTokenizer"), ("gemma", "stories", "GemmaTokenizer"), ("gemma2", "stories", "GemmaTokenizer"),
    ("gemma3_text", "stories", "GemmaTokenizer"), ("gemma4", "stories", "GemmaTokenizer"), ("gemma4_moe", "stories", "GemmaTokenizer"),
    ("qwen2", "bytelevel", "Qwen2Tokenizer"), ("qwen3", "bytelevel", "Qwen2Tokenizer"), ("qwen3_moe", "bytelevel", "Qwen2Tokenizer"),
    ("qwen3_5", "bytelevel", "Qwen2Tokenizer"), ("qwen3_5_moe", "bytelevel", "Qwen2Tokenizer"), ("qwen3_5_text", "bytelevel", "Qwen2Tokenizer"),
    ("gpt2", "bytelevel", "GPT2Tokenizer"), ("gpt_oss", "bytelevel", "PreTrainedTokenizerFast"), ("deepseek_v3", "bytelevel", "LlamaTokenizerFast"),
    ("glm4_moe", "bytelevel", "PreTrainedTokenizerFast"), ("smollm3", "bytelevel", "PreTrainedTokenizerFast"),
]

CASES = [
    stories_case("stories260K", chat=LLAMA2_TEMPLATE),
    # The issue's example: Metaspace "always" in tokenizer.json, no legacy key -> transformers' LlamaTokenizer uses legacy=False.
    stories_case("llama-always-no-legacy", tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, chat=LLAMA2_TEMPLATE),
    stories_case("llama-always-legacy-true", tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, config={"legacy": True}),
    stories_case("llama-first-legacy-true", config={"legacy": True}),
    stories_case("llama-no-prefix-space", config={"add_prefix_space": False}),
    stories_case("llama-fast-class", tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, config={"tokenizer_class": "LlamaTokenizerFast"}),
    # Llama 2's original tokenizer.json: Prepend/Replace normalizer and no pre-tokenizer.
    stories_case("llama-legacy-normalizer", tokenizer={"normalizer": LEGACY_NORMALIZER, "pre_tokenizer": None, "decoder": LEGACY_DECODER}),
    stories_case("llama-add-bos-eos-flags", config={"add_bos_token": False, "add_eos_token": True}),
    stories_case("llama-no-post-processor", tokenizer={"post_processor": None}, config={"add_bos_token": True, "add_eos_token": True}),
    stories_case("llama-unk-token-in-model", tokenizer={"model.unk_token": "<unk>", "model.byte_fallback": False}),
    # Same files, but AutoTokenizer picks TokenizersBackend: tokenizer.json as it is.
    stories_case("backend-always", tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, config={"tokenizer_class": "PreTrainedTokenizerFast"}),
    stories_case("phi3-legacy-normalizer", model_type="phi3",
                 tokenizer={"normalizer": LEGACY_NORMALIZER, "pre_tokenizer": None, "decoder": LEGACY_DECODER,
                            "added_tokens": STORIES_JSON["added_tokens"] + [added(512, "<|user|>", rstrip=True), added(513, "<|end|>", rstrip=True)]},
                 texts=["<|user|>\nHi<|end|>\n<|user|>  x", "<s><|user|>Hello"]),
    stories_case("mistral-always", model_type="mistral", tokenizer={"pre_tokenizer": METASPACE_ALWAYS}),
    # Metaspace as the Rust crate reads it: split defaults to true (cut before every ▁, which matters with "▁▁" in the
    # vocabulary), the older add_prefix_space spelling, and prepend_scheme "first" inside a Sequence.
    stories_case("mistral-metaspace-split", model_type="mistral",
                 tokenizer={"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"},
                            "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
                            "model.vocab.\u2581\u2581": 512, "model.vocab.o\u2581": 513, "model.merges+": [["\u2581", "\u2581"], ["o", "\u2581"]]},
                 texts=["a  b", "Hello  world", "hello world", "go   o  x", "<s>  x"]),
    stories_case("mistral-metaspace-no-split", model_type="mistral",
                 tokenizer={"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
                            "model.vocab.\u2581\u2581": 512, "model.vocab.o\u2581": 513, "model.merges+": [["\u2581", "\u2581"], ["o", "\u2581"]]},
                 texts=["a  b", "Hello  world", "hello world", "go   o  x", "<s>  x"]),
    *[stories_case(f"backend-split-{behavior}{'-invert' if invert else ''}", model_type="mistral",
                   tokenizer={"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                       {"type": "Split", "pattern": {"String": " "}, "behavior": behavior, "invert": invert},
                       {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": False}]}},
                   few_texts=True, texts=["a b  c", " x ", "Hello   world", "  "])
      for behavior, invert in [("Removed", False), ("MergedWithPrevious", False), ("MergedWithNext", False), ("Contiguous", False),
                               ("Isolated", True), ("MergedWithNext", True)]],
    stories_case("backend-split-regex-removed", model_type="mistral",
                 tokenizer={"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                     {"type": "Split", "pattern": {"Regex": "\\s+|(?i:HE)"}, "behavior": "Removed", "invert": False},
                     {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False}]}},
                 few_texts=True, texts=["the Hello  world", "\tHEHE"]),
    stories_case("backend-metaspace-add-prefix-space", model_type="mistral",
                 tokenizer={"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}}),
    stories_case("backend-split-then-metaspace-first", model_type="mistral",
                 tokenizer={"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                     {"type": "Digits", "individual_digits": True},
                     {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}]}},
                 texts=["12 apples", "a1b2", "<s>1 x"]),

    stories_case("deepseek-llama-fast-class", model_type="deepseek_v3", tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, config={"tokenizer_class": "LlamaTokenizerFast"}),
    # AutoTokenizer's class choice: tokenizer_class against config.json's model_type (and its tokenizer_class).
    stories_case("no-class-llama-model", few_texts=True, tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, config={"tokenizer_class": None}),
    stories_case("no-class-no-config-json", few_texts=True, tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, config={"tokenizer_class": None}, model_type=None),
    stories_case("class-in-config-json", few_texts=True, tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, config={"tokenizer_class": None},
                 model_type={"model_type": "llama", "tokenizer_class": "LlamaTokenizerFast"}),
    stories_case("gemma-model-llama-class", few_texts=True, tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, model_type="gemma"),
    stories_case("qwen2-model-llama-class", few_texts=True, tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, model_type="qwen2"),
    bytelevel_case("qwen3-model-fast-class", few_texts=True, model_type="qwen3", tokenizer={"pre_tokenizer": GPT2_PRE}, config={"tokenizer_class": "PreTrainedTokenizerFast"}),
    stories_case("gemma-model-no-class", few_texts=True, model_type="gemma", tokenizer={"pre_tokenizer": METASPACE_ALWAYS}, config={"tokenizer_class": None}),
    # Each tiny fixture family (../shared/fixtures/tiny/<family>/config.json as config.json) with its Hub tokenizer_class.
    *[(stories_case if base == "stories" else bytelevel_case)(f"family-{family}", few_texts=True, model_type={"fixture": family},
                                                            tokenizer={"pre_tokenizer": METASPACE_ALWAYS if base == "stories" else GPT2_PRE},
                                                            config={"tokenizer_class": cls})
      for family, base, cls in FAMILY_CLASSES],
    # AddedToken flags, from tokenizer.json (LlamaTokenizer and TokenizersBackend) and from added_tokens_decoder.
    stories_case("llama-added-token-flags", tokenizer={"added_tokens": STORIES_JSON["added_tokens"] + TOOL_TOKENS}, texts=TOOL_TEXTS),
    stories_case("backend-added-token-flags", tokenizer={"added_tokens": STORIES_JSON["added_tokens"] + TOOL_TOKENS},
                 config={"tokenizer_class": "PreTrainedTokenizerFast"}, texts=TOOL_TEXTS),
    stories_case("llama-split-special-tokens", tokenizer={"added_tokens": STORIES_JSON["added_tokens"] + TOOL_TOKENS},
                 config={"split_special_tokens": True}, texts=TOOL_TEXTS),
    # Without added_tokens_decoder, transformers reads the older added_tokens.json (special when named, else normalized).
    *[dict(stories_case(f"{kind}-added-tokens-json", tokenizer={"added_tokens": STORIES_JSON["added_tokens"] + [added(512, "<tool>", lstrip=True)]},
                        config={"tokenizer_class": cls, "additional_special_tokens": ["<extra>"]},
                        texts=["a <tool> b", "a<old>b <extra>c", "x <extra> y<old>"]),
           files={"added_tokens.json": {"<tool>": 512, "<old>": 513, "<extra>": 514}})
      for kind, cls in [("llama", "LlamaTokenizer"), ("backend", "PreTrainedTokenizerFast")]],
    stories_case("llama-added-tokens-decoder", tokenizer={"added_tokens": STORIES_JSON["added_tokens"] + [added(512, "<tool>"), added(513, "</tool>")]},
                 config={"added_tokens_decoder": {str(t["id"]): decoder_entry(t) for t in STORIES_JSON["added_tokens"] + TOOL_TOKENS}}, texts=TOOL_TEXTS),
    stories_case("backend-added-tokens-decoder", tokenizer={"added_tokens": STORIES_JSON["added_tokens"] + [added(512, "<tool>"), added(513, "</tool>")]},
                 config={"tokenizer_class": "PreTrainedTokenizerFast",
                         "added_tokens_decoder": {str(t["id"]): decoder_entry(t) for t in STORIES_JSON["added_tokens"] + TOOL_TOKENS}}, texts=TOOL_TEXTS),
    stories_case("llama-special-token-objects", config={
        "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "rstrip": True, "normalized": False, "single_word": False, "special": True},
        "additional_special_tokens": [{"__type": "AddedToken", "content": "<extra>", "lstrip": True, "rstrip": False, "normalized": False, "single_word": False, "special": True}]},
        texts=["a <extra> b", "<s>  Hello", "x <s>  y"]),
    # A rebuilding class takes its added tokens from added_tokens_decoder when the config has one; TokenizersBackend keeps tokenizer.json's.
    stories_case("llama-json-only-added-token", tokenizer={"added_tokens": STORIES_JSON["added_tokens"] + [added(512, "<tool>"), added(513, "<x>")]},
                 config={"added_tokens_decoder": {str(t["id"]): decoder_entry(t) for t in STORIES_JSON["added_tokens"] + [added(512, "<tool>")]}},
                 texts=["a<x>b <tool>c"]),
    stories_case("backend-json-only-added-token", tokenizer={"added_tokens": STORIES_JSON["added_tokens"] + [added(512, "<tool>"), added(513, "<x>")]},
                 config={"tokenizer_class": "PreTrainedTokenizerFast",
                         "added_tokens_decoder": {str(t["id"]): decoder_entry(t) for t in STORIES_JSON["added_tokens"] + [added(512, "<tool>")]}},
                 texts=["a<x>b <tool>c"]),
    stories_case("llama-new-eos-object", config={"eos_token": {"__type": "AddedToken", "content": "<eot>", "lstrip": False, "rstrip": True,
                                                               "normalized": False, "single_word": False, "special": True}},
                 texts=["Hi<eot>  there", "Hi <eot>\nthere"]),
    stories_case("backend-normalized-token-first", config={"tokenizer_class": "PreTrainedTokenizerFast"},
                 tokenizer={"normalizer": {"type": "Lowercase"}, "added_tokens": STORIES_JSON["added_tokens"] + [added(512, "[n]", special=False, normalized=True)]},
                 texts=["[N]x", "x[N]y", "[N] Hello", " [n]", "<s>[N]"]),
    dict(name="gemma", base="stories", tokenizer=gemma_edits(), config={**GEMMA_CONFIG, "chat_template": GEMMA_TEMPLATE}, model_type="gemma",
         texts=COMMON_TEXTS + GEMMA_TEXTS + ["\t\tx", "a\t\t\tb", "is my cat here", "my  cat", "x <sp>y", "my cat"], chat=GEMMA_TEMPLATE),
    dict(name="gemma3-metaspace", base="stories", tokenizer={**gemma_edits(), "normalizer": None, "pre_tokenizer": METASPACE_ALWAYS},
         config=GEMMA_CONFIG, model_type="gemma3_text", texts=COMMON_TEXTS + GEMMA_TEXTS),
    bytelevel_case("qwen2", chat=CHATML_TEMPLATE),
    bytelevel_case("qwen2-gpt2-pretokenizer", tokenizer={"pre_tokenizer": GPT2_PRE, "normalizer": None}),
    bytelevel_case("qwen2-prefix-space", config={"add_prefix_space": True}),
    bytelevel_case("qwen3", model_type="qwen3", tokenizer={"normalizer": None}),
    bytelevel_case("qwen3_5", model_type="qwen3_5", tokenizer={"pre_tokenizer": GPT2_PRE}, texts=["caf\u00e9s na\u0303o", "\u0915\u093f\u0924\u093e\u092c"]),
    bytelevel_case("gpt2", model_type="gpt2", tokenizer={"pre_tokenizer": GPT2_PRE, "normalizer": None},
                   config={"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}),
    bytelevel_case("gpt2-qwen-files", model_type="gpt2", config={"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": True}),
    bytelevel_case("bytelevel-cleanup-ignored-for-bpe", few_texts=True, config={"clean_up_tokenization_spaces": True}, texts=["a , b . c 'm d n't"]),
    bytelevel_case("bytelevel-cleanup-forced", few_texts=True, texts=["a , b . c 'm d n't"],
                   config={"clean_up_tokenization_spaces": True, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output": True}),
    bytelevel_case("llama3-backend", model_type="llama", tokenizer=llama3_edits(),
                   config={"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>"}, chat=CHATML_TEMPLATE),
    bytelevel_case("bytelevel-added-token-flags", model_type="qwen2",
                   tokenizer={"added_tokens": [added(400, "<|endoftext|>"), added(401, "<|im_start|>", lstrip=True), added(402, "<|im_end|>", rstrip=True),
                                               added(403, "cat", special=False, single_word=True), added(404, "<think>", special=False)]},
                   texts=["a <|im_start|> b <|im_end|> c", "concat cat", "<think>\nx</think>", " <think> "]),
]


def set_path(obj, dotted, value):
    """Sets obj[a][b][c] = value for "a.b.c"; a path ending in "+" appends the list `value` instead."""
    append = dotted.endswith("+")
    keys = dotted.rstrip("+").split(".")
    for k in keys[:-1]:
        obj = obj[k]
    if append:
        obj[keys[-1]] = obj[keys[-1]] + value
    else:
        obj[keys[-1]] = value


def build(case, base_json, folder):
    j = copy.deepcopy(base_json)
    for path, value in case["tokenizer"].items():
        set_path(j, path, value)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(j, f, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({k: v for k, v in case["config"].items() if v is not None or k != "tokenizer_class"}, f, ensure_ascii=False)
    for name, content in case.get("files", {}).items():
        with open(os.path.join(folder, name), "w") as f:
            json.dump(content, f, ensure_ascii=False)
    model_config = case["model_type"] if isinstance(case["model_type"], dict) else {"model_type": case["model_type"]}
    if "fixture" in model_config:
        with open(os.path.join(TINY, model_config["fixture"], "config.json")) as f:
            model_config = json.load(f)
    if case["model_type"] is not None:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(model_config, f)


def main():
    if not os.path.exists(BYTELEVEL):
        train_bytelevel()
    bases = {"stories": STORIES_JSON, "bytelevel": json.load(open(BYTELEVEL))}
    out = dict(reference=f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}", conversation=CONVERSATION, cases=[])
    for case in CASES:
        with tempfile.TemporaryDirectory() as folder:
            build(case, bases[case["base"]], folder)
            tok = AutoTokenizer.from_pretrained(folder)
            encodings = []
            for text in case["texts"]:
                ids = tok(text).input_ids
                plain = tok(text, add_special_tokens=False).input_ids
                # ids_plain and decoded_skip are left out where they equal ids and decoded.
                record = dict(text=text, ids=ids, ids_plain=plain, decoded=tok.decode(ids), decoded_skip=tok.decode(ids, skip_special_tokens=True))
                if record["ids_plain"] == ids:
                    del record["ids_plain"]
                if record["decoded_skip"] == record["decoded"]:
                    del record["decoded_skip"]
                encodings.append(record)
            record = {k: case[k] for k in ("name", "base", "tokenizer", "config", "model_type")}
            if "files" in case:
                record["files"] = case["files"]
            record["transformers_class"] = type(tok).__name__
            record["encodings"] = encodings
            if case.get("chat") is not None:
                record["chat_template"] = case["chat"]
                record["chat_ids"] = tok.apply_chat_template(CONVERSATION, chat_template=case["chat"], add_generation_prompt=True, tokenize=True, return_dict=False)
            out["cases"].append(record)
            print(case["name"], record["transformers_class"], file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
