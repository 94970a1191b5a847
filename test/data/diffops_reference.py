"""PyTorch reference values for tsorch's image ops (test/diffops_torch.test.ts).

Run: /tmp/reference-venv/bin/python test/data/diffops_reference.py > test/data/diffops_reference.json
Inputs are small seeded tensors; every tensor is stored as {"shape", "values"} (flat, float32
values as Python floats). Half-precision weights are stored as their rounded values.
"""
import json

import torch
import torch.nn.functional as F

torch.manual_seed(0)


def t(x):
    return {"shape": list(x.shape), "values": [float(v) for v in x.detach().float().flatten().tolist()]}


cases = []

x = torch.randn(1, 4, 7, 6)
w = torch.randn(6, 2, 3, 3)
b = torch.randn(6)
cases.append({"op": "conv2d", "name": "groups 2, stride [2,1], padding [1,2], dilation [1,2]",
              "x": t(x), "w": t(w), "b": t(b), "opts": {"stride": [2, 1], "padding": [1, 2], "dilation": [1, 2], "groups": 2},
              "out": t(F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2))})

x = torch.randn(2, 4, 5, 5)
w = torch.randn(3, 4, 3, 3).half()
cases.append({"op": "conv2d", "name": "float16 weight, stride 2, padding 1", "wDtype": "float16",
              "x": t(x), "w": t(w), "b": None, "opts": {"stride": 2, "padding": 1},
              "out": t(F.conv2d(x, w.float(), None, stride=2, padding=1))})

x = torch.randn(2, 6, 3, 4) * 3 + 1
w = torch.randn(6)
b = torch.randn(6)
cases.append({"op": "groupNorm", "name": "3 groups, eps 1e-6", "x": t(x), "w": t(w), "b": t(b), "groups": 3, "eps": 1e-6,
              "out": t(F.group_norm(x, 3, w, b, 1e-6))})

x = torch.randn(1, 2, 5, 7)
for opts in ({"size": [9, 11]}, {"scaleFactor": 1.7}, {"scaleFactor": [2, 3]}, {"size": [3, 4]}, {"scaleFactor": 0.6}):
    kw = {"size": tuple(opts["size"])} if "size" in opts else {"scale_factor": opts["scaleFactor"] if isinstance(opts["scaleFactor"], float) else tuple(float(v) for v in opts["scaleFactor"])}
    cases.append({"op": "interpolate", "name": f"nearest {opts}", "x": t(x), "opts": {**opts, "mode": "nearest"},
                  "out": t(F.interpolate(x, mode="nearest", **kw))})

x = torch.randn(1, 2, 3)
cases.append({"op": "pad", "name": "(1, -1, 2, 0), value 0.5", "x": t(x), "pads": [1, -1, 2, 0], "value": 0.5,
              "out": t(F.pad(x, (1, -1, 2, 0), value=0.5))})

names = {"Conv2d": sorted(torch.nn.Conv2d(4, 6, 3, groups=2).state_dict().keys()),
         "GroupNorm": sorted(torch.nn.GroupNorm(2, 4).state_dict().keys())}
print(json.dumps({"torch": torch.__version__, "cases": cases, "stateDictNames": names}))
