"""Settings from a configuration file, beneath environment variables.

Every daemon setting model derives from ``ScdSettings``. Values come, highest first, from:
explicit arguments, environment variables (``SCD_<SECTION>_*``), the TOML file given with
``scd --config FILE`` (one table per section: ``[journal]``, ``[blobstore]``, ``[publisher]``,
``[subscriber]``), then the defaults.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ClassVar

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from journal.errors import ConfigError

SECTIONS = frozenset({"journal", "blobstore", "publisher", "subscriber"})
_FILE: ContextVar[dict[str, Any] | None] = ContextVar("scd_config_file", default=None)


def _section(name: str) -> dict[str, Any]:
    values = _FILE.get()
    return dict(values.get(name, {})) if values else {}


class _FileSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], section: str) -> None:
        super().__init__(settings_cls)
        self.section = section

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return _section(self.section).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return _section(self.section)


class ScdSettings(BaseSettings):
    """Base of the settings models: adds the configuration file as a source."""

    config_section: ClassVar[str]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _FileSource(settings_cls, cls.config_section),
            file_secret_settings,
        )


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            values = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"configuration file {path} is not valid TOML: {exc}") from exc
    unknown = sorted(set(values) - SECTIONS)
    if unknown:
        raise ConfigError(
            f"configuration file {path}: unknown section(s) {', '.join(unknown)}; "
            f"expected {', '.join(sorted(SECTIONS))}"
        )
    for name, section in values.items():
        if not isinstance(section, dict):
            raise ConfigError(f"configuration file {path}: [{name}] must be a table")
    return values


@contextmanager
def config_file(path: Path | None) -> Iterator[None]:
    """Settings created inside this block also read ``path`` (no-op for None)."""
    token = _FILE.set(read_config_file(path) if path is not None else None)
    try:
        yield
    finally:
        _FILE.reset(token)
