"""The Rust `tokenizers` crate's Precompiled normalizer (nmt_nfkc charsmap) and ids on strings that
tokenizers.js' NFKC approximation gets wrong, with the flux_tiny T5 tokenizer.json. Run from the
project root with the reference venv:
    /tmp/reference-venv/bin/python test/data/t5_precompiled.py > test/data/t5_precompiled.json
"""
import json

import tokenizers
from tokenizers import Tokenizer

STRINGS = [
    "ﬁne ﬂower", "①②③ ⅫⅣ", "㎏ ㎞ ㍻", "ＡＢＣ ａｂｃ １２３", "e\u0301 a\u0308 n\u0303",
    "zero\u200bwidth\u200djoin\u200c", "soft\u00adhyphen", "bell\u0007tab\tcr\r", "ideo\u3000space nb\u00a0sp",
    "wave\uff5etilde～x", "dots… “quotes” ‘single’", "meta\u2581space", "emoji 👩‍👩‍👧 🐿️ 👍🏽", "한국어 ㄱㄴ",
    "ｶﾀｶﾅ ﾊﾟ", "x\ufeffbom\ufffdrep", "line\u2028sep\u2029para", "A\u030a\u0323 q\u0307\u0323", "µ Ω K Å",
    "¼ ½ ²³", "\u0000nul", "ǅ ǈ ǋ", "e\u0301\u0301\u0301\u0301\u0301 long",
]
tok = Tokenizer.from_file("../shared/fixtures/diffusers/flux_tiny/tokenizer_2/tokenizer.json")
print(json.dumps({"tokenizers": tokenizers.__version__, "cases": [
    {"text": s, "normalized": tok.normalizer.normalize_str(s), "ids": tok.encode(s).ids} for s in STRINGS]}, ensure_ascii=False, indent=0))
