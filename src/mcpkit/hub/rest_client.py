"""`HubRestClient`: the hub's REST API called with a user's API token, for the `mcpkit hub
upstream …` commands. Standard library only (urllib), so the commands work without the `hub`
extra on a machine that only talks to a hub.

    client = HubRestClient("http://127.0.0.1:8765", token, timeout_s=60)
    page = client.call("GET", "/api/v1/users/mcp/upstreams", query={"limit": 200})

Every failure is a `HubRequestError` whose message is one line for people: the API's own
`{"error": {code, message, field}}` as `field: message`, or what went wrong on the way (no
hub at that address, a timeout, an answer that is not the API's). The token is sent only to
the address given - redirects are not followed, since they would carry it elsewhere - and is
never part of a message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from mcpkit.errors import InvalidArgument
from mcpkit.protocol.errors import INTERNAL_ERROR, McpError

DEFAULT_TIMEOUT_S = 60.0
"""How long one request may take: a refresh waits for the upstream's own timeouts."""
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""The largest answer read from the hub (a page of tools with big schemas fits easily)."""


class HubRequestError(McpError):
    """A REST call failed; `status` is the HTTP status (0 when there was no answer) and the
    message says why in one line."""

    def __init__(self, message: str, *, status: int = 0, code: str = "") -> None:
        super().__init__(INTERNAL_ERROR, message)
        self.status = status
        self.error_code = code


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None  # urllib then raises the 3xx as an HTTPError


def check_hub_url(url: str) -> str:
    """The hub's base URL without a trailing slash; `InvalidArgument`, a ValueError (the
    message names the problem), for anything but http(s)://host[:port][/prefix]."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgument(f"--hub: {url!r} is not an http:// or https:// URL")
    if parts.query or parts.fragment:
        raise InvalidArgument("--hub: give the hub's address without a query or fragment")
    return url.rstrip("/")


class HubRestClient:
    def __init__(self, base_url: str, token: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.base_url = check_hub_url(base_url)
        self._token = token
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._opener = urllib.request.build_opener(_NoRedirects())

    def call(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
             body: Any = None) -> Any:
        """The decoded JSON answer (None for 204), or `HubRequestError`."""
        url = self.base_url + path
        if query:
            url += "?" + urlencode({k: _query_value(v) for k, v in query.items()
                                    if v is not None})
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                status = response.status
                raw = self._read(response)
        except urllib.error.HTTPError as error:
            with error:
                raise self._refusal(error.code, self._read(error)) from None
        except TimeoutError:
            raise HubRequestError(f"the hub at {self.base_url} did not answer within "
                                  f"{self.timeout_s:g} s (--timeout)") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise HubRequestError(f"cannot reach the hub at {self.base_url} ({reason}); is "
                                  "`mcpkit hub serve` running there? (--hub, $MCPKIT_HUB_URL)"
                                  ) from None
        if status == 204 or not raw:
            return None
        return self._decode(raw, status)

    def _read(self, response: Any) -> bytes:
        raw: bytes = response.read(self.max_response_bytes + 1)
        if len(raw) > self.max_response_bytes:
            raise HubRequestError(f"the hub's answer is over {self.max_response_bytes} bytes")
        return raw

    def _decode(self, raw: bytes, status: int) -> Any:
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise HubRequestError(f"the answer from {self.base_url} (HTTP {status}) is not "
                                  "JSON: is --hub the hub's address?", status=status) from None

    def _refusal(self, status: int, raw: bytes) -> HubRequestError:
        """The API's error as `field: message`; a hint for the one the user fixes locally."""
        try:
            detail = json.loads(raw)["error"]
            message, field, code = str(detail["message"]), detail.get("field"), detail["code"]
        except (ValueError, UnicodeDecodeError, KeyError, TypeError):
            return HubRequestError(f"the hub at {self.base_url} answered HTTP {status} without "
                                   "the API's error shape: is --hub the hub's address?",
                                   status=status)
        text = f"{field}: {message}" if field else message
        if status == 401:
            text += ("; give a valid token with --token or $MCPKIT_HUB_TOKEN (an operator "
                     "makes one: mcpkit hub token create USER)")
        return HubRequestError(text, status=status, code=str(code))


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
