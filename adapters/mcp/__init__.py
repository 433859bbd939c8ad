"""The MCP surface: OpenClaw's learning-backend tools and our /learning commands over MCP
(stdio and Streamable HTTP), and the `/v1` REST routes OpenClaw's gateway calls over HTTP."""
