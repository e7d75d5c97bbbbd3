"""mcpkit.hub.crypto: sealing credentials, key rotation, API token secrets and the key file."""

from __future__ import annotations

import base64
import hashlib
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mcpkit.hub.crypto import (
    API_TOKEN_PREFIX,
    KEY_FILE_NAME,
    SECRET_KEY_ENV,
    CredentialError,
    SecretBox,
    generate_key,
    hash_token,
    load_or_create_key,
    load_secret_box,
    new_api_token,
    token_display_prefix,
    tokens_equal,
)


def test_seal_and_open_a_string_and_a_mapping() -> None:
    box = SecretBox([generate_key()])
    sealed_text = box.seal("s3cret-bearer")
    sealed_map = box.seal({"X-Api-Key": "k-123", "X-Team": "é"})
    assert "s3cret" not in sealed_text and "k-123" not in sealed_map
    assert sealed_text.isascii() and sealed_map.isascii()
    assert box.open(sealed_text) == "s3cret-bearer"
    assert box.open_text(sealed_text) == "s3cret-bearer"
    assert box.open_mapping(sealed_map) == {"X-Api-Key": "k-123", "X-Team": "é"}
    assert box.seal("same") != box.seal("same")  # a random IV each time


def test_opening_the_wrong_kind_is_a_credential_error() -> None:
    box = SecretBox([generate_key()])
    with pytest.raises(CredentialError, match="mapping where a string"):
        box.open_text(box.seal({"a": "b"}))
    with pytest.raises(CredentialError, match="string where a mapping"):
        box.open_mapping(box.seal("x"))


def test_a_wrong_key_or_an_altered_token_is_a_clear_error() -> None:
    sealed = SecretBox([generate_key()]).seal("secret")
    with pytest.raises(CredentialError, match=f"secret key is not the one.*{SECRET_KEY_ENV}"):
        SecretBox([generate_key()]).open(sealed)
    box = SecretBox([generate_key()])
    token = box.seal("secret")
    altered = token[:-6] + ("A" if token[-6] != "A" else "B") + token[-5:]
    with pytest.raises(CredentialError):
        box.open(altered)
    with pytest.raises(CredentialError):
        box.open("not a token at all ✓")


def test_rotation_the_first_key_seals_every_key_opens() -> None:
    old, new = generate_key(), generate_key()
    sealed_old = SecretBox([old]).seal({"h": "v"})
    both = SecretBox([new, old])
    assert both.open(sealed_old) == {"h": "v"}
    rotated = both.rotate(sealed_old)
    assert SecretBox([new]).open(rotated) == {"h": "v"}
    with pytest.raises(CredentialError):
        SecretBox([old]).open(both.seal("fresh"))
    with pytest.raises(CredentialError):
        SecretBox([new]).rotate(SecretBox([generate_key()]).seal("x"))


def test_keys_from_the_environment() -> None:
    first, second = generate_key(), generate_key()
    assert SecretBox.from_env({}) is None
    assert SecretBox.from_env({SECRET_KEY_ENV: " , "}) is None
    box = SecretBox.from_env({SECRET_KEY_ENV: f"{first}, {second}"})
    assert box is not None
    assert SecretBox([first]).open(box.seal("x")) == "x"  # the first key seals
    assert box.open(SecretBox([second]).seal("y")) == "y"


def test_a_malformed_key_is_refused_without_echoing_it() -> None:
    with pytest.raises(CredentialError) as caught:
        SecretBox.from_env({SECRET_KEY_ENV: f"{generate_key()},not-a-key-SENSITIVE"})
    assert SECRET_KEY_ENV in str(caught.value) and "key 2" in str(caught.value)
    assert "SENSITIVE" not in str(caught.value)
    short = base64.urlsafe_b64encode(b"x" * 16).decode()
    with pytest.raises(CredentialError, match="not a Fernet key"):
        SecretBox([short])
    with pytest.raises(CredentialError, match="no secret key"):
        SecretBox([])


def test_generated_keys_are_32_random_bytes() -> None:
    keys = {generate_key() for _ in range(20)}
    assert len(keys) == 20
    assert all(len(base64.urlsafe_b64decode(key)) == 32 for key in keys)


def test_api_tokens_are_long_random_and_prefixed() -> None:
    tokens = {new_api_token() for _ in range(100)}
    assert len(tokens) == 100
    for token in tokens:
        assert token.startswith(API_TOKEN_PREFIX)
        body = token[len(API_TOKEN_PREFIX):]
        assert len(base64.urlsafe_b64decode(body + "=")) == 32
        assert token_display_prefix(token) == token[:12]


def test_hash_token_is_sha256_hex() -> None:
    assert hash_token("abc") == hashlib.sha256(b"abc").hexdigest()
    assert len(hash_token(new_api_token())) == 64
    assert tokens_equal("a" * 64, "a" * 64)
    assert not tokens_equal("a" * 64, "a" * 63 + "b")
    assert not tokens_equal("short", "longer")


def test_the_key_file_is_created_once_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "data" / "hub"
    key = load_or_create_key(data)
    path = data / KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert load_or_create_key(data) == key
    assert SecretBox([key]).open(SecretBox([key]).seal("x")) == "x"
    assert [p.name for p in data.iterdir()] == [KEY_FILE_NAME]  # no temporary left


def test_processes_starting_together_agree_on_one_key(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from mcpkit.hub.crypto import load_or_create_key;"
        "print(load_or_create_key(Path(sys.argv[1])))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "d")], stdout=subprocess.PIPE)
        for _ in range(6)
    ]
    keys = {proc.communicate(timeout=30)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert len(keys) == 1


def test_a_damaged_key_file_is_refused(tmp_path: Path) -> None:
    tmp_path.joinpath(KEY_FILE_NAME).write_text("garbage\n")
    with pytest.raises(CredentialError, match="not a Fernet key"):
        load_or_create_key(tmp_path)


def test_the_environment_key_wins_over_the_key_file(tmp_path: Path) -> None:
    env_key = generate_key()
    box = load_secret_box(tmp_path, {SECRET_KEY_ENV: env_key})
    assert SecretBox([env_key]).open(box.seal("x")) == "x"
    assert not (tmp_path / KEY_FILE_NAME).exists()  # not made when the env has a key
    file_box = load_secret_box(tmp_path, {})
    assert (tmp_path / KEY_FILE_NAME).exists()
    file_key = (tmp_path / KEY_FILE_NAME).read_text().strip()
    assert SecretBox([file_key]).open(file_box.seal("y")) == "y"
