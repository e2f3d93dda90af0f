"""Inline tool-progress markers in chat content, and their removal from returned history.

Frontends save streamed content and send it back next turn; a model that sees its earlier
answers begin with `🔍 query` markers learns to type them instead of calling tools. So the
gateway strips exactly the markers it writes from assistant messages before the model sees them.
"""

from __future__ import annotations

import re

MARKER_ICONS = ("🔍", "📄", "🕸️", "🔧")
_MARKER_LINE = re.compile(
    r"^[ \t]*`(?:" + "|".join(re.escape(icon) for icon in MARKER_ICONS) + r")[^`\n]*`[ \t]*(?:\n|$)",
    re.MULTILINE,
)

_MARKER_OPENINGS = tuple("`" + icon for icon in MARKER_ICONS)


def format_marker(text: str) -> str:
    """The content chunk streamed for one tool call: a backticked line and a blank line."""
    flat = " ".join(text.replace("`", "'").split())
    if len(flat) > 120:
        flat = flat[:117] + "..."
    return f"`{flat}`\n\n"


def strip_markers(content: str) -> str:
    """Remove the gateway's marker lines; other text (and other backticks) is left untouched."""
    # every marker line holds a backtick followed by an icon: without one there is nothing to strip,
    # and four substring searches are far cheaper than the line regex over a long answer
    if not any(opening in content for opening in _MARKER_OPENINGS):
        return content
    stripped = _MARKER_LINE.sub("", content)
    return stripped.lstrip("\n") if stripped != content else content
