#!/usr/bin/env python3
"""Fetch torchgen's packaged native_functions.yaml and tags.yaml of PyTorch releases.

Reads only the needed zip members of a manylinux x86_64 torch wheel on PyPI through
HTTP Range requests (the zip central directory sits at the end of the file), so a
~1 GB wheel costs a few MB of traffic. Files are cached outside the repository:

    $OPAL_PYTORCH_YAML (default ~/.cache/opal-pytorch-yaml)/<version>/{native_functions,tags}.yaml

Usage: fetch_pytorch_yaml.py [VERSION ...]   (default: latest patch of 1.13 .. 2.15)
Python 3 standard library only.
"""

import json
import os
import struct
import sys
import urllib.error
import urllib.parse
import urllib.request
import zlib

MEMBERS = {
    "native_functions.yaml": "torchgen/packaged/ATen/native/native_functions.yaml",
    "tags.yaml": "torchgen/packaged/ATen/native/tags.yaml",
}
DEFAULT_VERSIONS = [
    "1.13.1", "2.0.1", "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1",
    "2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0",
]


def cache_dir():
    return os.environ.get("OPAL_PYTORCH_YAML") or os.path.expanduser("~/.cache/opal-pytorch-yaml")


def get(url, start=None, end=None):
    req = urllib.request.Request(url, headers={"User-Agent": "opal-fetch/1"})
    if start is not None:
        req.add_header("Range", f"bytes={start}-{'' if end is None else end}")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def release_files(version):
    """The files of one release; some PyPI mirrors only serve the project-wide JSON
    (with relative file URLs), so fall back to it."""
    base = f"https://pypi.org/pypi/torch/{version}/json"
    try:
        return base, json.loads(get(base))["urls"]
    except urllib.error.HTTPError:
        base = "https://pypi.org/pypi/torch/json"
        return base, json.loads(get(base))["releases"][version]


def wheel_url(version):
    base, files = release_files(version)
    wheels = [u for u in files if u["filename"].endswith(".whl")
              and "x86_64" in u["filename"] and "manylinux" in u["filename"]]
    if not wheels:
        raise RuntimeError(f"no manylinux x86_64 wheel for torch {version}")
    wheels.sort(key=lambda u: u["size"])
    return urllib.parse.urljoin(base, wheels[0]["url"]), wheels[0]["size"]


def central_directory(url, size):
    tail = get(url, max(0, size - 65536 - 22), size - 1)
    eocd = tail.rfind(b"PK\x05\x06")
    if eocd < 0:
        raise RuntimeError("zip end of central directory not found")
    _, _, _, _, entries, cd_size, cd_off, _ = struct.unpack("<IHHHHIIH", tail[eocd:eocd + 22])
    if cd_off == 0xFFFFFFFF or cd_size == 0xFFFFFFFF or entries == 0xFFFF:
        loc = tail.rfind(b"PK\x06\x07", 0, eocd)
        (z64_off,) = struct.unpack("<Q", tail[loc + 8:loc + 16])
        rec = get(url, z64_off, z64_off + 55)
        cd_size, cd_off = struct.unpack("<QQ", rec[40:56])
    return get(url, cd_off, cd_off + cd_size - 1)


def find_members(cd):
    found, i = {}, 0
    wanted = set(MEMBERS.values())
    while i + 46 <= len(cd) and cd[i:i + 4] == b"PK\x01\x02":
        (method,) = struct.unpack("<H", cd[i + 10:i + 12])
        csize, usize = struct.unpack("<II", cd[i + 20:i + 28])
        nlen, elen, clen = struct.unpack("<HHH", cd[i + 28:i + 34])
        (off,) = struct.unpack("<I", cd[i + 42:i + 46])
        name = cd[i + 46:i + 46 + nlen].decode("utf-8", "replace")
        extra = cd[i + 46 + nlen:i + 46 + nlen + elen]
        if name in wanted:
            # ZIP64 extra field holds the 64-bit values that overflowed.
            j = 0
            while j + 4 <= len(extra):
                tag, ln = struct.unpack("<HH", extra[j:j + 4])
                if tag == 1:
                    vals = list(struct.unpack(f"<{ln // 8}Q", extra[j + 4:j + 4 + ln]))
                    if usize == 0xFFFFFFFF:
                        usize = vals.pop(0)
                    if csize == 0xFFFFFFFF:
                        csize = vals.pop(0)
                    if off == 0xFFFFFFFF:
                        off = vals.pop(0)
                j += 4 + ln
            found[name] = (method, csize, off)
        i += 46 + nlen + elen + clen
    return found


def read_member(url, method, csize, off):
    head = get(url, off, off + 29)
    nlen, elen = struct.unpack("<HH", head[26:30])
    start = off + 30 + nlen + elen
    data = get(url, start, start + csize - 1)
    if method == 0:
        return data
    if method == 8:
        return zlib.decompress(data, -15)
    raise RuntimeError(f"unsupported zip compression method {method}")


def fetch(version):
    out = os.path.join(cache_dir(), version)
    if all(os.path.exists(os.path.join(out, f)) for f in MEMBERS):
        return out
    url, size = wheel_url(version)
    members = find_members(central_directory(url, size))
    os.makedirs(out, exist_ok=True)
    for local, member in MEMBERS.items():
        if member not in members:
            raise RuntimeError(f"{member} not in the torch {version} wheel")
        data = read_member(url, *members[member])
        tmp = os.path.join(out, local + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(out, local))
    return out


def main(argv):
    versions = argv or DEFAULT_VERSIONS
    failed = 0
    for v in versions:
        try:
            print(f"{v}: {fetch(v)}")
        except Exception as e:  # report and go on with the other releases
            failed += 1
            print(f"{v}: FAILED: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
