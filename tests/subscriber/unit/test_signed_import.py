"""A subscriber with public keys configured imports only packages signed by one of them: an
unsigned or badly signed package is a permanent failure, an unsigned clear is ignored; keys
rotate by accepting old and new, then removing the old one. (In-memory store, embedded
journal.)"""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from journal.content.package import encode_package
from journal.wire import messages as m
from journal.wire.signing import RecordSigner
from subscriber.store.memory import MemoryStore
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package
from tests.waiting import wait_for

ADD = m.ReqType.ADD


def key_pair(key_id: str) -> tuple[RecordSigner, str]:
    """A signer and its public key as the subscriber's setting takes it."""
    private = Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return RecordSigner(key_id, private), "base64:" + base64.b64encode(raw).decode()


def send(env: Env, path: str, signer: RecordSigner | None, *, tamper: bool = False) -> int:
    pkg = package(path.strip("/"), ADD, [(path, True)], [node(path, title=path)])
    data = encode_package(pkg)
    message = m.PackageMessage(
        pub_sling_id="pub-1",
        pub_agent_name=h.PUB,
        pkg_id=pkg.package_id,
        req_type=ADD,
        pkg_type="scd-content",
        pkg_length=len(data),
        pkg_binary=data,
    )
    value, headers = m.encode(message)
    topic = env.js.topics.package
    if signer is not None:
        headers = signer.signed_headers(topic, headers, value)
    if tamper:  # the same message for another path, under the original signature
        message.paths.append("/elsewhere")
        value = message.SerializeToString()
    return env.journal.send(topic, value, headers=headers)


def test_only_packages_signed_by_an_accepted_key_are_imported(local_env: Env) -> None:
    env = local_env
    good, public = key_pair("pub-2026")
    stranger, _ = key_pair("pub-2026")  # same key id, another key: a forgery
    offsets = {
        "signed": send(env, "/signed", good),
        "unsigned": send(env, "/unsigned", None),
        "forged": send(env, "/forged", stranger),
        "tampered": send(env, "/tampered", good, tamper=True),
        "unknown key": send(env, "/unknown", key_pair("other")[0]),
    }
    store = MemoryStore()
    agent = env.memory_agent(store, verify_keys={"pub-2026": public})
    h.drive(agent, lambda: agent.processed_offset >= max(offsets.values()), timeout_s=30)
    assert [n.path for n in store.nodes("/")] == ["/signed"]
    failed = {o: s for o, s in h.statuses(env.journal, env.js).items()}
    assert failed == {offsets[k]: "REMOVED_FAILED" for k in offsets if k != "signed"}
    reasons = {x.offset: x.message for x in h.log_messages(env.journal, env.js)}
    assert "unsigned" in reasons[offsets["unsigned"]]
    assert "does not match" in reasons[offsets["forged"]]
    assert "does not match" in reasons[offsets["tampered"]]
    assert "other" in reasons[offsets["unknown key"]]
    assert all(text.startswith("permanent: ") for text in reasons.values())


def test_key_rotation(local_env: Env) -> None:
    env = local_env
    old, old_public = key_pair("k1")
    new, new_public = key_pair("k2")
    both = {"k1": old_public, "k2": new_public}
    store = MemoryStore()
    first = [send(env, "/a", old), send(env, "/b", new)]
    agent = env.memory_agent(store, verify_keys=both)
    h.drive(agent, lambda: agent.processed_offset >= first[-1], timeout_s=30)
    assert [n.path for n in store.nodes("/")] == ["/a", "/b"]
    agent.loop.shutdown()

    later = [send(env, "/c", old), send(env, "/d", new)]
    agent = env.memory_agent(store, verify_keys={"k2": new_public})  # k1 retired
    h.drive(agent, lambda: agent.processed_offset >= later[-1], timeout_s=30)
    assert [n.path for n in store.nodes("/")] == ["/a", "/b", "/d"]
    assert h.statuses(env.journal, env.js) == {later[0]: "REMOVED_FAILED"}


def test_an_unsigned_clear_is_ignored_and_a_signed_one_obeyed(local_env: Env) -> None:
    env = local_env
    signer, public = key_pair("k1")
    stuck = send(env, "/stuck", signer)
    after = send(env, "/after", signer)
    # /stuck blocks the subscriber: the store refuses commits holding it (a transient failure)
    # until a clear skips it.
    store = MemoryStore()
    agent = env.memory_agent(
        store, editable=True, verify_keys={"k1": public}, retry_initial_s=0.01, retry_max_s=0.02
    )
    original = store.commit

    def refuses_stuck(changes: object) -> None:
        if "/stuck" in changes.upserts:  # type: ignore[attr-defined]
            raise RuntimeError("store unavailable for /stuck")
        original(changes)  # type: ignore[arg-type]

    store.commit = refuses_stuck  # type: ignore[method-assign]
    agent.start()
    try:
        wait_for(lambda: agent.retries >= 2, 30)
        command = m.CommandMessage(
            sub_sling_id=agent.instance_id,
            sub_agent_name=agent.name,
            pub_agent_name=h.PUB,
            clear_command=m.ClearCommand(offset=stuck),
        )
        value, headers = m.encode(command)
        topic = env.js.topics.command
        env.journal.send(topic, value, headers=headers)  # unsigned
        wait_for(lambda: b'reason="signature"} 1.0' in agent.metrics.render(), 30)
        assert agent.processed_offset == stuck - 1  # still blocked
        env.journal.send(topic, value, headers=signer.signed_headers(topic, headers, value))
        wait_for(lambda: agent.processed_offset == after, 30)
    finally:
        agent.stop()
    assert [n.path for n in store.nodes("/")] == ["/after"]
    assert h.statuses(env.journal, env.js) == {stuck: "REMOVED", after: "IMPORTED"}
