"""The shelf MCP server (mcp_test_server.py) that fails its first start: with no $FLAKY_FLAG
file it writes one and exits before speaking MCP; started again, it serves."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

flag = Path(os.environ["FLAKY_FLAG"])
if not flag.exists():
    flag.write_text("failed once\n")
    print("flaky: failing on purpose the first time", file=sys.stderr)
    sys.exit(1)
runpy.run_path(str(Path(__file__).with_name("mcp_test_server.py")), run_name="__main__")
