"""mcpkit: the complete Model Context Protocol stack."""

__version__ = "0.1.0"
