"""open_checkpoint.py: opens two dtlab checkpoints with the `safetensors` package, as a PyTorch user would, assembles
every full parameter from its pieces (metadata.json says which file and element range holds each), and checks that
the two checkpoints' parameters agree within fp32 tolerance.  Usage: open_checkpoint.py SHARDED_DIR WHOLE_DIR"""
import json
import sys

import torch
from safetensors.torch import load_file


def parameters(step_dir):
    meta = json.load(open(f"{step_dir}/metadata.json"))
    files = {f: load_file(f"{step_dir}/{f}") for f in meta["files"]}
    out = {}
    for name, info in meta["tensors"].items():
        if not name.startswith("param."):
            continue
        flat = torch.cat([files[p["file"]][p["key"]] for p in info["pieces"]])
        out[name[len("param."):]] = flat.view(info["shape"])
    return meta, out


sharded_meta, sharded = parameters(sys.argv[1])
whole_meta, whole = parameters(sys.argv[2])
assert sharded.keys() == whole.keys(), sorted(set(sharded) ^ set(whole))
pieces = sum(len(t["pieces"]) for t in sharded_meta["tensors"].values())
worst = max((sharded[k] - whole[k]).abs().max().item() for k in sharded)
print(f"{len(sharded)} parameters from {pieces} pieces in {len(sharded_meta['files'])} files "
      f"({sharded_meta['strategy']}) vs {len(whole_meta['files'])} files ({whole_meta['strategy']}): "
      f"max |difference| {worst:.3g}")
if worst > 1e-4:
    sys.exit("parameters differ beyond fp32 tolerance")
print("parameters match")
