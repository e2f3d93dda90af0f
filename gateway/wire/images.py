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


def without_images(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The messages with every chat `image_url` part replaced by IMAGE_NOTE (new message objects
    where one changed, the others as they were; a message left with text parts only becomes one
    string), and how many images were replaced: a turn for a route whose model reads no images."""
    out: list[dict[str, Any]] = []
    replaced = 0
    for message in messages:
        content = message.get("content")
        if content.__class__ is not list or not any(_is_image(part) for part in content):
            out.append(message)
            continue
        parts = []
        for part in content:
            if _is_image(part):
                replaced += 1
                parts.append({"type": "text", "text": IMAGE_NOTE})
            else:
                parts.append(part)
        if all(isinstance(p, dict) and p.get("type") == "text" for p in parts):
            out.append({**message, "content": "\n\n".join(str(p.get("text", "")) for p in parts)})
        else:
            out.append({**message, "content": parts})
    return out, replaced


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "image_url"
