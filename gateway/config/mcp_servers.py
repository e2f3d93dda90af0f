"""MCP servers the gateway offers (`mcp_servers:` in config.yaml). Parsing and validation only; the
agent's MCP family (gateway/agent/mcp/) runs them, and is imported only when this list is not empty.

    mcp_servers:
      time:                               # the label: tools reach the model as time__<tool>
        command: uvx
        args: [mcp-server-time]
        env: {TZ: Europe/Oslo}            # the child gets only this environment (and PATH)
        allowed_tools: [get_current_time] # default: every tool the server lists
        timeout: 30                       # seconds per request to the server
        offer: all                        # all (every request, both APIs) | on_request
        require_approval: never           # the operator trusts the server (the default); always:
                                          # each call waits for the client's approval (Responses
                                          # API only: Chat Completions is not offered its tools)
      github:
        url: https://api.githubcopilot.com/mcp/
        headers: {Authorization: "Bearer ${GITHUB_TOKEN}"}   # ${NAME}: from the profile's environment

The errors name the server and the key that is wrong, never a header's value (it may be a secret).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

SERVER_KEYS = ("url", "headers", "command", "args", "env", "cwd", "allowed_tools", "timeout", "offer",
               "require_approval")
OFFER_CHOICES = ("all", "on_request")
APPROVAL_CHOICES = ("never", "always")
DEFAULT_TIMEOUT = 60.0
#: A label is what the model sees before `__` in a tool's name: OpenAI function names allow
#: letters, digits, `_` and `-`, 64 characters in all.
_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class McpServerSpec:
    label: str
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    #: None: every tool the server lists.
    allowed_tools: tuple[str, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT
    offer: str = "all"
    require_approval: str = "never"

    def describe(self) -> str:
        """One line for `config list`: never a header's or env value."""
        where = self.url if self.url is not None else " ".join([self.command or "", *self.args])
        parts = [f"offer {self.offer}", f"timeout {self.timeout:g} s"]
        if self.allowed_tools is not None:
            parts.append("tools " + ", ".join(self.allowed_tools))
        return f"{self.label}: {where} ({'; '.join(parts)})"


def parse_mcp_servers(raw: Any, env: Mapping[str, str]) -> tuple[McpServerSpec, ...]:
    """`raw` is the `mcp_servers` section; `env` the profile's environment for `${NAME}`."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ValueError("mcp_servers is a mapping of label -> server (url or command)")
    return tuple(_server(str(label), value, env) for label, value in raw.items())


def _server(label: str, value: Any, env: Mapping[str, str]) -> McpServerSpec:
    where = f"mcp_servers.{label}"
    if not _LABEL.match(label) or "__" in label:
        raise ValueError(f"{where}: a label is 1-32 letters, digits, '_' or '-' (no '__')")
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected a mapping with url or command")
    unknown = [str(key) for key in value if key not in SERVER_KEYS]
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; a server has {', '.join(SERVER_KEYS)}")
    url, command = value.get("url"), value.get("command")
    if (url is None) == (command is None):
        raise ValueError(f"{where}: give exactly one of url (Streamable HTTP) or command (stdio)")
    timeout = value.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"{where}: timeout is a number of seconds above 0")
    spec: dict[str, Any] = {
        "allowed_tools": _names(value.get("allowed_tools"), where),
        "timeout": float(timeout),
        "offer": _choice(value, "offer", OFFER_CHOICES, "all", where),
        "require_approval": _choice(value, "require_approval", APPROVAL_CHOICES, "never", where),
    }
    if url is not None:
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ValueError(f"{where}: url is an http(s) URL")
        for key in ("command", "args", "env", "cwd"):
            if key in value:
                raise ValueError(f"{where}: {key} is for a stdio server (command), not a url")
        return McpServerSpec(label, url=url, headers=_strings(value.get("headers"), "headers", where, env), **spec)
    if "headers" in value:
        raise ValueError(f"{where}: headers are for a url server, not a command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"{where}: command is the program to run, like uvx")
    args = value.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise ValueError(f"{where}: args is a list of strings")
    cwd = value.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError(f"{where}: cwd is a directory path")
    return McpServerSpec(label, command=command.strip(), args=tuple(_expand(str(a), env, where) for a in args),
                         env=_strings(value.get("env"), "env", where, env), cwd=cwd, **spec)


def _strings(value: Any, key: str, where: str, env: Mapping[str, str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: {key} is a mapping of name -> value")
    out: dict[str, str] = {}
    for name, item in value.items():
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ValueError(f"{where}: {key}.{name} is a string")
        out[str(name)] = _expand(str(item), env, f"{where}: {key}.{name}")
    return out


def _expand(text: str, env: Mapping[str, str], where: str) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise ValueError(f"{where}: ${{{name}}} is not set in the environment or the profile's .env")
        return env[name]

    return _ENV_REF.sub(one, text)


def _names(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{where}: allowed_tools is a list of tool names")
    return tuple(dict.fromkeys(item.strip() for item in value if item.strip()))


def _choice(value: Mapping[str, Any], key: str, choices: tuple[str, ...], default: str, where: str) -> str:
    item = value.get(key, default)
    if not isinstance(item, str) or item not in choices:
        raise ValueError(f"{where}: {key} is one of {', '.join(choices)}, not {item!r}")
    return item
