"""Settings from a configuration file, beneath environment variables.

Every daemon setting model derives from ``ScdSettings``. Values come, highest first, from:
explicit arguments, environment variables (``SCD_<SECTION>_*``), the TOML file given with
``scd --config FILE`` (one table per section: ``[journal]``, ``[blobstore]``, ``[publisher]``,
``[subscriber]``), then the defaults.

An environment variable that starts with a model's prefix but names none of its settings (a
typo such as ``SCD_SUBSCRIBER_BATCH_MAXX``) is refused rather than silently ignored.

A bad setting is reported by ``describe_settings_error``: the variable and the rule, never the
value (pydantic's own message quotes it, secrets included). Secret values of settings that
load are registered for redaction from the logs (runtime/redaction.py).
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ClassVar, get_args

from pydantic import BaseModel, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsError

from runtime.errors import ConfigError
from runtime.redaction import MASK, register_model_secrets

SECTIONS = frozenset({"journal", "blobstore", "publisher", "subscriber"})
_FILE: ContextVar[dict[str, Any] | None] = ContextVar("scd_config_file", default=None)


def _section(name: str) -> dict[str, Any]:
    values = _FILE.get()
    return dict(values.get(name, {})) if values else {}


class _FileSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], section: str) -> None:
        super().__init__(settings_cls)
        self.section = section

    def get_field_value(
        self,
        field: FieldInfo,  # noqa: ARG002 -- pydantic-settings' signature
        field_name: str,
    ) -> tuple[Any, str, bool]:
        return _section(self.section).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        values = _section(self.section)
        elsewhere: Mapping[str, str] = getattr(self.settings_cls, "env_elsewhere", {})
        misplaced = sorted(set(values) & set(elsewhere))
        if misplaced:
            key = misplaced[0]
            raise ConfigError(
                f"configuration file: [{self.section}] {key} is not read there; use the "
                f"[{key}] table (or {elsewhere[key]}* variables)"
            )
        return values


class ScdSettings(BaseSettings):
    """Base of the settings models: adds the configuration file as a source and refuses
    unknown environment variables within the model's prefix."""

    config_section: ClassVar[str]
    #: Variables within the prefix that other parts of scd read (not settings of this model).
    env_not_settings: ClassVar[frozenset[str]] = frozenset()
    #: Fields set through another model's variables (field -> that model's prefix), never
    #: through this model's prefix: one setting, one variable.
    env_elsewhere: ClassVar[Mapping[str, str]] = {}

    def __init__(self, **values: Any) -> None:
        check_environment(type(self), os.environ)
        super().__init__(**values)
        register_model_secrets(self)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,  # noqa: ARG003 -- pydantic's signature
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _FileSource(settings_cls, cls.config_section),
            file_secret_settings,
        )


def setting_env_names(model: type[ScdSettings]) -> set[str]:
    """The environment variables a settings model reads: prefix + field, and for fields that
    are models themselves, their fields joined with the nested delimiter."""
    prefix = str(model.model_config.get("env_prefix") or "").upper()
    delimiter = model.model_config.get("env_nested_delimiter")
    names = _field_names(model, delimiter, skip=frozenset(model.env_elsewhere))
    return {f"{prefix}{name}" for name in names}


def _field_names(
    model: type[BaseModel], delimiter: str | None, skip: frozenset[str] = frozenset()
) -> set[str]:
    names: set[str] = set()
    for field_name, field in model.model_fields.items():
        if field_name in skip:
            continue
        name = field_name.upper()
        names.add(name)
        if delimiter is None:
            continue
        # A nested model, possibly optional (``BlobStoreSettings | None``).
        for member in (field.annotation, *get_args(field.annotation)):
            if isinstance(member, type) and issubclass(member, BaseModel):
                names |= {f"{name}{delimiter}{sub}" for sub in _field_names(member, delimiter)}
    return names


def check_environment(model: type[ScdSettings], environ: Mapping[str, str]) -> None:
    """Raise ConfigError naming every variable of ``model``'s prefix that is no setting."""
    prefix = str(model.model_config.get("env_prefix") or "").upper()
    known = setting_env_names(model) | {f"{prefix}{n}" for n in model.env_not_settings}
    unknown = sorted(n for n in environ if n.upper().startswith(prefix) and n.upper() not in known)
    if not unknown:
        return
    hints = []
    for name in unknown:
        rest = name.upper().removeprefix(prefix)
        moved = [
            f"{name} (set {other}{rest.removeprefix(field.upper()).lstrip('_') or '*'} instead)"
            for field, other in model.env_elsewhere.items()
            if rest.startswith(field.upper())
        ]
        close = difflib.get_close_matches(name.upper(), known, n=1)
        hints.append(moved[0] if moved else f"{name} (did you mean {close[0]}?)" if close else name)
    raise ConfigError(
        f"unknown setting(s) in the environment: {', '.join(hints)}; "
        "the settings are listed in docs/configuration.md"
    )


def describe_settings_error(exc: ValidationError | SettingsError) -> str:
    """One line naming each bad setting as users set it (``SCD_JOURNAL_SECURITY__PROTOCOL``)
    and the rule it breaks. Never the value given: it may be a secret."""
    if isinstance(exc, SettingsError):
        return str(exc)  # names the field and the source, not the value
    models = _settings_models()
    model = models.get(exc.title)
    secret_names = {name for m in models.values() for name in _secret_fields(m)}
    parts = []
    # No input_value, no ctx (it may quote the input); only the variable and the rule.
    for error in exc.errors(include_url=False, include_context=False):
        loc = [str(p) for p in error["loc"]]
        rule = error["msg"].removeprefix("Value error, ")
        # In case a validator's message quotes a secret it was given: mask it.
        for secret in _secret_inputs(error["input"], loc[-1:], secret_names):
            rule = rule.replace(secret, MASK)
        parts.append(f"{_variable(model, exc.title, loc)}: {rule}")
    return "invalid setting " + "; ".join(parts)


def _secret_fields(model: type[BaseModel]) -> set[str]:
    """Names of the SecretStr fields of ``model`` and of the models it holds."""
    names: set[str] = set()
    for name, field in model.model_fields.items():
        for member in (field.annotation, *get_args(field.annotation)):
            if member is SecretStr:
                names.add(name)
            elif isinstance(member, type) and issubclass(member, BaseModel):
                names |= _secret_fields(member)
    return names


def _secret_inputs(value: Any, key: list[str], secret_names: set[str]) -> Iterator[str]:
    """The string values given to secret fields within an error's input."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, str) and key and key[0] in secret_names and value:
        yield value
    elif isinstance(value, Mapping):
        for name, item in value.items():
            yield from _secret_inputs(item, [str(name)], secret_names)


def _variable(model: type[ScdSettings] | None, title: str, loc: list[str]) -> str:
    """The environment variable (or prefix) that sets the field at ``loc`` of ``model``."""
    if model is None:
        return ".".join([title, *loc])
    prefix = str(model.model_config.get("env_prefix") or "").upper()
    if loc and loc[0] in model.env_elsewhere:  # a nested model set through its own prefix
        prefix, loc = model.env_elsewhere[loc[0]], loc[1:]
    delimiter = model.model_config.get("env_nested_delimiter") or "__"
    return f"{prefix}{delimiter.join(loc).upper()}" if loc else f"{prefix}*"


def _settings_models() -> dict[str, type[ScdSettings]]:
    """Every settings model by class name (pydantic's ValidationError title)."""
    found: dict[str, type[ScdSettings]] = {}
    pending: list[type[ScdSettings]] = [ScdSettings]
    while pending:
        for sub in pending.pop().__subclasses__():
            found[sub.__name__] = sub
            pending.append(sub)
    return found


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
