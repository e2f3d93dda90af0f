"""Files in a turn (issue 47 part 1): a document sent inline is read on the gateway and reaches
the model as text headed by its filename, on both APIs, through the official SDK."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from aiohttp import web
from openai import AsyncOpenAI

from gateway.errors import InvalidRequestError
from tests.fakes.upstream import text
from tests.support.documents import data_url, scanned_pdf, text_pdf, two_page_pdf
from tests.support.helpers import assert_error_envelope


@pytest.fixture
async def sdk(client: Any) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as oai:
        yield oai


def _user_text(upstream: Any) -> str:
    """The last user message the upstream received, as one string."""
    [message] = [m for m in upstream.requests[-1]["messages"] if m["role"] == "user"][-1:]
    content = message["content"]
    return content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)


def _assert_page_two_table(sent: str) -> None:
    assert sent.startswith("[file: report.pdf]")
    page_two = sent[sent.index("[page 2]"):]
    assert "[page 1]" in sent and sent.index("[page 1]") < sent.index("[page 2]")
    assert "Quarterly report" not in page_two and "Sales by region" in page_two
    for row in (("Region", "Units", "Revenue"), ("North", "1200", "48000"), ("South", "850", "34000")):
        line = next(line for line in page_two.splitlines() if row[0] in line)
        assert all(cell in line for cell in row), f"a table row is split: {line!r}"  # one row, one line
    assert sent.rstrip().endswith("What is on page 2?")


async def test_a_pdf_in_a_responses_turn_reaches_the_model_as_text_with_page_markers(
        sdk: AsyncOpenAI, upstream: Any) -> None:
    upstream.queue(text("A table of sales by region."))
    pdf = two_page_pdf()
    response = await sdk.responses.create(model="m", input=[{"role": "user", "content": [
        {"type": "input_file", "filename": "report.pdf", "file_data": data_url(pdf, "application/pdf")},
        {"type": "input_text", "text": "What is on page 2?"},
    ]}])
    assert response.output_text == "A table of sales by region."
    _assert_page_two_table(_user_text(upstream))
    assert base64.b64encode(pdf).decode()[:40] not in json.dumps(upstream.requests[-1])  # text, not bytes


async def test_a_pdf_in_a_chat_turn_reaches_the_model_as_text_with_page_markers(
        sdk: AsyncOpenAI, upstream: Any) -> None:
    upstream.queue(text("A table."))
    # bare base64 with a filename, as openai-python's File part allows
    completion = await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": [
        {"type": "file", "file": {"filename": "report.pdf", "file_data": base64.b64encode(two_page_pdf()).decode()}},
        {"type": "text", "text": "What is on page 2?"},
    ]}])
    assert completion.choices[0].message.content == "A table."
    _assert_page_two_table(_user_text(upstream))


async def test_a_chained_turn_keeps_the_document_text_not_its_bytes(sdk: AsyncOpenAI, upstream: Any) -> None:
    upstream.queue(text("Read it."), text("North."))
    first = await sdk.responses.create(model="m", input=[{"role": "user", "content": [
        {"type": "input_file", "filename": "report.pdf", "file_data": data_url(two_page_pdf(), "application/pdf")},
    ]}])
    await sdk.responses.create(model="m", input="Which region sold most?", previous_response_id=first.id)
    sent = json.dumps(upstream.requests[-1]["messages"])
    assert "[page 2]" in sent and "North" in sent


async def test_a_scanned_pdf_gives_the_model_a_note_not_garbage(sdk: AsyncOpenAI, upstream: Any) -> None:
    await sdk.responses.create(model="m", input=[{"role": "user", "content": [
        {"type": "input_file", "filename": "scan.pdf", "file_data": data_url(scanned_pdf(), "application/pdf")},
        {"type": "input_text", "text": "Summarize."},
    ]}])
    sent = _user_text(upstream)
    assert "[page 1]\n(no text on this page" in sent and "no page of this PDF has a text layer" in sent


@pytest.mark.parametrize("data", [b"%PDF-1.7\n this is no PDF at all \x00\x01", b"\x89PNG\r\n\x1a\n garbage"])
async def test_a_malformed_or_garbage_pdf_is_400_with_the_envelope(client: Any, upstream: Any, data: bytes) -> None:
    for path, body in _both_apis(data_url(data, "application/pdf"), "broken.pdf"):
        resp = await client.post(path, json=body)
        assert resp.status == 400, await resp.text()
        assert_error_envelope(await resp.json(), code="invalid_file")
    assert upstream.requests == []


async def test_an_unread_type_is_400_naming_the_types_read(client: Any, upstream: Any) -> None:
    for path, body in _both_apis(data_url(b"PK\x03\x04 zip", "application/zip"), "a.zip"):
        resp = await client.post(path, json=body)
        assert resp.status == 400
        error = (await resp.json())["error"]
        assert_error_envelope({"error": error}, code="unsupported_file")
        assert "PDF, plain text, Markdown, CSV, JSON and HTML" in error["message"]
    assert upstream.requests == []


async def test_file_data_that_is_not_base64_is_400(client: Any) -> None:
    for path, body in _both_apis("not base64 at all!", "notes.txt"):
        resp = await client.post(path, json=body)
        assert resp.status == 400
        assert_error_envelope(await resp.json(), code="invalid_file")


async def test_a_file_url_on_a_loopback_address_is_a_400_naming_it_and_nothing_is_fetched(
        sdk: AsyncOpenAI, upstream: Any, aiohttp_server: Any) -> None:
    fetched: list[str] = []

    async def serve(request: web.Request) -> web.Response:
        fetched.append(request.path)
        return web.Response(body=b"secret", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/{name}", serve)
    server = await aiohttp_server(app)
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk.responses.create(model="m", input=[{"role": "user", "content": [
            {"type": "input_file", "file_url": str(server.make_url("/notes.txt"))}]}])
    assert raised.value.body["param"].endswith("file_url")  # type: ignore[index]
    assert "loopback" in raised.value.message
    assert fetched == [] and upstream.requests == []


async def test_a_file_url_is_fetched_and_read_where_private_addresses_are_allowed(
        make_client: Any, upstream: Any, aiohttp_server: Any) -> None:
    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=two_page_pdf(), content_type="application/pdf")

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 200_000, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/docs/{name}", pdf)
    app.router.add_get("/big", big)
    server = await aiohttp_server(app)
    client = await make_client(allow_private_urls=True, max_file_mb=0.1)
    upstream.queue(text("Sales."))
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        await sdk.responses.create(model="m", input=[{"role": "user", "content": [
            {"type": "input_file", "file_url": str(server.make_url("/docs/report.pdf"))},
            {"type": "input_text", "text": "What is on page 2?"}]}])
        _assert_page_two_table(_user_text(upstream))
        with pytest.raises(openai.BadRequestError) as raised:  # past API_SERVER_MAX_FILE_MB: no half document
            await sdk.responses.create(model="m", input=[{"role": "user", "content": [
                {"type": "input_file", "file_url": str(server.make_url("/big"))}]}])
        assert "API_SERVER_MAX_FILE_MB" in raised.value.message


async def test_without_a_file_source_a_reference_is_a_400_asking_for_file_data() -> None:
    from gateway.files.parts import read_file_parts

    with pytest.raises(InvalidRequestError, match="file_data"):
        await read_file_parts([{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}],
                              param="messages")


@pytest.mark.parametrize("file", [
    {}, {"file_data": "aGk=", "file_id": "file-1"}, {"file_data": 5, "filename": "a.txt"},
    {"file_data": "aGk="},  # bare base64 without a filename: nothing says what it is
    {"file_data": "data:text/plain,hi", "filename": "a.txt"},  # a data: URL that is not base64
])
async def test_a_malformed_file_part_is_400_before_anything_is_read(client: Any, file: dict[str, Any]) -> None:
    resp = await client.post("/v1/chat/completions", json={"messages": [
        {"role": "user", "content": [{"type": "file", "file": file}]}]})
    assert resp.status == 400
    assert_error_envelope(await resp.json())


async def test_text_markdown_csv_and_json_files_reach_the_model_as_they_are(client: Any, upstream: Any) -> None:
    files = {"notes.md": b"# Notes\n\n- one", "data.csv": b"a,b\n1,2", "cfg.json": b'{"k": "v"}',
             "plain.txt": "caf\u00e9".encode()}
    content = [{"type": "input_file", "filename": name, "file_data": base64.b64encode(data).decode()}
               for name, data in files.items()]
    resp = await client.post("/v1/responses", json={"input": [{"role": "user", "content": content}]})
    assert resp.status == 200, await resp.text()
    sent = _user_text(upstream)
    for name, data in files.items():
        assert f"[file: {name}]\n\n{data.decode()}" in sent


async def test_an_html_file_is_read_by_the_page_reader(client: Any, upstream: Any) -> None:
    page = (b"<html><head><title>Menu</title></head><body><nav>Home | About</nav><article><h1>Lunch</h1>"
            b"<p>Soup of the day is tomato, served with fresh bread from the bakery next door.</p>"
            b"<p>Dessert is an apple tart baked every morning by the chef.</p></article></body></html>")
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": [
        {"type": "file", "file": {"filename": "menu.html", "file_data": data_url(page, "text/html")}}]}]})
    assert resp.status == 200, await resp.text()
    sent = _user_text(upstream)
    assert "tomato" in sent and "<p>" not in sent


async def test_a_long_document_is_cut_with_a_note_under_truncation_auto_and_refused_when_disabled(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], llm_context_window=8000)
    pdf = data_url(text_pdf(30), "application/pdf")  # ~75 KB of text: far over 8,000 tokens
    body: dict[str, Any] = {"input": [{"role": "user", "content": [
        {"type": "input_file", "filename": "long.pdf", "file_data": pdf},
        {"type": "input_text", "text": "Summarize."}]}]}
    resp = await client.post("/v1/responses", json=body)
    assert resp.status == 400
    assert_error_envelope(await resp.json(), code="context_length_exceeded", param="input")
    assert upstream.requests == []
    resp = await client.post("/v1/responses", json={**body, "truncation": "auto"})
    assert resp.status == 200, await resp.text()
    sent = _user_text(upstream)
    assert "[page 1]" in sent and "[page 30]" not in sent
    assert "cut to fit the model's context window" in sent and sent.rstrip().endswith("Summarize.")
    chat = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": [
        {"type": "file", "file": {"filename": "long.pdf", "file_data": pdf}}]}]})
    assert chat.status == 400
    assert_error_envelope(await chat.json(), code="context_length_exceeded")


def _both_apis(file_data: str, filename: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("/v1/responses", {"input": [{"role": "user", "content": [
            {"type": "input_file", "filename": filename, "file_data": file_data}]}]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": [
            {"type": "file", "file": {"filename": filename, "file_data": file_data}}]}]}),
    ]


async def test_a_conversations_file_is_read_again_as_text_in_its_next_turn(client: Any, upstream: Any) -> None:
    conversation = await (await client.post("/v1/conversations", json={})).json()
    first = await client.post("/v1/responses", json={"conversation": conversation["id"], "input": [
        {"role": "user", "content": [{"type": "input_file", "filename": "report.pdf",
                                      "file_data": data_url(two_page_pdf(), "application/pdf")}]}]})
    assert first.status == 200, await first.text()
    second = await client.post("/v1/responses", json={"conversation": conversation["id"], "input": "And page 2?"})
    assert second.status == 200, await second.text()
    sent = json.dumps(upstream.requests[-1]["messages"])
    assert "[page 2]" in sent and "North" in sent and "file_data" not in sent


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_image_counts_by_its_size_not_its_base64_against_the_window(
        make_client: Any, upstream: Any, api: str) -> None:
    from tests.support.documents import noisy_png

    client = await make_client(tools=[], llm_context_window=4000)
    url = data_url(noisy_png(400, 400), "image/png")  # ~640 KB of base64: ~210k tokens counted as bytes
    if api == "chat":
        resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": url}}]}]})
    else:
        resp = await client.post("/v1/responses", json={"input": [{"role": "user", "content": [
            {"type": "input_text", "text": "What is this?"}, {"type": "input_image", "image_url": url}]}]})
    assert resp.status == 200, await resp.text()  # 255 tokens: one tile
    assert len(upstream.requests) == 1
