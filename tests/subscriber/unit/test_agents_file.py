"""The agents file (subscriber/fleet/agents_file.py): each agent inherits the daemon's settings
and overrides its own; hostile or mistaken files are refused with the file, the agent and the
key named, never a value, and at bounded cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import ConfigError
from subscriber.fleet.agents_file import MAX_AGENTS, MAX_FILE_BYTES, agent_settings
from subscriber.settings import SubscriberSettings


def daemon(tmp_path: Path, text: str | bytes, **values: object) -> SubscriberSettings:
    path = tmp_path / "agents.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return SubscriberSettings(agents_file=str(path), **values)  # type: ignore[arg-type]


def refused(tmp_path: Path, text: str | bytes, match: str, **values: object) -> str:
    with pytest.raises(ConfigError, match=match) as caught:
        agent_settings(daemon(tmp_path, text, **values))
    assert caught.value.retriable is False
    return str(caught.value)


def test_without_a_file_the_daemon_runs_the_one_agent_its_settings_describe() -> None:
    base = SubscriberSettings(agent_name="solo", store_path="/data/solo")
    assert agent_settings(base) == [base]


def test_each_agent_inherits_the_daemon_settings_and_overrides_its_own(tmp_path: Path) -> None:
    text = """
[[agent]]
name = "edge-a"
store_path = "/stores/a"

[[agent]]
name = "edge-b"
store_path = "s3a://bucket/b"
max_retries = 5
reset = "earliest"
pub_agents = ["news", "sports"]
"""
    a, b = agent_settings(daemon(tmp_path, text, batch_max=7, max_retries=-1))
    assert (a.agent_name, a.store_path, a.max_retries, a.batch_max) == (
        "edge-a",
        "/stores/a",
        -1,
        7,
    )
    assert (b.agent_name, b.store_path, b.max_retries, b.batch_max) == (
        "edge-b",
        "s3a://bucket/b",
        5,
        7,
    )
    assert (a.reset, b.reset) == ("latest", "earliest")
    assert b.pub_agents == ["news", "sports"]
    assert (a.agents_file, b.agents_file) == (None, None)
    assert a.journal == b.journal  # one journal for the process


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (b"\xff\xfe[[agent]]", "not UTF-8"),
        ("[[agent]\nname=", "not valid TOML"),
        ('agents = []\n[[agent]]\nname = "a"\nstore_path = "/a"', r"unknown key\(s\) agents"),
        ("", r"no \[\[agent\]\] table"),
        ('agent = "edge-a"', r"no \[\[agent\]\] table"),
        ("agent = [1, 2]", "agent #1 is not a table"),
        ('[[agent]]\nstore_path = "/a"', "agent #1: name must be"),
        ('[[agent]]\nname = ""\nstore_path = "/a"', "name must be"),
        ('[[agent]]\nname = "edge a"\nstore_path = "/a"', "name must be"),
        ('[[agent]]\nname = "edge\\nb"\nstore_path = "/a"', "name must be"),
        ('[[agent]]\nname = "-edge"\nstore_path = "/a"', "name must be"),
        (f'[[agent]]\nname = "{"a" * 129}"\nstore_path = "/a"', "name must be"),
        ("[[agent]]\nname = 7\nstore_path = '/a'", "name must be"),
        ('[[agent]]\nname = "a"', r"agent #1 \(a\): store_path must be"),
        ('[[agent]]\nname = "a"\nstore_path = "  "', "store_path must be"),
        ('[[agent]]\nname = "a"\nstore_path = ["/a"]', "store_path must be"),
        (f'[[agent]]\nname = "a"\nstore_path = "/{"x" * 4096}"', "store_path must be"),
    ],
)
def test_malformed_files_are_refused(tmp_path: Path, text: str | bytes, match: str) -> None:
    refused(tmp_path, text, match)


def test_a_duplicate_name_is_refused(tmp_path: Path) -> None:
    text = '[[agent]]\nname = "a"\nstore_path = "/a"\n[[agent]]\nname = "a"\nstore_path = "/b"'
    refused(tmp_path, text, r"agent #2: name a is agent #1's already")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("/stores/a", "/stores/a/"),
        ("/stores/a", "/stores/x/../a"),
        ("s3a://bucket/a", "s3a://bucket//a/"),
        ("s3a://bucket/a", "s3://bucket/a"),  # one S3 file system serves both
        ("/stores/a", "file:///stores/a"),
        ("gs://bucket/a", "gs://bucket//a/"),
    ],
)
def test_one_store_for_two_agents_is_refused(tmp_path: Path, first: str, second: str) -> None:
    text = (
        f'[[agent]]\nname = "a"\nstore_path = "{first}"\n'
        f'[[agent]]\nname = "b"\nstore_path = "{second}"'
    )
    refused(tmp_path, text, r"agent #2 \(b\): store_path is a's store as well")


def test_a_relative_store_path_is_the_same_store_as_its_absolute_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    text = (
        '[[agent]]\nname = "a"\nstore_path = "stores/a"\n'
        f'[[agent]]\nname = "b"\nstore_path = "{tmp_path}/stores/a"'
    )
    refused(tmp_path, text, "store as well")


def test_a_malformed_store_path_is_refused_naming_the_agent(tmp_path: Path) -> None:
    text = '[[agent]]\nname = "a"\nstore_path = "s3a://key:secret@bucket/a"'
    refused(tmp_path, text, r"agent #1 \(a\): store_path: an s3a:// store path names credentials")


def test_a_store_inside_another_is_refused(tmp_path: Path) -> None:
    text = (
        '[[agent]]\nname = "a"\nstore_path = "s3a://bucket/a/b"\n'
        '[[agent]]\nname = "b"\nstore_path = "s3a://bucket/a"'
    )
    refused(tmp_path, text, "lie inside one another")


@pytest.mark.parametrize("key", ["journal", "blobstore", "http_port", "spark_driver_memory"])
def test_settings_of_the_process_are_refused_per_agent(tmp_path: Path, key: str) -> None:
    text = f'[[agent]]\nname = "a"\nstore_path = "/a"\n{key} = "x"'
    refused(tmp_path, text, f"agent #1 \\(a\\): {key} is a setting of the daemon")


def test_an_unknown_key_is_refused_with_a_hint(tmp_path: Path) -> None:
    text = '[[agent]]\nname = "a"\nstore_path = "/a"\nmax_retrys = 3'
    refused(tmp_path, text, r"unknown key max_retrys \(did you mean max_retries\?\)")
    refused(tmp_path, '[[agent]]\nname = "a"\nstore_path = "/a"\nagent_name = "b"', "unknown key")


def test_a_bad_value_names_the_key_and_rule_never_the_value(tmp_path: Path) -> None:
    secretish = "s3cr3t-looking-value"
    text = f'[[agent]]\nname = "a"\nstore_path = "/a"\nmax_retries = "{secretish}"'
    message = refused(tmp_path, text, r"agent #1 \(a\): max_retries: ")
    assert secretish not in message
    lease = '[[agent]]\nname = "a"\nstore_path = "/a"\nwriter_lease_ttl_s = 1.0'
    refused(tmp_path, lease, "writer_lease_ttl_s must be at least 3")


def test_name_or_store_set_for_the_daemon_beside_a_file_is_refused(tmp_path: Path) -> None:
    text = '[[agent]]\nname = "a"\nstore_path = "/a"'
    refused(tmp_path, text, "agent_name set for the daemon", agent_name="x")
    refused(tmp_path, text, "store_path set for the daemon", store_path="/x")


def test_size_and_count_are_bounded(tmp_path: Path) -> None:
    refused(tmp_path, "#" * (MAX_FILE_BYTES + 1), "larger than")
    many = "".join(
        f'[[agent]]\nname = "a{i}"\nstore_path = "/s/{i}"\n' for i in range(MAX_AGENTS + 1)
    )
    refused(tmp_path, many, f"{MAX_AGENTS + 1} agents, at most {MAX_AGENTS}")
    most = "".join(f'[[agent]]\nname = "a{i}"\nstore_path = "/s/{i}"\n' for i in range(MAX_AGENTS))
    assert len(agent_settings(daemon(tmp_path, most))) == MAX_AGENTS


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    base = SubscriberSettings(agents_file=str(tmp_path / "nowhere.toml"))
    with pytest.raises(ConfigError, match=r"cannot read the agents file .*nowhere\.toml"):
        agent_settings(base)
