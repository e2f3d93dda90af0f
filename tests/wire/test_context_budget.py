"""The chat route's first look at an input's size (gateway/wire/context_budget.py): the one-encoding
bound must never say less than the per-message estimate it stands in for, or a turn over the
window would pass unchecked."""

from __future__ import annotations

import pytest

from gateway.wire import context_budget

INPUTS = [
    [{"role": "user", "content": "hi"}],
    [{"role": "system", "content": "Tu es concis. Réponds en français, s'il te plaît. ✨" * 40},
     {"role": "user", "content": "Quelle heure est-il à Zürich ?"}],
    [{"role": "user", "content": [{"type": "text", "text": "x" * 5000}]},
     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                            "function": {"name": "f", "arguments": "{}"}}]},
     {"role": "tool", "tool_call_id": "c1", "content": "12345678901234567890123 is past 64 bits"}],
    [{"role": "user", "content": "n"}, {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"id": {"type": "integer", "maximum": 123456789012345678901234}}}}}],
    [{"role": "user", "content": "\u00e9" * 3001}] * 3,
]


@pytest.mark.parametrize("fixed", INPUTS)
@pytest.mark.parametrize("max_output", [None, 0, 4096])
def test_the_one_encoding_bound_is_never_below_the_per_message_estimate(fixed, max_output):
    assert context_budget.fixed_tokens_at_most(fixed, max_output) >= context_budget.fixed_tokens(fixed, max_output)


def test_a_non_ascii_character_counts_one_token_per_utf8_byte() -> None:
    ascii_only = context_budget.message_tokens({"role": "user", "content": "a" * 3000})
    accented = context_budget.message_tokens({"role": "user", "content": "\u00e9" * 3000})  # 2 bytes each
    cjk = context_budget.message_tokens({"role": "user", "content": "\u4e2d" * 3000})  # 3 bytes each
    assert ascii_only < 1100 and accented >= 6000 and cjk >= 9000


def _image_message(url: str, detail: str | None = None) -> dict[str, object]:
    image: dict[str, object] = {"url": url}
    if detail is not None:
        image["detail"] = detail
    return {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                        {"type": "image_url", "image_url": image}]}


def test_an_image_of_1024_px_square_counts_by_tiles_not_by_its_base64_bytes() -> None:
    from tests.support.documents import data_url, noisy_png

    url = data_url(noisy_png(1024, 1024), "image/png")  # ~4 MB of base64: over a million tokens as bytes
    assert len(url) > 4_000_000
    tokens = context_budget.message_tokens(_image_message(url))
    assert 765 <= tokens < 800  # 85 + 170 x 4 tiles (768 x 768 after scaling), plus the text
    assert context_budget.message_tokens(_image_message(url, "low")) < 120
    assert context_budget.fixed_tokens_at_most([_image_message(url)], None) < 2000


@pytest.mark.parametrize(("size", "tokens"), [((512, 512), 255), ((2048, 4096), 1105), ((100, 100), 255),
                                              ((1024, 1024), 765), ((768, 2048), 1445)])
def test_image_tiles_follow_openais_scaling(size: tuple[int, int], tokens: int) -> None:
    from gateway.wire.image_tokens import tiles_tokens

    assert tiles_tokens(*size) == tokens


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_an_images_size_is_read_from_its_header_in_each_format(fmt: str) -> None:
    import io

    from PIL import Image

    from gateway.wire.image_tokens import image_tokens
    from tests.support.documents import data_url

    out = io.BytesIO()
    Image.new("RGB", (1500, 600)).save(out, format=fmt)
    part = {"type": "image_url", "image_url": {"url": data_url(out.getvalue(), f"image/{fmt.lower()}")}}
    assert image_tokens(part) == 85 + 170 * 6  # 1500 x 600: 3 x 2 tiles, no scaling


def test_an_image_by_url_or_with_an_unreadable_header_counts_the_most_an_image_can() -> None:
    from gateway.wire.image_tokens import MOST, image_tokens

    assert image_tokens({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}) == MOST
    assert image_tokens({"type": "image_url", "image_url": {"url": "data:image/png;base64,bm90IGFuIGltYWdl"}}) == MOST
