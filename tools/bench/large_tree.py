#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a large catalog/profile tree for timing `capsule diff TREE TREE` and `capsule plan`
(issue 8, item 10): one catalog of CAPSULES small checked CPU capsules spread over the ops, and
PROFILES small profiles that all list that module. Usage: large_tree.py DIR [CAPSULES] [PROFILES]"""
import os
import sys

OPS = ["relu", "gelu", "matmul", "softmax", "log_softmax", "layer_norm", "add", "mul", "tanh", "sigmoid"]


def main() -> None:
    root = sys.argv[1]
    capsules = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    profiles = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    os.makedirs(os.path.join(root, "catalogs"), exist_ok=True)
    os.makedirs(os.path.join(root, "profiles"), exist_ok=True)
    with open(os.path.join(root, "catalogs", "big.toml"), "w") as out:
        out.write('schema = 1\nmodule = "big"\n\n[defaults]\nprovider = "reference"\ndevice = "cpu"\n'
                  'trust = "checked"\nvjp = "torchlean-tape"\nreduction = "n/a"\n'
                  'contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "g" } }\n'
                  'contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", '
                  'evidence = { kind = "runtime-guard", name = "l" } }\n'
                  'contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "v" } }\n'
                  'contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", '
                  'evidence = { kind = "test-suite", name = "j" } }\n')
        for i in range(capsules):
            out.write(f'\n[[capsule]]\nname = "big.c{i}"\nop = "{OPS[i % len(OPS)]}"\n')
    for p in range(profiles):
        with open(os.path.join(root, "profiles", f"p{p}.toml"), "w") as out:
            out.write(f'schema = 1\nname = "p{p}"\ndevice = "cpu"\nprovider = "auto"\nassurance = "checked"\n'
                      'vjp = "torchlean-tape"\nlowering = "coalesced"\nmodules = ["big"]\n\n'
                      '[availability]\ndevices = ["cpu"]\nproviders = ["reference", "torchlean"]\n')


if __name__ == "__main__":
    main()
