"""The `user` of the CLI tests (a HOME and a project of their own), shared by the files that
drive `mcpkit mcp …` as a subprocess."""

from tests.manager.test_cli import user  # noqa: F401 (a fixture)
