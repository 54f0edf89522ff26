"""email.unsubscribe against a real loopback HTTPS receiver: one RFC 8058 request per eligible
pair after approval and none otherwise; redirects not followed; no cookies, no remote content;
private destinations refused unless the test setting allows them; the address connected to is
the one checked."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from email_support import AUTHSERV, UNSUBSCRIBE, cache_dir, harness, list_mail, ok
from mail_support import OWNER, write_mbox
from receiver import Receiver, receiver
from toolhost.testing import Harness
from toolhost_email.importer import import_path
from toolhost_email.oneclick import is_public

#: An operator's explicit, logged loosening of the tool's cell: it still asks (D430).
ALLOW = {"TOOLHOST_POLICY": '{"EXTERNAL_WRITE/MEDIUM": "allow"}',
         "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1"}
PATH = "/unsubscribe/1?list=news"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Receiver]:
    with receiver(tmp_path) as r:
        yield r


def _settings(server: Receiver, **extra: str) -> dict[str, str]:
    return {**UNSUBSCRIBE, "TOOLHOST_EMAIL_AUTHSERV_ID": AUTHSERV,
            "TOOLHOST_CA_BUNDLE": str(server.ca_bundle),
            "TOOLHOST_EMAIL_ALLOW_PRIVATE_DESTINATIONS": "1",
            # No stall is tested here: room for a loaded CI machine's TLS handshake (2 s
            # failed one call `unreachable` at a load of 15).
            "TOOLHOST_EMAIL_REQUEST_TIMEOUT_S": "10", **extra}


def _import(tmp_path: Path, *messages: Any) -> Path:
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", list(messages)))
    return root


def _eligible(server: Receiver, host: str = "localhost", n: int = 1, **kw: Any) -> Any:
    return list_mail(unsubscribe=f"<{server.url(PATH, host)}>", message_id=f"<e{n}@x>",
                     list_id=f"List {n} <l{n}.example.org>", **kw)


def _pairs(h: Harness) -> list[dict[str, Any]]:
    return [{"subscription_id": s["subscription_id"], "evidence_digest": s["evidence_digest"]}
            for s in ok(h.invoke("email.subscriptions"))["subscriptions"]]


def _approved(h: Any, **arguments: Any) -> Any:
    """email.unsubscribe called, paused (as every call is) and approved."""
    paused = h.invoke("email.unsubscribe", **arguments)
    assert paused.paused and paused.invocation_id is not None, paused
    return h.approve(paused.invocation_id)


def _outcomes(outcome: Any) -> list[str]:
    return [r["outcome"] for r in ok(outcome)["results"]]


def test_after_approval_exactly_one_rfc8058_request_and_none_before(
    tmp_path: Path, server: Receiver,
) -> None:
    root = _import(tmp_path, _eligible(server))
    with harness(root, _settings(server)) as h:  # the default policy: approval
        pairs = _pairs(h)
        paused = h.invoke("email.unsubscribe", requests=pairs)
        assert paused.paused and paused.invocation_id is not None
        assert server.arrivals == []
        done = h.approve(paused.invocation_id)
    assert _outcomes(done) == ["requested"]
    (arrival,) = server.arrivals
    assert (arrival.method, arrival.path, arrival.body) == (
        "POST", PATH, b"List-Unsubscribe=One-Click")
    assert arrival.header("Content-Type") == ["application/x-www-form-urlencoded"]
    assert arrival.header("Host") == [f"localhost:{server.port}"]
    assert arrival.header("Content-Length") == ["26"]
    for absent in ("Cookie", "Authorization", "Proxy-Authorization"):
        assert arrival.header(absent) == []
    assert "remote content" not in done.content


def test_a_loosened_policy_still_asks_before_any_request(
    tmp_path: Path, server: Receiver,
) -> None:
    # Regression (D430): with EXTERNAL_WRITE/MEDIUM allowed under the override, the tool sent
    # its POSTs with no approval, though "it always requires approval" and says so.
    root = _import(tmp_path, _eligible(server))
    with harness(root, _settings(server, **ALLOW)) as h:
        paused = h.invoke("email.unsubscribe", requests=_pairs(h))
        assert paused.paused and server.arrivals == []
        assert paused.decision == {"action": "approval", "rule": "EXTERNAL_WRITE/MEDIUM",
                                   "tool_rule": "always_requires_approval"}
        assert paused.invocation_id is not None
        assert _outcomes(h.approve(paused.invocation_id)) == ["requested"]
    assert len(server.arrivals) == 1


def test_a_denied_call_sends_nothing(tmp_path: Path, server: Receiver) -> None:
    root = _import(tmp_path, _eligible(server))
    with harness(root, _settings(server)) as h:
        paused = h.invoke("email.unsubscribe", requests=_pairs(h))
        assert paused.invocation_id is not None
        h.deny(paused.invocation_id)
    assert server.arrivals == []


def test_ineligible_stale_and_unknown_pairs_send_nothing(tmp_path: Path,
                                                         server: Receiver) -> None:
    root = _import(tmp_path, _eligible(server, n=1, post=None),
                   _eligible(server, n=2))
    with harness(root, _settings(server)) as h:
        found = {s["list_id"]: s for s in ok(h.invoke("email.subscriptions"))["subscriptions"]}
        ineligible, eligible = found["l1.example.org"], found["l2.example.org"]
        outcome = _approved(h, requests=[
            {"subscription_id": ineligible["subscription_id"],
             "evidence_digest": ineligible["evidence_digest"]},
            {"subscription_id": eligible["subscription_id"],
             "evidence_digest": "sha256:" + "0" * 64},
            {"subscription_id": "s_" + "0" * 24, "evidence_digest": "sha256:" + "0" * 64},
        ])
    assert _outcomes(outcome) == ["not_one_click", "evidence_stale", "unknown_subscription"]
    assert server.arrivals == []


def test_newer_mail_makes_the_evidence_stale(tmp_path: Path, server: Receiver) -> None:
    root = _import(tmp_path, _eligible(server))
    with harness(root, _settings(server)) as h:
        old = _pairs(h)
        newer = list_mail(
            unsubscribe=f"<{server.url('/other-path', 'localhost')}>", message_id="<e9@x>",
            list_id="List 1 <l1.example.org>", date="Wed, 02 Dec 2026 10:00:00 +0000")
        import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "newer.mbox", [newer]))
        assert _outcomes(_approved(h, requests=old)) == ["evidence_stale"]
    assert server.arrivals == []


@pytest.mark.parametrize(("answer", "outcome"), [
    (200, "requested"), (202, "requested"), (302, "rejected"), (404, "rejected"),
    (500, "rejected"), ("stall", "unreachable"),
])
def test_each_answer_is_one_closed_outcome_and_a_redirect_is_not_followed(
    tmp_path: Path, server: Receiver, answer: int | str, outcome: str,
) -> None:
    server.answer = answer
    root = _import(tmp_path, _eligible(server))
    with harness(root, _settings(server)) as h:
        result = _approved(h, requests=_pairs(h))
    assert _outcomes(result) == [outcome]
    assert [a.path for a in server.arrivals] == [PATH]  # never /redirected
    assert "remote content" not in result.content


def test_one_request_per_subscription_and_no_cookie_carried_over(
    tmp_path: Path, server: Receiver,
) -> None:
    root = _import(tmp_path, _eligible(server))
    with harness(root, _settings(server)) as h:
        pairs = _pairs(h)
        assert _outcomes(_approved(h, requests=pairs * 3)) == ["requested"] * 3
        assert _outcomes(_approved(h, requests=pairs)) == ["requested"]
    assert len(server.arrivals) == 2  # one per call, though the first named it three times
    assert [a.header("Cookie") for a in server.arrivals] == [[], []]


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_a_private_destination_is_refused_without_the_test_setting(
    tmp_path: Path, server: Receiver, host: str,
) -> None:
    root = _import(tmp_path, _eligible(server, host=host))
    settings = _settings(server)
    del settings["TOOLHOST_EMAIL_ALLOW_PRIVATE_DESTINATIONS"]
    with harness(root, settings) as h:
        assert _outcomes(_approved(h, requests=_pairs(h))) == [
            "refused_destination"]
    assert server.arrivals == []


def _fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> list[str]:
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in answers:
            asked.append(host)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                    for a in answers[host]]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_name_with_any_private_address_is_refused(
    tmp_path: Path, server: Receiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A public first answer does not hide a private second one (rebinding).
    asked = _fake_dns(monkeypatch, {"unsub.test": ["93.184.216.34", "127.0.0.1"]})
    root = _import(tmp_path, _eligible(server, host="unsub.test"))
    settings = _settings(server)
    del settings["TOOLHOST_EMAIL_ALLOW_PRIVATE_DESTINATIONS"]
    with harness(root, settings) as h:
        assert _outcomes(_approved(h, requests=_pairs(h))) == [
            "refused_destination"]
    assert asked == ["unsub.test"] and server.arrivals == []


def test_the_request_connects_to_the_checked_address_with_the_names_tls_and_host(
    tmp_path: Path, server: Receiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # unsub.test exists only in this resolver: the request can only have reached the
    # receiver through the address resolved and checked once, with SNI and Host of the name.
    asked = _fake_dns(monkeypatch, {"unsub.test": ["127.0.0.1"]})
    root = _import(tmp_path, _eligible(server, host="unsub.test"))
    with harness(root, _settings(server)) as h:
        assert _outcomes(_approved(h, requests=_pairs(h))) == ["requested"]
    assert asked == ["unsub.test"]
    (arrival,) = server.arrivals
    assert arrival.header("Host") == [f"unsub.test:{server.port}"]


@pytest.mark.parametrize(("address", "public"), [
    ("93.184.216.34", True), ("2606:2800:220:1:248:1893:25c8:1946", True),
    ("127.0.0.1", False), ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("::1", False),
    ("fe80::1", False), ("fc00::1", False), ("::ffff:127.0.0.1", False), ("224.0.0.1", False),
    # Regressions (issue #26): what the IANA registries reserve and Python 3.11 calls global.
    ("192.0.0.8", False), ("192.0.0.9", False), ("192.0.0.170", False), ("3fff::1", False),
    ("5f00::1", False), ("100:0:0:1::1", False), ("2001:db8::1", False), ("2001::1", False),
    ("198.18.0.1", False), ("240.0.0.1", False), ("255.255.255.255", False),
    ("192.88.99.1", False), ("2002:c000:8::1", False),  # 6to4 of 192.0.0.8
    ("8.8.8.8", True), ("1.1.1.1", True), ("2606:4700:4700::1111", True),
])
def test_what_counts_as_a_public_destination(address: str, public: bool) -> None:
    assert is_public(address) is public


@pytest.mark.parametrize("address", ["192.0.0.8", "3fff::1", "5f00::1"])
def test_a_special_purpose_destination_is_refused_without_any_connection(
        address: str) -> None:
    # The client factory stands in for the network: asked for a client at all, the test
    # fails, so nothing can leave the machine even if the guard were wrong.
    import asyncio

    from toolhost_email.oneclick import send_one_click

    def no_network(seconds: float) -> Any:
        raise AssertionError(f"a connection to {address} was attempted")

    literal = f"[{address}]" if ":" in address else address
    outcome = asyncio.run(send_one_click(f"https://{literal}/u", no_network, seconds=5,
                                         allow_private=False))
    assert outcome == "refused_destination"


def test_the_result_is_closed_codes_only(tmp_path: Path, server: Receiver) -> None:
    root = _import(tmp_path, _eligible(server))
    with harness(root, _settings(server)) as h:
        pairs = _pairs(h)
        result = ok(_approved(h, requests=pairs))
    assert result == {"results": [{"subscription_id": pairs[0]["subscription_id"],
                                   "outcome": "requested"}]}
    assert json.dumps(result).count("localhost") == 0


@pytest.mark.parametrize("requests", [[], [{"subscription_id": "s_" + "0" * 24}] * 1,
                                      [{"subscription_id": "s_" + "0" * 24,
                                        "evidence_digest": "sha256:" + "0" * 64}] * 26,
                                      [{"subscription_id": "s_x", "evidence_digest": "y",
                                        "url": "https://x"}]])
def test_the_input_is_closed_and_bounded(tmp_path: Path, requests: list[Any]) -> None:
    with harness(tmp_path / "data", {**UNSUBSCRIBE, **ALLOW}) as h:
        outcome = h.invoke("email.unsubscribe", requests=requests)
    assert outcome.failure is not None and outcome.failure.kind.value == "INVALID_ARGUMENTS"


def test_an_address_literal_destination_is_checked_and_reached(tmp_path: Path,
                                                               server: Receiver) -> None:
    root = _import(tmp_path, _eligible(server, host="127.0.0.1"))
    with harness(root, _settings(server)) as h:
        assert _outcomes(_approved(h, requests=_pairs(h))) == ["requested"]
    (arrival,) = server.arrivals
    assert arrival.header("Host") == [f"127.0.0.1:{server.port}"]
