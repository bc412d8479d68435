#!/usr/bin/env python3
"""Reduce cached PyTorch releases' native_functions.yaml to committed test fixtures.

For each release fetched by fetch_pytorch_yaml.py, keeps the entries with something
PyTorch 2.15's file never has: a `func:` string, a key, a flag/enum value, a dispatch
key or a tag (kernel names and per-op lists are ignored), plus every entry they
need to validate: all entries sharing a base operator name (autogen groups, in-place
views) and structured_delegate targets, transitively. Tag names go into a minimal
tags.yaml. Output: codegen/tests/fixtures/pytorch-releases/<version>/.

Usage: reduce_pytorch_yaml.py   (Python 3 standard library only)
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "pytorch-releases")
REFERENCE = "2.15.0"


def cache_dir():
    return os.environ.get("OPAL_PYTORCH_YAML") or os.path.expanduser("~/.cache/opal-pytorch-yaml")


def entries(text):
    """Top-level entries as (normalized text, raw lines)."""
    blocks, cur = [], None
    for line in text.splitlines():
        if line.startswith("- "):
            cur = [line]
            blocks.append(cur)
        elif cur is not None and line.startswith(" "):
            cur.append(line)
    out = []
    for b in blocks:
        kept = [l for l in b if l.strip() and not l.strip().startswith("#")]
        norm = "\n".join(re.sub(r"\s+#.*$", "", l).rstrip() for l in kept)
        out.append((norm, kept))
    return out


PER_OP_VALUES = ("autogen", "structured_delegate", "structured_inherits", "precomputed",
                 "cpp_no_default_args", "ufunc_inner_loop", "dispatch", "tags")


def features(block):
    """What an entry exercises in the loader, independent of kernel names."""
    feats, parent = set(), None
    for l in block:
        body = re.sub(r"\s+#.*$", "", l).rstrip()
        if body.startswith("- func:"):
            feats.add("func:" + body[len("- func:"):].strip())
            continue
        indent = len(body) - len(body.lstrip())
        key, _, value = body.strip().partition(":")
        value = value.strip()
        if indent == 2:
            parent = key
            feats.add("key:" + key)
            if key == "tags":
                for t in value.strip("[]").split(","):
                    feats.add("tag:" + t.strip())
            elif key not in PER_OP_VALUES:
                feats.add(f"kv:{key}:{value}")
        elif parent == "dispatch":
            for k in key.split(","):
                feats.add("dk:" + k.strip())
        elif parent == "tags" and body.strip().startswith("- "):
            feats.add("tag:" + body.strip()[2:].strip())
    return feats


def func_name(block):
    m = re.match(r"- func:\s*(?:\w+::)?([\w.]+)\(", block[0])
    return m.group(1) if m else ""


def base_name(op):
    base = op.split(".")[0]
    base = re.sub(r"^__i?(\w+?)__$", r"\1", base)
    return base.rstrip("_").replace("_functional", "")


def delegate(block):
    for l in block:
        m = re.match(r"\s+structured_delegate:\s*([\w.]+)", l)
        if m:
            return m.group(1)
    return None


def reduce(version, reference):
    src = open(os.path.join(cache_dir(), version, "native_functions.yaml"), encoding="utf-8").read()
    es = entries(src)
    changed = {i for i, (_, b) in enumerate(es) if not features(b) <= reference}
    by_base, by_name = {}, {}
    for i, (_, b) in enumerate(es):
        by_base.setdefault(base_name(func_name(b)), []).append(i)
        by_name[func_name(b)] = i
    keep, todo = set(), list(changed)
    while todo:
        i = todo.pop()
        if i in keep:
            continue
        keep.add(i)
        b = es[i][1]
        todo.extend(by_base.get(base_name(func_name(b)), []))
        d = delegate(b)
        if d in by_name:
            todo.append(by_name[d])
    tags_src = open(os.path.join(cache_dir(), version, "tags.yaml"), encoding="utf-8").read()
    tags = re.findall(r"^- tag:\s*(\S+)", tags_src, re.M)
    out = os.path.join(OUT, version)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "native_functions.yaml"), "w", encoding="utf-8") as f:
        f.write(f"# Reduced from PyTorch {version}'s torchgen/packaged/ATen/native/native_functions.yaml\n")
        f.write(f"# by codegen/tests/tools/reduce_pytorch_yaml.py: the {len(changed)} entries with something\n")
        f.write(f"# {REFERENCE} lacks, plus the entries they need ({len(keep)} in all, of {len(es)}).\n\n")
        for i in sorted(keep):
            f.write("\n".join(es[i][1]) + "\n\n")
    with open(os.path.join(out, "tags.yaml"), "w", encoding="utf-8") as f:
        f.write(f"# Tag names of PyTorch {version}'s tags.yaml (descriptions dropped).\n")
        for t in tags:
            f.write(f"- tag: {t}\n  desc: see PyTorch {version}\n")
    return len(changed), len(keep), len(es)


def main():
    ref_src = open(os.path.join(cache_dir(), REFERENCE, "native_functions.yaml"), encoding="utf-8").read()
    reference = set().union(*(features(b) for _, b in entries(ref_src)))
    for version in sorted(os.listdir(cache_dir())):
        if version == REFERENCE:
            continue
        changed, kept, total = reduce(version, reference)
        print(f"{version}: {changed} changed, {kept} kept of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
