"""A turn's file parts read into text parts (gateway/files/parts.py), and cut to a budget."""

from __future__ import annotations

import base64

from gateway.files.parts import cut_files, has_files, read_file_parts
from gateway.wire import context_budget

TEXT = "\n".join(f"line {n}: some words of the document" for n in range(400)).encode()


def _file(name: str = "notes.txt") -> dict[str, object]:
    return {"type": "file", "file": {"filename": name, "file_data": base64.b64encode(TEXT).decode()}}


async def test_a_message_of_text_and_files_becomes_one_string_and_others_are_untouched() -> None:
    plain = {"role": "system", "content": "Be brief."}
    messages = [plain, {"role": "user", "content": [_file(), {"type": "text", "text": "Summarize."}]}]
    assert has_files(messages) and not has_files([plain])
    out, read = await read_file_parts(messages, param="messages")
    assert out[0] is plain and len(read) == 1
    assert out[1]["content"].startswith("[file: notes.txt]\n\nline 0:") and out[1]["content"].endswith("Summarize.")


async def test_cutting_files_removes_what_was_asked_and_notes_it_in_parts_and_strings() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    messages = [{"role": "user", "content": [_file("a.txt"), image]},
                {"role": "user", "content": [_file("b.txt"), {"type": "text", "text": "Compare."}]}]
    out, read = await read_file_parts(messages, param="messages")
    before = context_budget.tokens(out)
    assert cut_files(read, 3000)
    after = context_budget.tokens(out)
    assert before - after >= 3000
    assert out[0]["content"][1] is image and "cut to fit the model's context window" in out[0]["content"][0]["text"]
    assert out[1]["content"].endswith("Compare.") and out[1]["content"].startswith("[file: b.txt]")
    assert not cut_files(read, 10**6)  # more than the files hold
