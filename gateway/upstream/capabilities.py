"""What an upstream's `/v1/models` entry says a model can do beyond text (its context window is
gateway/upstream/context_window.py's). Read once per route when the model lists are fetched."""

from __future__ import annotations

from typing import Any

#: Words servers use in a model's capability list for "reads images".
_IMAGE_CAPABILITIES = frozenset({"vision", "image", "multimodal"})


def _strings(value: Any) -> set[str]:
    return {item.lower() for item in value if isinstance(item, str)} if isinstance(value, list) else set()


def sees_images(entry: dict[str, Any]) -> bool:
    """Whether the entry says the model reads images: OpenRouter's `architecture.input_modalities`
    (or a top-level `input_modalities`), a `capabilities` list (Ollama-style words), LM Studio's
    `type: vlm`, LiteLLM's `supports_vision`. Silence means no: a text model sent an image fails
    the whole turn, a vision model sent a note loses only the picture."""
    architecture = entry.get("architecture")
    modalities = _strings(architecture.get("input_modalities")) if isinstance(architecture, dict) else set()
    modalities |= _strings(entry.get("input_modalities"))
    if "image" in modalities:
        return True
    if _strings(entry.get("capabilities")) & _IMAGE_CAPABILITIES:
        return True
    return entry.get("type") == "vlm" or entry.get("supports_vision") is True
