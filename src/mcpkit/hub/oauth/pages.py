"""The hub's sign-in and consent pages: server-rendered HTML, every value escaped, no
scripts. Each form carries the CSRF token (the value of the CSRF cookie: double submit) and
posts back to the authorization request's own URL, so the request rides along unchanged."""

from __future__ import annotations

import html

from starlette.responses import HTMLResponse

PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
STYLE = ("body{font-family:sans-serif;max-width:28em;margin:4em auto;padding:0 1em}"
         "label,input,button{display:block;margin:.4em 0}.error{color:#a00}")


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    text = (f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}"
            f"</title><style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
            f"{body}</body></html>")
    return HTMLResponse(text, status_code=status, headers=PAGE_HEADERS)


def _form(action: str, csrf: str, inner: str) -> str:
    return (f'<form method="post" action="{html.escape(action)}">'
            f'<input type="hidden" name="csrf_token" value="{html.escape(csrf)}">'
            f"{inner}</form>")


def sign_in_page(action: str, csrf: str, reason: str, *, error: str | None = None,
                 status: int = 200, provider: str | None = None) -> HTMLResponse:
    """`reason` (why a sign-in is asked for: a sentence), the password form, and below it
    "Sign in with PROVIDER" when an OpenID Connect provider is set up (its own form: it posts
    action=oidc, with the CSRF token)."""
    notice = f'<p class="error">{html.escape(error)}</p>' if error else ""
    inner = ('<input type="hidden" name="prompt" value="login">'
             '<label>User <input name="username" autocomplete="username" required></label>'
             '<label>Password <input type="password" name="password" '
             'autocomplete="current-password" required></label>'
             '<button type="submit" name="action" value="sign-in">Sign in</button>')
    external = ""
    if provider is not None:
        external = _form(action, csrf, '<input type="hidden" name="prompt" value="oidc">'
                         '<button type="submit" name="action" value="oidc">Sign in with '
                         f"{html.escape(provider)}</button>")
    return _page("Sign in to the mcpkit hub",
                 f"<p>{html.escape(reason)}</p>{notice}"
                 + _form(action, csrf, inner) + external, status)


def consent_page(action: str, csrf: str, client_name: str, user: str, scope: str, *,
                 redirect_host: str) -> HTMLResponse:
    """Names the redirect URI's host: the MCP authorization spec requires it to be shown
    (a metadata document cannot stop another app from claiming a loopback redirect)."""
    inner = ('<input type="hidden" name="prompt" value="consent">'
             '<button type="submit" name="action" value="allow">Allow</button>'
             '<button type="submit" name="action" value="deny">Deny</button>')
    return _page("Allow access?",
                 f"<p><b>{html.escape(client_name)}</b> asks to use the hub's MCP endpoint "
                 f"as <b>{html.escape(user)}</b> (scope: {html.escape(scope)}).</p>"
                 f"<p>After this you are sent back to <b>{html.escape(redirect_host)}</b>.</p>"
                 + _form(action, csrf, inner))


def error_page(message: str, status: int) -> HTMLResponse:
    return _page("Cannot continue", f'<p class="error">{html.escape(message)}</p>', status)


def notice_page(title: str, message: str, status: int = 200) -> HTMLResponse:
    """A page that only tells something (an upstream login finished, say)."""
    return _page(title, f"<p>{html.escape(message)}</p>", status)
