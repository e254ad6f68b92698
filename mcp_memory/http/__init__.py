"""The REST transport (README, REST) and MCP streamable HTTP at /mcp: thin doors onto the core."""
