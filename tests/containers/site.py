"""A source directory tree for the container tests, the distribute request that carries it, and
the comparison of a subscriber's export with it, byte for byte.

Nodes follow the publisher's directory content source (publisher/distribute/content_source.py): a
folder is ``nt:folder``, a file ``nt:file`` with its bytes in ``jcr:data`` and its modification time
in ``jcr:lastModified``. Those are exactly the properties ``scd content export`` turns back into
files and directories without sidecars, so the exported tree must equal the source tree.
"""

from __future__ import annotations

import base64
import datetime as dt
import filecmp
import os
import random
from pathlib import Path
from typing import Any

# The publisher's defaults (publisher/settings.py): binaries above 16 KiB are stored once in
# the blob store and referenced; a package above 800 KiB is spilled to the blob store.
BINARY_THRESHOLD_BYTES = 16 * 1024
INLINE_PACKAGE_LIMIT_BYTES = 800 * 1024
# Files of exactly the threshold stay inline; random bytes do not compress: this many of them
# take a package past the inline limit.
SPILL_FILES = INLINE_PACKAGE_LIMIT_BYTES // BINARY_THRESHOLD_BYTES + 4
# The deep tree: sections x pages x parts folders below the root, files in each.
SECTIONS, PAGES, PARTS = 3, 3, 2
LARGE_FILE_SHARE = 0.25


def _file(path: Path, data: bytes, mtime_ms: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def make_deep_tree(target: Path, rng: random.Random) -> None:
    """Five levels of folders with small (inline) and large (by reference) files."""
    base_ms = 1_700_000_000_000
    for s in range(SECTIONS):
        for p in range(PAGES):
            for c in range(PARTS):
                folder = target / f"s{s}" / f"p{p}" / f"c{c}"
                folder.mkdir(parents=True, exist_ok=True)
                for f in range(2):
                    if rng.random() < LARGE_FILE_SHARE:
                        size = rng.randrange(BINARY_THRESHOLD_BYTES + 1, 8 * BINARY_THRESHOLD_BYTES)
                        name = f"f{f}.bin"
                    else:
                        size = rng.randrange(0, 4096)
                        name = f"f{f}.txt"
                    _file(folder / name, rng.randbytes(size), base_ms + rng.randrange(10**9))
            _file(target / f"s{s}" / f"p{p}" / "index.txt", rng.randbytes(100), base_ms)


def make_spill_tree(target: Path, rng: random.Random) -> None:
    """Files of exactly the threshold (inline), enough to spill the package."""
    for i in range(SPILL_FILES):
        _file(target / f"part{i:03d}.bin", rng.randbytes(BINARY_THRESHOLD_BYTES), 1_700_000_000_000)


def _date(ms: int) -> dict[str, Any]:
    iso = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")
    return {"type": "date", "value": iso}


def node_specs(source: Path, path: str) -> list[dict[str, Any]]:
    """The request nodes of ``source`` mounted at repository ``path``, parents first."""
    specs: list[dict[str, Any]] = [{"path": path, "properties": {"jcr:primaryType": "nt:folder"}}]
    for entry in sorted(source.iterdir()):
        child = f"{path}/{entry.name}"
        if entry.is_dir():
            specs.extend(node_specs(entry, child))
        else:
            mtime_ms = entry.stat().st_mtime_ns // 1_000_000
            specs.append(
                {
                    "path": child,
                    "properties": {
                        "jcr:primaryType": "nt:file",
                        "jcr:data": {
                            "type": "binary",
                            "base64": base64.b64encode(entry.read_bytes()).decode(),
                            "contentType": "application/octet-stream",
                        },
                        "jcr:lastModified": _date(mtime_ms),
                    },
                }
            )
    return specs


def deep_add(source: Path, path: str, metadata: dict[str, str]) -> dict[str, Any]:
    """POST /distribute body: a deep ADD of ``path`` carrying the whole source tree."""
    return {
        "action": "ADD",
        "deepPaths": [path],
        "nodes": node_specs(source, path),
        "metadata": metadata,
    }


def large_files(source: Path) -> int:
    return sum(
        1 for f in source.rglob("*") if f.is_file() and f.stat().st_size > BINARY_THRESHOLD_BYTES
    )


def tree_differences(expected: Path, actual: Path, limit: int = 10) -> list[str]:
    """Paths whose presence, kind or bytes differ between two trees (empty: equal)."""
    out: list[str] = []

    def walk(cmp: filecmp.dircmp[str], rel: str) -> None:
        for name in cmp.left_only:
            out.append(f"missing: {rel}{name}")
        for name in cmp.right_only:
            out.append(f"unexpected: {rel}{name}")
        for name in cmp.common_funny + cmp.common_files:
            left, right = Path(cmp.left) / name, Path(cmp.right) / name
            if not (left.is_file() and right.is_file()):
                out.append(f"kind differs: {rel}{name}")
            elif left.read_bytes() != right.read_bytes():
                out.append(f"bytes differ: {rel}{name}")
        for name, sub in sorted(cmp.subdirs.items()):
            walk(sub, f"{rel}{name}/")

    walk(filecmp.dircmp(expected, actual, ignore=[]), "")
    return out[:limit]
