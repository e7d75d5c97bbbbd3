"""The REST API's routers, each made for the app's settings (page limits come from them)."""
