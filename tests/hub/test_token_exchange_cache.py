"""The pieces of the hub's token exchange that need no provider: the exchanged-token cache
(bounded in bytes, per owner and upstream, given up before expiry), one exchange for many
concurrent connections, a refused token exchanged again once, and the RFC 8693 form and
answer checks. The exchange against the real provider is test_upstream_token_exchange.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.auth.assertions import (
    ACCESS_TOKEN_TYPE,
    TOKEN_EXCHANGE_GRANT,
    InvalidTokenExchangeResponse,
    access_token_exchange_form,
    parse_exchanged_access_token,
)
from mcpkit.auth.tokens import TokenSet
from mcpkit.errors import InvalidArgument
from mcpkit.hub.exchanged_tokens import (
    ENTRY_OVERHEAD_BYTES,
    EXPIRY_MARGIN_S,
    UNSTATED_LIFETIME_S,
    ExchangedTokens,
)
from mcpkit.hub.keyed_locks import KeyedLocks
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store, UpstreamRecord
from mcpkit.hub.upstream_token_exchange import UpstreamTokenExchange

NOW = 1_000_000.0
URL = "http://127.0.0.1:9/mcp"


def record(user_id: int = 1, upstream_id: str = "u-1", url: str = URL) -> UpstreamRecord:
    when = datetime.now(UTC)
    return UpstreamRecord(
        id=upstream_id, user_id=user_id, name="tx", transport="http", url=url, command=None,
        has_headers=False, has_bearer=False, enabled=True, enabled_tools=None,
        disabled_tools=(), connect_timeout_s=5.0, call_timeout_s=5.0, health_status="unknown",
        last_error=None, last_checked_at=None, tool_count=0, catalog_updated_at=None,
        created_at=when, updated_at=when, version=1, auth_mode="token_exchange")


# --- the cache ------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 600)), max_size=40),
       st.integers(300, 3000))
def test_the_cache_never_holds_more_bytes_than_its_budget(
        puts: list[tuple[int, int]], budget: int) -> None:
    cache = ExchangedTokens(budget)
    for user, length in puts:
        key = (user, "u", URL)
        cache.put(key, TokenSet("t" * length, expires_at=NOW + 3600), now=NOW)
        assert cache.bytes <= budget
        held = cache.get(key, now=NOW)
        fits = length + ENTRY_OVERHEAD_BYTES <= budget
        assert (held is not None) == fits, "the newest entry stays whenever it fits alone"
    held = [cache.get((user, "u", URL), now=NOW) for user in range(6)]
    assert cache.bytes == sum(len(tokens.access_token) + ENTRY_OVERHEAD_BYTES
                              for tokens in held if tokens is not None)


def test_the_least_recently_used_token_goes_first() -> None:
    size = 100 + ENTRY_OVERHEAD_BYTES
    cache = ExchangedTokens(3 * size)
    for user in (1, 2, 3):
        cache.put((user, "u", URL), TokenSet(f"{user}" * 100, expires_at=NOW + 600), now=NOW)
    assert cache.get((1, "u", URL), now=NOW) is not None  # 1 used again: 2 is now the oldest
    cache.put((4, "u", URL), TokenSet("4" * 100, expires_at=NOW + 600), now=NOW)
    assert cache.get((2, "u", URL), now=NOW) is None
    assert [cache.get((u, "u", URL), now=NOW) is not None for u in (1, 3, 4)] == [True] * 3
    assert cache.bytes == 3 * size


def test_tokens_are_given_up_before_they_expire_and_kept_per_owner() -> None:
    cache = ExchangedTokens()
    ada, bob = (1, "u", URL), (2, "u", URL)
    cache.put(ada, TokenSet("ada", expires_at=NOW + 100), now=NOW)
    assert cache.get(bob, now=NOW) is None  # never another owner's
    assert cache.get(ada, now=NOW + 100 - EXPIRY_MARGIN_S - 1) is not None
    assert cache.get(ada, now=NOW + 100 - EXPIRY_MARGIN_S) is None
    cache.put(ada, TokenSet("short", expires_at=NOW + 10), now=NOW)  # half its life then
    assert cache.get(ada, now=NOW + 4.9) is not None and cache.get(ada, now=NOW + 5) is None
    cache.put(bob, TokenSet("unsaid"), now=NOW)  # no expires_in
    assert cache.get(bob, now=NOW + UNSTATED_LIFETIME_S - EXPIRY_MARGIN_S - 1) is not None
    assert cache.get(bob, now=NOW + UNSTATED_LIFETIME_S) is None
    cache.put(ada, TokenSet("dead", expires_at=NOW - 1), now=NOW)
    assert cache.get(ada, now=NOW) is None and cache.bytes == 0
    with pytest.raises(InvalidArgument, match="positive byte budget"):
        ExchangedTokens(0)


# --- one exchange for many, a refused token exchanged again -----------------------------------


class CountingExchange(UpstreamTokenExchange):
    """The exchange with the provider replaced by numbered tokens (slow enough for the
    concurrent callers to overlap)."""

    def __init__(self) -> None:
        self.issuer = "http://127.0.0.1:1"
        self.cache = ExchangedTokens()
        self._flights = KeyedLocks()
        self.made: list[tuple[int, str]] = []

    async def _exchange(self, store: Store, upstream: UpstreamRecord) -> TokenSet:
        await anyio.sleep(0.05)
        self.made.append((upstream.user_id, upstream.id))
        return TokenSet(f"token-{upstream.user_id}-{len(self.made)}", expires_at=None)


@pytest.mark.anyio
async def test_concurrent_connections_wait_for_one_exchange_per_owner() -> None:
    exchange = CountingExchange()
    store: Any = None
    got: dict[int, set[str]] = {1: set(), 2: set()}

    async def connect(user: int) -> None:
        auth = exchange.auth_for(store, record(user))
        got[user].add((await auth.headers(URL))["Authorization"])

    async with anyio.create_task_group() as group:
        for user in (1, 2) * 10:
            group.start_soon(connect, user)
    assert sorted(exchange.made) == [(1, "u-1"), (2, "u-1")]
    assert [len(got[1]), len(got[2])] == [1, 1]  # each owner: one token, their own
    assert all(token.startswith(f"Bearer token-{user}-") for user in (1, 2)
               for token in got[user])
    assert len(exchange._flights) == 0  # no lock left for a key no one uses


@pytest.mark.anyio
async def test_a_token_the_upstream_refuses_is_exchanged_again_once() -> None:
    exchange = CountingExchange()
    store: Any = None
    auth = exchange.auth_for(store, record())
    first = await auth.headers(URL)
    assert await auth.headers(URL) == first and len(exchange.made) == 1
    assert not await auth.challenge(URL, 403, {})  # insufficient scope: not an exchange's
    assert await auth.challenge(URL, 401, {})
    second = await auth.headers(URL)
    assert second != first and len(exchange.made) == 2
    other = exchange.auth_for(store, record())  # another connection takes the new one
    assert await other.headers(URL) == second and len(exchange.made) == 2
    assert "token-" not in repr(auth) and "token-" not in repr(exchange)


# --- the RFC 8693 form and answer -------------------------------------------------------------


def test_the_exchange_form_names_the_subject_and_the_resource() -> None:
    form = access_token_exchange_form("opaque-subject", resource=URL, scope=["mcp:read"])
    assert dict(form) == {
        "grant_type": TOKEN_EXCHANGE_GRANT, "requested_token_type": ACCESS_TOKEN_TYPE,
        "subject_token": "opaque-subject", "subject_token_type": ACCESS_TOKEN_TYPE,
        "resource": URL, "scope": "mcp:read"}
    assert "opaque-subject" not in repr(form)
    for bad in ("", "x" * 16385, "with space"):
        with pytest.raises(InvalidArgument, match="subject token"):
            access_token_exchange_form(bad, resource=URL)
    with pytest.raises(InvalidArgument, match="fragment"):
        access_token_exchange_form("s", resource=URL + "#x")


def answer(**fields: Any) -> bytes:
    base = {"access_token": "secret-upstream-token", "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer", "expires_in": 60, "refresh_token": "r"}
    return json.dumps({**base, **fields}).encode()


def test_the_answer_must_be_a_bearer_access_token_within_bounds() -> None:
    tokens = parse_exchanged_access_token(answer(), now=NOW)
    assert (tokens.access_token, tokens.expires_at, tokens.refresh_token) == \
        ("secret-upstream-token", NOW + 60, None)
    refusals = {
        "issued": answer(issued_token_type="urn:ietf:params:oauth:token-type:id_token"),
        "missing": answer(issued_token_type=None),
        "type": answer(token_type="N_A"),
        "empty": answer(access_token=""),
        "long": answer(access_token="x" * 16385),
        "not json": b"<html>",
        "list": b"[]",
        "big": answer(padding="x" * 70_000),
    }
    for name, body in refusals.items():
        with pytest.raises(InvalidTokenExchangeResponse) as caught:
            parse_exchanged_access_token(body)
        assert "secret-upstream-token" not in str(caught.value), name
    assert HubSettings().token_exchange_cache_bytes > 0
