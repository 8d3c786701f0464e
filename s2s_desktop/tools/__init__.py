"""Tools the assistant can call (no Qt): built-in ones, each a small module in `builtin/`,
and the user's MCP servers (`mcp_servers.py`), gathered in one ToolBox; `rounds.py` runs a
turn's bounded tool rounds between the LLM and the tools."""
