"""A FileVault package (pkgType journal_filevault, as Sling's publishers send) imported by a
subscriber on an in-memory store: its content lands, what scd does not model (here an access
control list) is left out, counted in a metric and told in the log and a LogMessage; the import
goes on with the next package."""

from __future__ import annotations

import io
import logging
import zipfile

import pytest

from journal.content.filevault import FILEVAULT_PACKAGE_TYPE, encode_filevault
from journal.content.package import ContentPackage
from journal.wire import messages as m
from subscriber.store.memory import MemoryStore
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package

ADD = m.ReqType.ADD
_POLICY = b"""<?xml version="1.0" encoding="UTF-8"?>
<jcr:root xmlns:jcr="http://www.jcp.org/jcr/1.0" xmlns:rep="internal"
    jcr:primaryType="rep:ACL">
    <allow jcr:primaryType="rep:GrantACE" rep:principalName="everyone"
        rep:privileges="{Name}[jcr:read]"/>
</jcr:root>
"""


def filevault_with_policy(pkg: ContentPackage, policy_under: str) -> bytes:
    """scd's FileVault package of ``pkg`` with a rep:policy node below ``policy_under``."""
    out = io.BytesIO(encode_filevault(pkg))
    with zipfile.ZipFile(out, "a") as archive:
        archive.writestr(f"jcr_root{policy_under}/_rep_policy/.content.xml", _POLICY)
    return out.getvalue()


def test_a_filevault_package_imports_and_reports_what_scd_does_not_model(
    local_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env = local_env
    site = package("fv-1", ADD, [("/site", True)], [node("/site", title="Site")])
    data = filevault_with_policy(site, "/site")
    value, headers = m.encode(
        m.PackageMessage(
            pub_sling_id="pub-1",
            pub_agent_name=h.PUB,
            pkg_id="fv-1",
            req_type=ADD,
            pkg_type=FILEVAULT_PACKAGE_TYPE,
            pkg_length=len(data),
            pkg_binary=data,
        )
    )
    offset = env.journal.send(env.js.topics.package, value, headers=headers)
    after = env.send(package("scd-1", ADD, [("/next", True)], [node("/next", title="n")]))
    store = MemoryStore()
    agent = env.memory_agent(store)
    with caplog.at_level(logging.WARNING):
        h.drive(agent, lambda: agent.processed_offset >= after, timeout_s=60)

    stored = store.node("/site")
    assert stored is not None
    assert stored.properties["title"][2] == ["Site"]
    assert stored.pkg_id == "fv-1"
    assert store.node("/site/rep:policy") is None
    assert store.node("/site/rep:policy/allow") is None
    assert store.node("/next") is not None
    assert agent.counters.permanent_failures == 0
    (log,) = [x for x in h.log_messages(env.journal, env.js) if x.offset == offset]
    assert log.pkg_id == "fv-1"
    assert log.message.endswith("access-control: 1 (/site/rep:policy)")  # its subtree
    assert any("access-control: 1" in r.getMessage() for r in caplog.records)
    metrics = agent.metrics.render().decode()
    assert 'scd_unmodelled_content_total{agent="sub",kind="access-control"} 1.0' in metrics
