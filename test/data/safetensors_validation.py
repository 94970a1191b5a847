"""Reference verdicts of the safetensors library (Rust, via its Python package) on valid and
corrupt safetensors files, for test/hub_safetensors_validation.test.ts.

Writes safetensors_validation.json: a list of {"case", "file" (base64 of the whole file),
"ok" (the library loads it), "error" (its message otherwise), "tensors" ([name, dtype, shape,
[begin, end]] in header order when ok)}. The cases are hand-made ones, one per rule, and seeded
random mutations of valid files (offsets, shapes, dtypes, fields, metadata, header bytes, header
length, truncation, trailing bytes). Run: /tmp/reference-venv/bin/python safetensors_validation.py
"""
import base64
import json
import random
import struct
from pathlib import Path

from safetensors import deserialize

DTYPES = ["F32", "F16", "BF16", "I32", "I64", "BOOL", "U8", "F64", "F4", "F99", "f32", ""]


def pack(header, data, pad=True, length=None):
    text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    if pad:
        text += " " * ((8 - (8 + len(text.encode())) % 8) % 8)
    raw = text.encode()
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def tensors(specs):
    """specs: [(name, dtype, shape, nbytes)] laid out back to back -> (header, data)."""
    header, off = {}, 0
    for name, dtype, shape, nbytes in specs:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    return header, bytes((i * 37 + 11) & 255 for i in range(off))


def base_files():
    h, d = tensors([("w", "F32", [2, 3], 24), ("b", "BF16", [4], 8), ("n", "F16", [3], 6), ("i", "I64", [1], 8)])
    h["__metadata__"] = {"format": "pt"}
    yield "valid, padded", pack(h, d)
    h, d = tensors([("flag", "BOOL", [3], 3), ("x", "F32", [2], 8), ("e", "F32", [0, 5], 0), ("s", "I32", [], 4)])
    yield "valid, unaligned (unpadded header)", pack(h, d, pad=False)


def hand_made():
    h, d = tensors([("x", "F32", [2], 8), ("y", "F32", [2], 8)])
    over = json.loads(json.dumps(h))
    over["y"]["data_offsets"] = [4, 12]
    yield "overlap", pack(over, d[:12])
    hole = json.loads(json.dumps(h))
    hole["y"]["data_offsets"] = [12, 20]
    yield "hole", pack(hole, d + b"\0" * 4)
    swapped = json.loads(json.dumps(h))
    swapped["x"]["data_offsets"], swapped["y"]["data_offsets"] = [8, 16], [0, 8]
    yield "out of header order, still tiling", pack(swapped, d)
    yield "trailing bytes", pack(h, d + b"\0")
    yield "truncated data", pack(h, d[:-1])
    yield "size mismatch", pack({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, d[:8])
    yield "negative shape", pack({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, d[:4])
    yield "unknown dtype", pack({"x": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}}, d[:4])
    yield "metadata not strings", pack({"__metadata__": {"a": 1}, "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, d[:4])
    yield "header not JSON", pack("{oops", b"")
    yield "header not starting with {", pack(' {"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', d[:4], pad=False)
    yield "header length beyond the file", pack({}, b"", length=1_000_000)
    yield "header length over 100 MB", pack({}, b"", length=100_000_001)
    yield "invalid UTF-8", pack(b'{"\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'.decode("latin-1"), d[:4], pad=False).replace(b"\xc3\xbf", b"\xff")
    yield "missing field", pack({"x": {"dtype": "F32", "shape": [1]}}, d[:4])
    yield "reversed offsets", pack({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, d[:4])
    yield "sub-byte dtype not a whole byte", pack({"x": {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]}}, d[:1])
    yield "empty header object", pack({}, b"")
    yield "file shorter than 8 bytes", b"\x01\x02\x03"


def mutate(rng, name, blob):
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    names = [k for k in header if k != "__metadata__"]
    kind = rng.randrange(12)
    t = header[rng.choice(names)]
    if kind == 0:
        t["data_offsets"][rng.randrange(2)] += rng.choice([-8, -2, -1, 1, 2, 8])
    elif kind == 1:
        a, b = rng.sample(names, 2)
        header[a]["data_offsets"], header[b]["data_offsets"] = header[b]["data_offsets"], header[a]["data_offsets"]
    elif kind == 2:
        t["shape"] = rng.choice([[-1], [0], [2 ** 40], [1.5], ["2"], [3, 0], [], None, [2 ** 53 + 1]])
    elif kind == 3:
        t["dtype"] = rng.choice(DTYPES)
    elif kind == 4:
        del t[rng.choice(["dtype", "shape", "data_offsets"])]
    elif kind == 5:
        header["__metadata__"] = rng.choice([{"a": 1}, ["x"], None, {"k": "v"}, "s", {"k": None}])
    elif kind == 6:
        header[rng.choice(names)] = rng.choice([1, "x", [], None, {}])
    elif kind == 7:
        t["data_offsets"] = rng.choice([[0], [0, 4, 8], [-4, 0], "0,4", [0.5, 4], None])
    elif kind == 8:
        raw = bytearray(blob)
        raw[8 + rng.randrange(n)] = rng.randrange(256)
        return f"{name}: header byte changed", bytes(raw)
    elif kind == 9:
        return f"{name}: header length changed", struct.pack("<Q", max(0, n + rng.choice([-9, -1, 1, 7, 2 ** 40]))) + blob[8:]
    elif kind == 10:
        return f"{name}: truncated", blob[:rng.randrange(len(blob))]
    else:
        return f"{name}: trailing bytes", blob + bytes(rng.randrange(1, 9))
    return f"{name}: header field changed ({kind})", pack(header, data)


def main():
    rng = random.Random(20261130)
    cases = list(base_files()) + list(hand_made())
    bases = list(base_files())
    for _ in range(150):
        name, blob = rng.choice(bases)
        cases.append(mutate(rng, name, blob))
    out = []
    for case, blob in cases:
        entry = {"case": case, "file": base64.b64encode(blob).decode()}
        try:
            loaded = deserialize(blob)
            n = struct.unpack("<Q", blob[:8])[0]
            header = json.loads(blob[8:8 + n])
            entry.update(ok=True, tensors=[[k, v["dtype"], v["shape"], header[k]["data_offsets"]] for k, v in loaded])
        except Exception as e:  # the library's SafetensorError (or a struct error for < 8 bytes)
            entry.update(ok=False, error=str(e))
        out.append(entry)
    Path(__file__).with_suffix(".json").write_text(json.dumps(out, indent=0) + "\n")
    print(f"{len(out)} cases, {sum(e['ok'] for e in out)} load")


main()
