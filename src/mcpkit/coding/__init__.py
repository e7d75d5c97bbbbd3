"""`mcpkit serve`: the built-in coding tools server an agent sandbox runs.

    mcpkit serve [--workspace DIR] [--transport http|stdio] [--port 65510] [--token T]

The tools are ordinary mcpkit tools on an ordinary `Server` (`build_server`); each module
or package registers one family: `files` (view/read, write, edit, patch), `search` (glob,
grep, ls), `shell` (bash, bash_output, bash_kill), `diagnostics`, `fetch` and `agent`.
"""
