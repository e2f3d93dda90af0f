"""What an image in a message costs the model, by OpenAI's vision rules. Pure.

`detail: "low"` is a flat 85 tokens. Otherwise (`high`, and `auto`, counted as high to err high)
the image is scaled to fit in 2048 x 2048, then so that its shorter side is at most 768 px, and
costs 85 + 170 per 512 px tile it covers: a 1024 x 1024 image is 4 tiles, 765 tokens, whatever
its base64 weighs. The size is read from the image's header (PNG, JPEG, GIF, WebP and the other
formats `imagesize` knows) in the first bytes of a `data:` URL; an image given by URL, or one
whose header cannot be read, counts as the most an image can cost.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from typing import Any

LOW_DETAIL = 85
BASE = 85
PER_TILE = 170
#: the most a high-detail image costs: 768 x 2048 after scaling, 2 x 4 tiles
MOST = BASE + PER_TILE * 8
#: base64 characters decoded to find the size: 64 KiB of image, room for a JPEG's EXIF before its
#: frame header (a header further in is not found, and the image counts as MOST)
_HEAD_CHARS = 4 * (64 * 1024 // 3)


def image_tokens(part: dict[str, Any]) -> int:
    """The tokens of a chat `image_url` part."""
    image = part.get("image_url")
    url, detail = (image.get("url"), image.get("detail")) if isinstance(image, dict) else (image, None)
    if detail == "low":
        return LOW_DETAIL
    size = _data_url_size(url) if isinstance(url, str) else None
    return MOST if size is None else tiles_tokens(*size)


def tiles_tokens(width: int, height: int) -> int:
    if width <= 0 or height <= 0:
        return MOST
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return BASE + PER_TILE * math.ceil(w / 512) * math.ceil(h / 512)


def _data_url_size(url: str) -> tuple[int, int] | None:
    if not url.startswith("data:"):
        return None
    comma = url.find(",", 0, 256)
    if comma < 0 or ";base64" not in url[:comma]:
        return None
    head = url[comma + 1:comma + 1 + _HEAD_CHARS]
    try:
        data = base64.b64decode(head[:len(head) - len(head) % 4])
    except (binascii.Error, ValueError):
        return None
    import imagesize  # small and pure Python; imported the first time an image is estimated

    try:
        width, height = imagesize.get(io.BytesIO(data))
    except Exception:  # noqa: BLE001 - a header it cannot parse is an image of unknown size
        return None
    return (width, height) if width > 0 and height > 0 else None
