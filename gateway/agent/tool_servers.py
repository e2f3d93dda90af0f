"""An MCP server a request names, its approval policy, and the approvals a client answered: what the
wire hands the agent. Plain records: importing them loads no MCP client code (the wire imports them
for every Responses request)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolFilter:
    """OpenAI's approval filter (`{"tool_names": [...], "read_only": bool}`): a tool matches when it
    is named (if names are given) and its `readOnlyHint` is as asked (if `read_only` is given)."""

    names: frozenset[str] | None = None
    read_only: bool | None = None

    def matches(self, name: str, read_only: bool) -> bool:
        if self.names is None and self.read_only is None:
            return False  # an empty filter names no tool
        return (self.names is None or name in self.names) and (self.read_only is None or read_only == self.read_only)


@dataclass(frozen=True)
class ApprovalPolicy:
    """Which tools of a server need the client's approval before a call runs (`require_approval`).
    A tool the `always` filter matches needs it, else one the `never` filter matches does not, else
    `default` says."""

    default: bool
    always: ToolFilter | None = None
    never: ToolFilter | None = None

    def needed(self, name: str, read_only: bool = False) -> bool:
        if self.always is not None and self.always.matches(name, read_only):
            return True
        if self.never is not None and self.never.matches(name, read_only):
            return False
        return self.default


ALWAYS = ApprovalPolicy(True)
NEVER = ApprovalPolicy(False)


@dataclass(frozen=True)
class McpServerRequest:
    """An MCP server a request names (the Responses API's `mcp` tool). `url` None: the configured
    server of that label. `headers` are secrets: never stored, logged or echoed."""

    label: str
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    #: Tool names allowed; None: every tool the server lists.
    allowed_tools: tuple[str, ...] | None = None
    #: True: only tools the server marks `readOnlyHint`.
    read_only: bool = False
    #: Where the request named it, for a 400's `param` (`tools[2]`).
    param: str = "tools"
    #: The tools an `mcp_list_tools` item in the context lists (OpenAI's McpListToolsTool shape):
    #: used instead of asking the server again; None: list them.
    known_tools: tuple[dict[str, Any], ...] | None = None
    #: `require_approval` as given; None when absent (OpenAI's "always" for a URL; a configured
    #: server's own setting for a label without URL).
    approval: ApprovalPolicy | None = None
    #: `server_description`: told to the model with the server's tools.
    description: str | None = None


@dataclass(frozen=True)
class McpApproval:
    """A client's answer (`mcp_approval_response`) to an `mcp_approval_request` of an earlier
    response, still to be acted on: the call runs (`approve`) or the model is told it was denied."""

    request_id: str
    label: str
    name: str
    arguments: str
    approve: bool
    reason: str | None = None


def denied_output(reason: str | None) -> str:
    """What the model reads for a call the client did not approve (a tool message)."""
    said = f" The user said: {reason}" if reason else ""
    return f"The user denied this tool call, so it was not run.{said} Do not call it again for this request."
