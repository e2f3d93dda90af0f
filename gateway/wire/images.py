"""Images on their way to the model: a chat `image_url` part for a model that reads images, a short
text note for one that does not (so a text-only upstream gets a turn it can take, not a 400). Pure.

The route says which (`vision:` on a route in config.yaml, or what its upstream's model list
says: gateway/upstream/capabilities.py). Used for the images a tool returns (`function_call_output`
parts) and for a message's `input_image` parts.
"""

from __future__ import annotations

from typing import Any

#: What a model that reads no images is told in an image's place.
IMAGE_NOTE = "(an image was here; it is not shown, as this model does not read images)"
DETAILS = ("low", "high", "auto", "original")


def image_url_of(part: dict[str, Any]) -> str | None:
    """The URL (`data:` or https) of a Responses `input_image` or chat `image_url` part."""
    if part.get("type") == "input_image":
        url = part.get("image_url")
    else:
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
    return url if isinstance(url, str) else None


def image_part(part: dict[str, Any], vision: bool) -> dict[str, Any]:
    """An image part (Responses `input_image`, or chat `image_url`) as a chat content part: an
    `image_url` part for a model that reads images, else a text part holding IMAGE_NOTE."""
    url = image_url_of(part)
    if not vision or url is None:
        return {"type": "text", "text": IMAGE_NOTE}
    image: dict[str, Any] = {"url": url}
    nested = part.get("image_url")
    detail = part.get("detail", nested.get("detail") if isinstance(nested, dict) else None)
    if detail in DETAILS:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}
