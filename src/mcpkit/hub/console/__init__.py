"""The hub's web console: what users click instead of curl, served by `mcpkit hub serve` at
the hub's root URL `/`.

Server-rendered Jinja2 templates (templates/), one first-party style sheet and one small
first-party script (static/) for progressive enhancement - every page works without it; no
third-party script, no CDN, no build step. The console signs in through the hub's own
authorization server (sign_in.py) and acts only through the hub's REST API with the user's
token (hub_calls.py): no back door.

    app.include_router(console.routes.router())     # api/app.py
"""
