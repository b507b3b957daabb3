"""Secrets known by value: what is learned (environment, inputs, token shapes), the gate, and its trie search."""

from __future__ import annotations

import warnings

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import nbflow as nf
from nbflow._core.secrets import Redactor, gate, known_secrets, looks_like_token


def test_a_changed_environment_is_learned_at_the_next_run(monkeypatch):
    flow = nf.Flow("known_env")

    @flow.node
    def echo(x: int) -> int:
        return x

    flow.run(x=1, show=False)
    monkeypatch.setenv("LATER_SERVICE_TOKEN", "later-token-value-42")
    monkeypatch.setenv("LATER_PLAIN", "xoxp-1234567890-abcdefghij")  # a Slack token under a plain name
    monkeypatch.setenv("LATER_SETTING", "an ordinary value of a setting")
    assert "later-token-value-42" not in known_secrets()
    flow.run(x=2, show=False)
    assert {"later-token-value-42", "xoxp-1234567890-abcdefghij"} <= known_secrets()
    assert "an ordinary value of a setting" not in known_secrets()


def test_the_working_directory_is_not_a_password(monkeypatch, tmp_path):
    monkeypatch.setenv("PWD", str(tmp_path / "some" / "project"))
    from nbflow._core.secrets import learn_environment

    learn_environment()
    assert str(tmp_path / "some" / "project") not in known_secrets()


def test_inputs_are_learned_by_name_and_by_shape_but_not_short_or_plain():
    flow = nf.Flow("known_inputs")

    @flow.node
    def use(openai_key: str, config: dict, note: str, pin: str) -> str:
        return note

    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJrbm93biJ9.c2lnbmF0dXJl"
    flow.run(openai_key="ok-by-name-123", config={"bearer": jwt}, note="just a note of text", pin="1234")
    known = known_secrets()
    assert {"ok-by-name-123", jwt} <= known
    assert "just a note of text" not in known and "1234" not in known


def test_the_gate_redacts_text_containers_and_tables():
    nf.Secret("gate-secret-0123456789")
    assert gate("x gate-secret-0123456789 y") == "x [REDACTED] y"
    assert gate({"k": ("gate-secret-0123456789",)}) == {"k": ("[REDACTED]",)}
    assert gate(5) == 5
    frame = pd.DataFrame({"a": ["fine", "key gate-secret-0123456789"], "n": [1, 2]})
    out = gate(frame)
    assert out["a"].tolist() == ["fine", "key [REDACTED]"] and out["n"].tolist() == [1, 2]
    assert frame["a"][1].endswith("0123456789")  # the frame itself is left alone
    clean = pd.DataFrame({"a": ["fine"]})
    assert gate(clean) is clean  # nothing to redact: no copy


def test_warnings_and_errors_show_no_known_secret():
    nf.Secret("warned-secret-0123456789")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("the key warned-secret-0123456789 failed", nf.NbflowWarning, stacklevel=1)
    assert str(caught[0].message) == "the key [REDACTED] failed"
    assert str(nf.StoreError("cannot use warned-secret-0123456789")) == "cannot use [REDACTED]"


def test_token_shapes():
    for token in (
        "sk-proj-abcdefghijklmnop1234",
        "sk-ant-api03-abcdefghijklmnop",
        "ghp_" + "a1" * 18,
        "github_pat_" + "A" * 40,
        "xoxb-1234567890-abcdef",
        "AKIAABCDEFGHIJKLMNOP",
        "AIza" + "b" * 35,
        "hf_" + "c" * 34,
        "mysql://root:hunter2hunter2@localhost:3306/db",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    ):
        assert looks_like_token(token), token
    for plain in ("hello world", "https://example.com/path", "sk-short", "AKIA", "1234567890", "gpt-4o-mini"):
        assert not looks_like_token(plain), plain


@settings(max_examples=200, deadline=None)
@given(
    secrets=st.lists(st.text(alphabet="abcxyz-é_", min_size=4, max_size=12), min_size=1, max_size=40, unique=True),
    text=st.text(alphabet="abcxyz-é_ ", max_size=200),
)
def test_the_trie_search_redacts_as_the_plain_search_does(secrets, text):
    """Past 16 secrets one regex (a trie) searches for all: like the plain search, it finds each secret, leaves
    none in the text, and leaves a text holding none as it is."""
    red = Redactor(secrets, "#")
    clean = "".join(ch for ch in text if ch == " ") or "nothing here"
    assert not red.found_in(clean) and red(clean) == clean
    text = text + secrets[len(text) % len(secrets)]  # one of them in the text
    assert red.found_in(text) and red.found_in(text.encode())
    out = red(text)
    assert "#" in out and not any(s in out for s in secrets)
