"""Many MCP servers at once: config files, `ServerManager`, the `mcpkit mcp` command.

    config.py       one `mcpServers.<name>` entry (ServerConfig), checked
    interpolate.py  ${VAR}, ${VAR:-default}, $$ in config strings
    configfile.py   the user and project files, scopes, editing
    imports.py      other tools' config files (Claude, Cursor, VS Code, Codex, OpenCode)
    managed.py      one server's life: start, catalog, crash watch, restart with backoff
    manager.py      ServerManager: all servers as one catalog, routing, hooks
    names.py        exposed names mcp__<server>__<tool> (≤ 64 chars, collisions, reverse map)
    permissions.py  the permission hook (allow / deny / ask)
    budget.py       the output budget (long text cut, head and tail kept)
    adapters.py     OpenAI and Anthropic tool formats and tool calls
    cli.py          mcpkit mcp …, mcpkit tools, mcpkit call
"""
