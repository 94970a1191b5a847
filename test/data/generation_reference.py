"""Reference outputs of transformers' generate() for test/generation_config.test.ts and test/cli_generate.test.ts.

Run: /tmp/reference-venv/bin/python test/data/generation_reference.py  (writes generation_reference.json beside it)

Every case loads a copy of a ../shared checkpoint (stories260K or the tiny GPT-2 fixture) whose config.json and
generation_config.json get the case's overrides, calls model.generate(input_ids, **kwargs) and records the new
token ids and why generation ended, or the error transformers raised. The tests rebuild the same folders.
"""
import json
import os
import shutil
import tempfile
import warnings

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging

logging.set_verbosity_error()
warnings.filterwarnings("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.abspath(os.path.join(HERE, "..", "..", "..", "shared"))
MODELS = {
    "stories260K": os.path.join(SHARED, "models", "stories260K"),
    "gpt2": os.path.join(SHARED, "fixtures", "tiny", "gpt2"),
}

stories = json.load(open(os.path.join(MODELS["stories260K"], "expected.json")))
STORY = stories["greedy_from_bos"]["new_ids"]  # 200 ids of a story
ONCE = stories["generation"][0]["input_ids"]  # "Once upon a time" = [1, 403, 407, 261, 378]


def long_prompt(n):
    ids = [1]
    while len(ids) < n:
        ids += STORY
    return ids[:n]


def model_dir(model, config, generation_config):
    src = MODELS[model]
    dst = tempfile.mkdtemp(prefix="tsorch-genref-")
    for f in os.listdir(src):
        if f != "expected.json":
            shutil.copy(os.path.join(src, f), dst)
    for name, extra in (("config.json", config), ("generation_config.json", generation_config)):
        path = os.path.join(dst, name)
        data = json.load(open(path)) if os.path.exists(path) else {}
        data.update(extra)
        json.dump(data, open(path, "w"))
    return dst


def case(name, model="stories260K", prompt=ONCE, config={}, generation_config={}, kwargs={}, tokenizer=False, attention_mask=None):
    d = model_dir(model, config, generation_config)
    m = AutoModelForCausalLM.from_pretrained(d)
    tok = AutoTokenizer.from_pretrained(d) if tokenizer else None
    batch = isinstance(prompt[0], list)
    ids = torch.tensor(prompt if batch else [prompt])
    extra = {"tokenizer": tok} if tok else {}
    if attention_mask is not None:
        extra["attention_mask"] = torch.tensor(attention_mask)
    out = {"name": name, "model": model, "config": config, "generation_config": generation_config,
           "prompt": prompt, "attention_mask": attention_mask, "kwargs": kwargs, "tokenizer": tokenizer}
    try:
        seqs = m.generate(ids, **kwargs, **extra)
    except Exception as e:  # the error transformers raises: tsorch must refuse too
        out["error"] = f"{type(e).__name__}: {e}"
        print(name, "->", out["error"][:120])
        shutil.rmtree(d)
        return out
    gc = m.generation_config
    eos = kwargs.get("eos_token_id", gc.eos_token_id)
    eos = set(eos if isinstance(eos, list) else [eos])
    stops = kwargs.get("stop_strings", gc.stop_strings) or []
    stops = [stops] if isinstance(stops, str) else stops
    new_rows, reasons = [], []
    for row in seqs[:, ids.shape[1]:].tolist():
        cut = next((i + 1 for i, t in enumerate(row) if t in eos), None)
        if cut is not None:
            row, reason = row[:cut], "eos"
        elif stops and len(row) < kwargs["max_new_tokens"]:  # stopped before its budget: a stop string
            reason = "stop_string"
        else:
            reason = "length"
        new_rows.append(row)
        reasons.append(reason)
    if kwargs.get("do_sample", gc.do_sample):
        # Sampling cases use settings that leave one candidate token per step, so any RNG gives these ids.
        torch.manual_seed(1234)
        again = m.generate(ids, **kwargs, **extra)
        assert torch.equal(again, seqs), f"{name}: sampling is not deterministic"
    out["new_ids"] = new_rows if batch else new_rows[0]
    out["padded"] = seqs[:, ids.shape[1]:].tolist() if batch else None
    out["finish_reason"] = reasons if batch else reasons[0]
    print(name, "->", len(new_rows[0]), "tokens,", out["finish_reason"])
    shutil.rmtree(d)
    return out


P12 = long_prompt(12)
P501 = long_prompt(501)
P600 = long_prompt(600)
TINY_PROMPT = [5] * 250
cases = [
    # Length: generation_config max_length (prompt + new) when max_new_tokens is absent.
    case("gc max_length 12, 1-token prompt", prompt=[1], generation_config={"max_length": 12}),
    case("gc max_length 12, prompt already 12 tokens", prompt=P12, generation_config={"max_length": 12}),
    case("explicit max_length beats gc max_length", prompt=[1], generation_config={"max_length": 12}, kwargs={"max_length": 8}),
    case("explicit max_new_tokens beats gc max_length", prompt=[1], generation_config={"max_length": 12}, kwargs={"max_new_tokens": 3}),
    case("gc max_new_tokens beats explicit max_length (transformers)", prompt=[1], generation_config={"max_new_tokens": 5}, kwargs={"max_length": 12}),
    case("gc max_new_tokens", prompt=[1], generation_config={"max_new_tokens": 5}),
    case("explicit max_new_tokens beats gc max_new_tokens", prompt=[1], generation_config={"max_new_tokens": 5}, kwargs={"max_new_tokens": 3}),
    case("max_new_tokens 0 is refused", kwargs={"max_new_tokens": 0}),
    # Rope models are not capped at max_position_embeddings when the length is explicit.
    case("501-token prompt, max_new_tokens 64, 512 positions", prompt=P501, kwargs={"max_new_tokens": 64}),
    case("501-token prompt, default length: prompt + 20 capped at 512", prompt=P501),
    case("600-token prompt, default length is refused", prompt=P600),
    case("600-token prompt, max_new_tokens 8", prompt=P600, kwargs={"max_new_tokens": 8}),
    case("dynamic rope beyond max_position_embeddings", prompt=long_prompt(100),
         config={"max_position_embeddings": 64, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, kwargs={"max_new_tokens": 8}),
    # Learned positions (GPT-2 n_positions 256): the last new token needs no position of its own.
    case("gpt2: 250 + 6 new tokens fit 256 positions", model="gpt2", prompt=TINY_PROMPT, kwargs={"max_new_tokens": 6}),
    case("gpt2: 256 + 1 new token fits", model="gpt2", prompt=[5] * 256, kwargs={"max_new_tokens": 1}),
    case("gpt2: 250 + 10 new tokens exceed n_positions", model="gpt2", prompt=TINY_PROMPT, kwargs={"max_new_tokens": 10}),
    case("gpt2: 257-token prompt exceeds n_positions", model="gpt2", prompt=[5] * 257, kwargs={"max_new_tokens": 1}),
    case("gpt2: default length capped at n_positions", model="gpt2", prompt=TINY_PROMPT),
    # Sampling parameters are validated only when sampling; explicit arguments beat generation_config.json.
    case("gc temperature 0.0 without sampling is greedy", generation_config={"temperature": 0.0, "do_sample": False}, kwargs={"max_new_tokens": 8}),
    case("gc temperature 0.0 with sampling is refused", generation_config={"temperature": 0.0, "do_sample": True}, kwargs={"max_new_tokens": 8}),
    case("explicit do_sample false beats gc sampling", generation_config={"temperature": 0.0, "do_sample": True}, kwargs={"max_new_tokens": 8, "do_sample": False}),
    case("explicit temperature beats gc temperature", generation_config={"temperature": 0.0, "do_sample": True}, kwargs={"max_new_tokens": 8, "temperature": 1e-6}),
    case("gc top_k -1 with sampling is refused", generation_config={"top_k": -1, "do_sample": True}, kwargs={"max_new_tokens": 8}),
    case("explicit top_k beats gc top_k", generation_config={"top_k": -1, "do_sample": True}, kwargs={"max_new_tokens": 8, "top_k": 1}),
    case("gc top_p -0.5 with sampling is refused", generation_config={"top_p": -0.5, "do_sample": True}, kwargs={"max_new_tokens": 8}),
    case("gc top_p -0.5 without sampling is ignored", generation_config={"top_p": -0.5}, kwargs={"max_new_tokens": 8}),
    case("explicit top_p beats gc top_p", generation_config={"top_p": -0.5, "do_sample": True}, kwargs={"max_new_tokens": 8, "top_p": 0.0}),
    case("gc min_p 2 with sampling is refused", generation_config={"min_p": 2.0, "do_sample": True}, kwargs={"max_new_tokens": 8}),
    case("explicit min_p beats gc min_p", generation_config={"min_p": 2.0, "do_sample": True}, kwargs={"max_new_tokens": 8, "min_p": 1.0}),
    case("explicit do_sample true beats gc do_sample false", generation_config={"top_k": 1}, kwargs={"max_new_tokens": 8, "do_sample": True}),
    case("gc repetition_penalty", generation_config={"repetition_penalty": 1.3}, kwargs={"max_new_tokens": 12}),
    case("explicit repetition_penalty beats gc", generation_config={"repetition_penalty": 1.3}, kwargs={"max_new_tokens": 12, "repetition_penalty": 1.0}),
    case("gc repetition_penalty 0 is refused", generation_config={"repetition_penalty": 0.0}, kwargs={"max_new_tokens": 4}),
    case("gc eos_token_id", generation_config={"eos_token_id": 298}, kwargs={"max_new_tokens": 12}),
    case("explicit eos_token_id beats gc", generation_config={"eos_token_id": 298}, kwargs={"max_new_tokens": 12, "eos_token_id": 315}),
    case("gc stop_strings", generation_config={"stop_strings": ["Lily"]}, kwargs={"max_new_tokens": 32}, tokenizer=True),
    case("explicit stop_strings beat gc", generation_config={"stop_strings": ["Lily"]}, kwargs={"max_new_tokens": 32, "stop_strings": ["park"]}, tokenizer=True),
    case("stop string spanning tokens", kwargs={"max_new_tokens": 40, "stop_strings": ["play outside"]}, tokenizer=True),
    case("gc pad_token_id fills finished rows", prompt=[ONCE, [0, 0, 0, 1, 403]], attention_mask=[[1] * 5, [0, 0, 0, 1, 1]],
         generation_config={"pad_token_id": 7, "eos_token_id": 261}, kwargs={"max_new_tokens": 6}),
    case("explicit pad_token_id beats gc", prompt=[ONCE, [0, 0, 0, 1, 403]], attention_mask=[[1] * 5, [0, 0, 0, 1, 1]],
         generation_config={"pad_token_id": 7, "eos_token_id": 261}, kwargs={"max_new_tokens": 6, "pad_token_id": 9}),
]

with open(os.path.join(HERE, "generation_reference.json"), "w") as f:  # one case per line
    f.write('{"reference": %s, "cases": [\n' % json.dumps(f"transformers {transformers.__version__}, torch {torch.__version__}"))
    f.write(",\n".join(json.dumps(c) for c in cases))
    f.write("\n]}\n")
