"""MCP server: the memory tools and device tools for outside agents (the only package that
imports the `mcp` SDK, pinned to 1.x)."""
