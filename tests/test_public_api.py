from __future__ import annotations

import subprocess
import sys


def test_import_mcpkit() -> None:
    import mcpkit

    assert mcpkit.__name__ == "mcpkit"


def test_protocol_package_imports_no_io_libraries() -> None:
    code = (
        "import sys; import mcpkit, mcpkit.protocol;"
        "io = ('asyncio', 'anyio', 'socket', 'subprocess', 'httpx', 'aiohttp', 'starlette',"
        " 'uvicorn');"
        "print([m for m in io if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
