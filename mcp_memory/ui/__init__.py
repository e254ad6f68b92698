"""Read-only review pages served at /ui by `mcp-memory serve-http` (and opened by `mcp-memory ui`)."""
