"""A small MCP server (the official `mcp` SDK) with a search tool: an archive the research loop uses
as a data source beside the web. `python -m tests.agent.research.archive_mcp` serves it on stdio,
`... archive_mcp PORT` as Streamable HTTP on http://127.0.0.1:PORT/mcp."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

ARCHIVE_FACT = "The harbour archive records that Tomas Varga drew the lighthouse plans in Bergen."


def build() -> MCPServer:
    server = MCPServer("archive")

    @server.tool()
    def search_archive(text: str) -> str:
        """Search the harbour archive."""
        return ARCHIVE_FACT if "lighthouse" in text.lower() or "island" in text.lower() else "No records."

    @server.tool()
    def shelve(box: str) -> str:
        """Shelve a box (not a data source: its name says nothing of searching)."""
        return f"shelved {box}"

    return server


if __name__ == "__main__":
    import sys

    if len(sys.argv) < 2:
        build().run("stdio")
    else:
        import uvicorn

        uvicorn.run(build().streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
