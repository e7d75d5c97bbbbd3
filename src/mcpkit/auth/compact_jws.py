"""Reading the header of a compact JWS someone sent (an access token, a DPoP proof) before
anything about it is trusted: bounded in size, three parts, a header that decodes. Shared by
the access-token and the DPoP-proof checks, which say what went wrong in their own terms."""

from __future__ import annotations

from typing import Any

from joserfc import jws
from joserfc.errors import JoseError

from mcpkit.auth.resource import InvalidToken

DECODE_ERRORS = (JoseError, ValueError, TypeError, KeyError, IndexError, UnicodeError,
                 OverflowError, RecursionError, AttributeError)
"""What a broken JWS can make joserfc (or base64/json below it) raise: all mean "refused"."""


def untrusted_header(value: str, *, max_chars: int, what: str,
                     refusal: type[InvalidToken] = InvalidToken) -> dict[str, Any]:
    """The protected header of the compact JWS `value` (`what` names it in errors, e.g. "the
    access token"), or `refusal` saying why it cannot be read. Nothing is verified yet."""
    return dict(untrusted_compact(value, max_chars=max_chars, what=what,
                                  refusal=refusal).protected)


def untrusted_compact(value: str, *, max_chars: int, what: str,
                      refusal: type[InvalidToken] = InvalidToken) -> jws.CompactSignature:
    """The compact JWS `value` split and decoded once (its header, payload and signature
    segments), for a check that reads the header and then verifies the same object with
    `jws.validate_compact` instead of parsing it again; `refusal` as `untrusted_header`."""
    if len(value) > max_chars:
        raise refusal(f"{what} is over {max_chars} characters")
    if value.count(".") != 2:
        raise refusal(f"{what} is not a JWT (a signed compact JWS)")
    try:
        return jws.extract_compact(value.encode("ascii"))
    except DECODE_ERRORS:
        raise refusal(f"{what} does not decode as a JWT") from None
