"""The MCP client layer: tools from Model Context Protocol servers, for the agent loop.

    registry.McpRegistry      the servers of this process: `server(label)` for a configured one
                              (one stdio child per server), `open_url(label, url, headers)` for
                              one a request names (SSRF-guarded), `close()`
    server.McpServer          one server: `list_tools()` -> results.ToolList of ToolSpec,
                              `call_tool(name, arguments, timeout)` -> results.CallResult, `close()`
    http.HttpConnection       Streamable HTTP, 2025-11-25 or 2026-07-28 (found per server)
    stdio.StdioConnection     a child process speaking JSON-RPC lines
    results                   the typed results and errors (OpenAI's `mcp_call.error` kinds)
    wire                      JSON-RPC framing of both eras, SSE events

Nothing here is imported until an MCP server is used (tests/agent/mcp/test_mcp_imports.py).
"""
