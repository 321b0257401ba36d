"""Regenerate the Python protobuf code in journal/wire/ from the .proto files in proto/.

    python proto/generate.py            # writes journal/wire/*_pb2.py(i) in this checkout
    python proto/generate.py --out DIR  # writes under DIR instead (used by the drift test)

The .proto files live under proto/ at the same relative path as the Python package they
generate into, so the generated imports (``from journal.wire import journal_pb2``) resolve.
Needs grpcio-tools (a test dependency), whose bundled protoc fixes the generated code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Run protoc on every .proto under proto/; return the generated files."""
    from grpc_tools import protoc  # imported here: only needed when generating

    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *(str(p) for p in proto_files()),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(
        out_dir / p.relative_to(PROTO_ROOT).with_name(p.stem + suffix)
        for p in proto_files()
        for suffix in ("_pb2.py", "_pb2.pyi")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT, help="output root")
    for path in generate(parser.parse_args().out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
