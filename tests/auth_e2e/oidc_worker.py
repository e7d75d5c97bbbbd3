"""One process of the persistence tests against the real provider: a separate OS process, as
a second terminal or a restarted agent would be. Prints one JSON line; never a token (only a
hash of the access token it ended with).

    python -m tests.auth_e2e.oidc_worker RESOURCE STORE_DIR login|call|logout [--wait]

login   `OAuth.login(RESOURCE)` through the provider's pages (FormLogin), kept in the store
call    calls the `read` tool; any attempt to authorize fails the run: the login must come
        from the store (refreshed when it is expiring)
logout  `oauth_logout.logout(store, RESOURCE)`: revoke at the provider, forget here
--wait  print "ready" once imported and wait for a line on stdin first (releases a group of
        processes at once)"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import anyio
import msgspec
from tests.auth_e2e.logins import FormLogin

from mcpkit import Client
from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_logout import logout
from mcpkit.client.token_store import open_token_store


async def refuse_to_authorize(url: str) -> str:
    raise SystemExit("asked to authorize: the stored login was not used")


def token_hash(oauth: OAuth) -> str:
    assert oauth.tokens is not None
    return hashlib.sha256(oauth.tokens.access_token.encode()).hexdigest()


async def main(resource: str, directory: Path, action: str) -> dict[str, object]:
    store = open_token_store("file", directory=directory)
    if action == "logout":
        report = await logout(store, resource)
        return {"removed": report.removed, "revoked": report.revoked,
                "not_revoked": report.not_revoked}
    if action == "login":
        oauth = OAuth(redirect=FormLogin(), store=store)
        await oauth.login(resource)
        return {"ok": True, "token": token_hash(oauth)}
    oauth = OAuth(redirect=refuse_to_authorize, store=store)
    async with Client(resource, auth=oauth) as client:
        result = await client.call_tool("read", {})
    return {"ok": True, "text": result.content[0].text,  # type: ignore[union-attr]
            "token": token_hash(oauth)}


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--wait" in args:
        print("ready", flush=True)
        sys.stdin.readline()
    answer = anyio.run(main, args[0], Path(args[1]), args[2])
    print(msgspec.json.encode(answer).decode(), flush=True)
