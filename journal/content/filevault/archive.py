"""A FileVault package's zip, read within bounds: at most MAX_ENTRIES entries and a total
inflated size the caller sets (a zip bomb stops there, whatever its entries declare); entry
names that could escape the package (absolute, ``..``, backslashes, drive letters, NUL) or that
occur twice are refused; encrypted entries are refused. Written deterministically (fixed
timestamps, sorted entries, deflate at FileVault's "best speed").
"""

from __future__ import annotations

import io
import zipfile
import zlib

from runtime.errors import DecodeError

MAX_ENTRIES = 250_000
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def _check_name(name: str) -> str:
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or "\x00" in name
        or (len(name) > 1 and name[1] == ":")
        or any(part in ("..", ".") for part in name.split("/"))
    ):
        raise DecodeError(f"zip entry name {name[:200]!r} is unsafe (absolute or traversing)")
    return name


def read_entries(data: bytes, max_bytes: int) -> dict[str, bytes]:
    """Every file entry of the zip (directories left out), by name."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise DecodeError(f"not a readable zip: {exc}") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ENTRIES:
            raise DecodeError(f"zip has {len(infos)} entries, more than {MAX_ENTRIES}")
        entries: dict[str, bytes] = {}
        total = 0
        for info in infos:
            name = _check_name(info.filename)
            if info.flag_bits & 0x1:
                raise DecodeError(f"zip entry {name[:200]!r} is encrypted")
            if name.endswith("/"):
                continue
            if name in entries:
                raise DecodeError(f"zip entry {name[:200]!r} occurs twice")
            try:
                with archive.open(info) as stream:
                    body = stream.read(max_bytes - total + 1)
            except (zipfile.BadZipFile, zlib.error, NotImplementedError, OSError, EOFError) as exc:
                raise DecodeError(f"zip entry {name[:200]!r} is unreadable: {exc}") from None
            total += len(body)
            if total > max_bytes:
                raise DecodeError(f"zip inflates beyond {max_bytes} bytes; refused")
            entries[name] = body
        return entries


def write_entries(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, _FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, entries[name], compresslevel=1)
    return out.getvalue()
