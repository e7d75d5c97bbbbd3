"""`python -m mcpkit` is the `mcpkit` command."""

import sys

from mcpkit.cli import main

sys.exit(main())
