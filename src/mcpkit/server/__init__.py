"""The server framework: registries of tools, resources and prompts, the handler context,
and the engine that answers requests of both eras."""
