"""One process of the persistent-login tests: `Client(resource, auth=OAuth(store=…))` calls the
`read` tool once and prints one JSON line (ok, the tool's text, a hash of the access token it
ended with - never the token).

    python -m tests.client.oauth_store_worker RESOURCE STORE_DIR [--login] [--wait] [--keyring]
                                              [--dpop]

--login   may authorize (follows the test AS's redirect); without it any authorization
          attempt fails the run: the login must come from the store
--wait    print "ready" once imported and wait for a line on stdin before calling (so the
          race test can release all its processes at once)
--keyring the keyring store (the Secret Service on the bus in the environment), else the file
          store
--dpop    OAuth(dpop=True): a new DPoP key in each process (a stored DPoP-bound login brings
          its own)"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import anyio
import msgspec

from mcpkit import Client
from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_redirect import follow_location
from mcpkit.client.token_store import open_token_store

ERA = "2025-11-25"


async def refuse_to_authorize(url: str) -> str:
    raise SystemExit("asked to authorize: the stored login was not used")


async def main(resource: str, directory: Path, login: bool, kind: str,
               dpop: bool) -> dict[str, object]:
    store = open_token_store(kind, directory=directory)
    assert store.kind == kind
    oauth = OAuth(redirect=follow_location if login else refuse_to_authorize, store=store,
                  dpop=dpop)
    async with Client(resource, era=ERA, auth=oauth) as client:
        result = await client.call_tool("read", {})
    tokens = oauth.tokens
    assert tokens is not None
    return {"ok": True, "text": result.content[0].text,  # type: ignore[union-attr]
            "token": hashlib.sha256(tokens.access_token.encode()).hexdigest()}


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--wait" in args:
        print("ready", flush=True)
        sys.stdin.readline()
    report = anyio.run(main, args[0], Path(args[1]), "--login" in args,
                       "keyring" if "--keyring" in args else "file", "--dpop" in args)
    print(msgspec.json.encode(report).decode(), flush=True)
