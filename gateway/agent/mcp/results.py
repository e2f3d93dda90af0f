"""What an MCP server hands back, typed: tool specs, call results, and the three ways a call fails.

The failures carry OpenAI's `mcp_call.error` kinds (openai-python `McpToolCallError`):

    McpError                   base; `kind` names OpenAI's error type, `error_object()` is its body
    ├── McpProtocolError       mcp_protocol_error {code, message}: a JSON-RPC error, a reply that is
    │                          not MCP (garbage, a wrong shape, too large), an unsupported feature
    └── McpHttpError           http_error {code, message}: the transport failed (an HTTP status, no
                               connection, a crashed process, a call past its timeout: 504)

A tool that ran and said it failed (`isError: true`) is not an exception: `CallResult.is_error` is
set, the model reads the output, and `CallResult.error_object()` is the
`mcp_tool_execution_error {content}` body for the item.

Everything here is parsed leniently from plain JSON (a server is untrusted: unknown content types
become a note, wrong types are skipped), and bounded: at most MAX_TOOLS tools are kept per server,
the text the model sees is cut at MAX_OUTPUT_BYTES with a note saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from providers.errors import AgentGatewayError

MAX_TOOLS = 128
MAX_OUTPUT_BYTES = 64 * 1024
#: JSON-RPC's code for a reply that is not valid JSON-RPC (used for garbage and wrong shapes)
PARSE_ERROR = -32700
INVALID_REPLY = -32603


class McpError(AgentGatewayError):
    """A failed MCP exchange; `error_object()` is OpenAI's `mcp_call.error` for it."""

    kind: ClassVar[str] = "mcp_protocol_error"

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def error_object(self) -> dict[str, Any]:
        return {"type": self.kind, "code": self.code, "message": self.message}


class McpProtocolError(McpError):
    """The server answered with a JSON-RPC error, or with something that is not MCP."""

    kind = "mcp_protocol_error"


class McpHttpError(McpError):
    """The transport failed: an HTTP status, no connection, a dead process, or a timeout (504)."""

    kind = "http_error"


@dataclass(frozen=True)
class ToolSpec:
    """One tool as `tools/list` described it (OpenAI's `McpListToolsTool` fields)."""

    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    annotations: dict[str, Any] | None = None

    @property
    def read_only(self) -> bool:
        """The server's own `readOnlyHint` (what OpenAI's `allowed_tools.read_only` filters on)."""
        return bool(self.annotations and self.annotations.get("readOnlyHint") is True)

    def as_item_tool(self) -> dict[str, Any]:
        """The tool as an `mcp_list_tools` item lists it."""
        body: dict[str, Any] = {"name": self.name, "input_schema": self.input_schema}
        if self.description is not None:
            body["description"] = self.description
        if self.annotations is not None:
            body["annotations"] = self.annotations
        return body


@dataclass(frozen=True)
class ToolList:
    tools: tuple[ToolSpec, ...]
    dropped: int = 0  # tools past MAX_TOOLS (or malformed) that were not kept

    def get(self, name: str) -> ToolSpec | None:
        return next((tool for tool in self.tools if tool.name == name), None)


@dataclass(frozen=True)
class ImagePart:
    data: str  # base64, as the server sent it
    mime_type: str


@dataclass(frozen=True)
class ResourceLink:
    uri: str
    name: str | None = None
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True)
class CallResult:
    """A `tools/call` result. `output` is what the model reads (cut at MAX_OUTPUT_BYTES with a
    note), `texts` the text parts as sent, `structured` the `structuredContent` object."""

    output: str
    texts: tuple[str, ...] = ()
    structured: dict[str, Any] | None = None
    images: tuple[ImagePart, ...] = ()
    resource_links: tuple[ResourceLink, ...] = ()
    is_error: bool = False
    truncated: bool = False
    content: list[Any] = field(default_factory=list)  # the raw `content` array, for the error body

    def error_object(self) -> dict[str, Any] | None:
        """OpenAI's `mcp_tool_execution_error` when the tool reported `isError`, else None."""
        if not self.is_error:
            return None
        return {"type": "mcp_tool_execution_error", "content": self.content}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_tools(pages: list[Any]) -> ToolList:
    """The tools of one or more `tools/list` results, the first MAX_TOOLS well-formed ones kept."""
    kept: list[ToolSpec] = []
    dropped = 0
    seen: set[str] = set()
    for page in pages:
        tools = page.get("tools") if isinstance(page, dict) else None
        if not isinstance(tools, list):
            raise McpProtocolError(INVALID_REPLY, "tools/list returned no `tools` list")
        for tool in tools:
            name = _str(tool.get("name")) if isinstance(tool, dict) else None
            schema = tool.get("inputSchema") if isinstance(tool, dict) else None
            if not name or name in seen or not isinstance(schema, dict) or len(kept) >= MAX_TOOLS:
                dropped += 1
                continue
            seen.add(name)
            annotations = tool.get("annotations")
            kept.append(ToolSpec(name=name, input_schema=schema, description=_str(tool.get("description")),
                                 annotations=annotations if isinstance(annotations, dict) else None))
    return ToolList(tools=tuple(kept), dropped=dropped)


def cut_output(text: str, limit: int = MAX_OUTPUT_BYTES) -> tuple[str, bool]:
    """`text` within `limit` UTF-8 bytes, with a note when it was cut."""
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= limit:
        return text, False
    kept = encoded[:limit].decode("utf-8", "ignore")
    note = f"\n[the tool's result was {len(encoded):,} bytes; only the first {limit:,} are shown]"
    return kept + note, True


def _part_text(part: dict[str, Any], images: list[ImagePart], links: list[ResourceLink],
               texts: list[str]) -> str | None:
    kind = part.get("type")
    if kind == "text":
        text = _str(part.get("text"))
        if text is not None:
            texts.append(text)
        return text
    if kind == "image":
        data, mime = _str(part.get("data")), _str(part.get("mimeType")) or "application/octet-stream"
        if data is None:
            return None
        images.append(ImagePart(data=data, mime_type=mime))
        return f"[image: {mime}, {len(data) * 3 // 4:,} bytes]"
    if kind == "resource_link":
        uri = _str(part.get("uri"))
        if uri is None:
            return None
        link = ResourceLink(uri=uri, name=_str(part.get("name")), title=_str(part.get("title")),
                            description=_str(part.get("description")), mime_type=_str(part.get("mimeType")))
        links.append(link)
        return f"[resource: {link.title or link.name or uri} <{uri}>]"
    if kind == "resource":
        resource = part.get("resource")
        if not isinstance(resource, dict):
            return None
        text = _str(resource.get("text"))
        if text is not None:
            return text
        return f"[embedded resource {_str(resource.get('uri')) or ''} ({_str(resource.get('mimeType')) or 'binary'})]"
    if kind == "audio":
        return f"[audio: {_str(part.get('mimeType')) or 'unknown type'}]"
    return f"[content of type {kind!r} left out]" if isinstance(kind, str) else None


def parse_call_result(result: Any, limit: int = MAX_OUTPUT_BYTES) -> CallResult:
    """A `tools/call` result read leniently; the text the model sees is cut at `limit` bytes."""
    if not isinstance(result, dict):
        raise McpProtocolError(INVALID_REPLY, "tools/call returned a result that is not an object")
    content = result.get("content")
    content = [part for part in content if isinstance(part, dict)] if isinstance(content, list) else []
    structured = result.get("structuredContent")
    structured = structured if isinstance(structured, dict) else None
    images: list[ImagePart] = []
    links: list[ResourceLink] = []
    texts: list[str] = []
    pieces = [piece for part in content if (piece := _part_text(part, images, links, texts)) is not None]
    if structured is not None and not texts:
        # The spec asks servers to repeat structuredContent as text; when one does not, the model
        # still needs to read it.
        pieces.append(json.dumps(structured, ensure_ascii=False))
    output, truncated = cut_output("\n".join(pieces), limit)
    return CallResult(output=output, texts=tuple(texts), structured=structured, images=tuple(images),
                      resource_links=tuple(links), is_error=result.get("isError") is True,
                      truncated=truncated, content=content)
