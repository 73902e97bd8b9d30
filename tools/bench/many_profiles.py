#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a data tree that makes planning cost grow with profiles x capsules if any command
resolves every profile (issue 8, item 10): one catalog of N relu capsules and P small profiles
that all combine it. Time a command on it, e.g.

    python3 tools/bench/many_profiles.py /tmp/many --capsules 20000 --profiles 2000
    time capsule plan --catalogs /tmp/many/catalogs --profiles /tmp/many/profiles \
        --profile p0 --ops relu

Not a test: timings depend on the machine, so they are reported, never asserted.
"""
import argparse
import pathlib

HEAD = """schema = 1
module = "generated"

[defaults]
provider = "reference"
device = "cpu"
trust = "checked"
vjp = "torchlean-tape"
reduction = "n/a"
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "shape checks" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "typed layout" } }
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "generated.values" } }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "generated.vjps" } }
"""

PROFILE = """schema = 1
name = "p{index}"
summary = "generated profile {index}"
device = "cpu"
provider = "auto"
assurance = "checked"
vjp = "torchlean-tape"
lowering = "coalesced"
modules = ["generated"]

[availability]
devices = ["cpu"]
providers = ["reference", "torchlean"]
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--capsules", type=int, default=20000)
    parser.add_argument("--profiles", type=int, default=2000)
    args = parser.parse_args()
    (args.out / "catalogs").mkdir(parents=True, exist_ok=True)
    (args.out / "profiles").mkdir(parents=True, exist_ok=True)
    with open(args.out / "catalogs" / "generated.toml", "w", encoding="utf-8") as catalog:
        catalog.write(HEAD)
        for index in range(args.capsules):
            catalog.write(f'\n[[capsule]]\nname = "generated.relu{index}"\nop = "relu"\n')
    for index in range(args.profiles):
        (args.out / "profiles" / f"p{index}.toml").write_text(PROFILE.format(index=index), encoding="utf-8")


if __name__ == "__main__":
    main()
