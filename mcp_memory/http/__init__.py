"""The REST transport (CONTRACT §4) and MCP streamable HTTP at /mcp: thin doors onto the core."""
