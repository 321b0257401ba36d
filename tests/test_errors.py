"""Every exception class of the product packages derives from runtime.errors.ScdError, so that
a caller can catch scd's errors in one clause and ask each whether a retry helps
(``retriable``). None is exempt today; one that must be (a class a library requires to derive
from its own base) is listed in EXEMPT with the reason."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from runtime.errors import ScdError

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("runtime", "journal", "blobstore", "publisher", "subscriber", "scd")
# "module.Class": why it does not derive from ScdError.
EXEMPT: dict[str, str] = {}


def exception_classes() -> list[tuple[str, type[BaseException]]]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if path.name == "__main__.py":  # runs the command line when imported
                continue
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            name = name.removesuffix(".__init__")
            module = importlib.import_module(name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == name and issubclass(cls, BaseException):
                    found.append((f"{name}.{cls.__qualname__}", cls))
    return found


def test_every_exception_class_derives_from_scd_error() -> None:
    classes = exception_classes()
    assert len(classes) > 30  # the walk found the packages' errors
    outside = [name for name, cls in classes if not issubclass(cls, ScdError)]
    assert sorted(set(outside) - EXEMPT.keys()) == []
    assert all(isinstance(cls.retriable, bool) for _, cls in classes if issubclass(cls, ScdError))
