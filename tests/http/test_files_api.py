"""The Files API (issue 47): the official SDK uploads, lists, retrieves, reads and deletes files, and a
turn that names one by `file_id` (Responses `input_file`, chat `file` part) gives the model its text;
an upload past API_SERVER_MAX_FILE_MB is a 413 before its body is read."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
from openai import AsyncOpenAI

from gateway.http import appkeys
from gateway.store.owners import DEFAULT_OWNER
from tests.fakes.upstream import text
from tests.keys.test_keys_isolation import bearer, make_key
from tests.support.documents import two_page_pdf
from tests.support.helpers import assert_error_envelope


@pytest.fixture
async def sdk(client: Any) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as oai:
        yield oai


def _user_text(upstream: Any) -> str:
    [message] = [m for m in upstream.requests[-1]["messages"] if m["role"] == "user"][-1:]
    content = message["content"]
    return content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)


async def test_the_sdk_uploads_lists_retrieves_reads_and_deletes_a_file(sdk: AsyncOpenAI) -> None:
    pdf = two_page_pdf()
    created = await sdk.files.create(file=("report.pdf", pdf, "application/pdf"), purpose="user_data")
    assert created.id.startswith("file-") and created.object == "file"
    assert (created.bytes, created.filename, created.purpose) == (len(pdf), "report.pdf", "user_data")
    notes = await sdk.files.create(file=("notes.md", b"# Notes\n\nhello", "text/markdown"), purpose="assistants")

    listed = [file.id async for file in sdk.files.list()]
    assert listed == [notes.id, created.id]  # newest first
    assert [file.id async for file in sdk.files.list(order="asc")] == [created.id, notes.id]
    assert [file.id async for file in sdk.files.list(purpose="user_data")] == [created.id]
    page = await sdk.files.list(limit=1)
    assert [file.id for file in page.data] == [notes.id] and page.has_more
    assert [file.id for file in (await sdk.files.list(limit=1, after=notes.id)).data] == [created.id]

    retrieved = await sdk.files.retrieve(created.id)
    assert retrieved.model_dump() == created.model_dump()
    content = await sdk.files.content(created.id)
    assert content.content == pdf

    deleted = await sdk.files.delete(created.id)
    assert (deleted.id, deleted.deleted) == (created.id, True)
    for call in (sdk.files.retrieve, sdk.files.content, sdk.files.delete):
        with pytest.raises(openai.NotFoundError):
            await call(created.id)
    assert [file.id async for file in sdk.files.list()] == [notes.id]


async def test_a_responses_turn_with_a_file_id_sends_its_text_and_reads_the_pdf_once(
        sdk: AsyncOpenAI, client: Any, upstream: Any) -> None:
    created = await sdk.files.create(file=("report.pdf", two_page_pdf(), "application/pdf"), purpose="user_data")
    upstream.queue(text("Sales by region."), text("Again."))
    for _ in range(2):
        response = await sdk.responses.create(model="m", input=[{"role": "user", "content": [
            {"type": "input_file", "file_id": created.id},
            {"type": "input_text", "text": "What is on page 2?"},
        ]}])
        sent = _user_text(upstream)
        assert sent.startswith("[file: report.pdf]") and "[page 2]" in sent and "Sales by region" in sent
    assert response.output_text == "Again."
    # the text was kept beside the file at its first use: the second turn read it from there
    found = await client.app[appkeys.STORE].files.text(DEFAULT_OWNER, created.id)
    assert found is not None and found[1] is not None and "[page 2]" in found[1].text


async def test_a_chat_file_part_with_a_file_id_sends_its_text(sdk: AsyncOpenAI, upstream: Any) -> None:
    created = await sdk.files.create(file=("data.csv", b"region,units\nNorth,1200\n", "text/csv"),
                                     purpose="user_data")
    upstream.queue(text("North."))
    completion = await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": [
        {"type": "file", "file": {"file_id": created.id}}, {"type": "text", "text": "Which region?"}]}])
    assert completion.choices[0].message.content == "North."
    assert _user_text(upstream).startswith("[file: data.csv]\n\nregion,units\nNorth,1200")


async def test_an_unknown_file_id_is_a_400_naming_it(sdk: AsyncOpenAI, upstream: Any) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk.responses.create(model="m", input=[{"role": "user", "content": [
            {"type": "input_file", "file_id": "file-nosuchfile"}]}])
    error = raised.value.body
    assert isinstance(error, dict) and "file-nosuchfile" in error["message"]
    assert error["param"].endswith("file_id")
    assert upstream.requests == []


async def test_an_uploaded_image_named_in_an_input_file_is_a_400_naming_the_types_read(
        sdk: AsyncOpenAI) -> None:
    created = await sdk.files.create(file=("a.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "image/png"),
                                     purpose="user_data")
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk.responses.create(model="m", input=[{"role": "user", "content": [
            {"type": "input_file", "file_id": created.id}]}])
    assert "PDF" in str(raised.value) and raised.value.body["param"].startswith("input")  # type: ignore[index]


@pytest.mark.parametrize(("form", "status", "param"), [
    ({"purpose": "user_data"}, 400, "file"),
    ({"file": ("a.txt", b"hi")}, 400, "purpose"),
    ({"file": ("a.txt", b"hi"), "purpose": "fine-tune"}, 400, "purpose"),
    ({"file": ("a.txt", b""), "purpose": "user_data"}, 400, "file"),
])
async def test_a_malformed_upload_is_a_4xx_with_the_envelope(client: Any, form: dict[str, Any], status: int,
                                                             param: str) -> None:
    data = aiohttp.FormData(default_to_multipart=True)
    for name, value in form.items():
        if isinstance(value, tuple):
            data.add_field(name, value[1], filename=value[0], content_type="text/plain")
        else:
            data.add_field(name, value)
    reply = await client.post("/v1/files", data=data)
    body = await reply.json()
    assert reply.status == status, body
    assert_error_envelope(body)
    assert body["error"]["param"] == param


async def test_an_upload_that_is_not_multipart_is_415(client: Any) -> None:
    reply = await client.post("/v1/files", json={"file": "x", "purpose": "user_data"})
    assert reply.status == 415
    assert_error_envelope(await reply.json())


async def test_content_is_always_an_attachment_never_a_page(client: Any, sdk: AsyncOpenAI) -> None:
    created = await sdk.files.create(file=("x.html", b"<script>alert(1)</script>", "text/html"), purpose="user_data")
    reply = await client.get(f"/v1/files/{created.id}/content")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/octet-stream"
    assert reply.headers["Content-Disposition"].startswith('attachment; filename="x.html"')
    assert reply.headers["X-Content-Type-Options"] == "nosniff"


async def _raw_answer(client: Any, head: str, body: bytes = b"") -> tuple[bytes, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    writer.write(head.encode() + body)
    await writer.drain()
    try:
        # a guard against a hang, not a measure: the gateway must answer with the body unsent
        async with asyncio.timeout(20):
            status_line = await reader.readline()
            headers = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            answer = await reader.readexactly(int(headers["content-length"]))
    finally:
        writer.close()
    return status_line, headers, answer


@pytest.mark.parametrize("expect", ["", "Expect: 100-continue\r\n"])
async def test_a_40_mb_upload_is_a_413_before_its_body_is_sent(make_client: Any, expect: str) -> None:
    """A client that sends the headers of a 40 MB upload and waits: the 413 comes, nothing was read."""
    client = await make_client(max_file_mb=32.0)
    head = (f"POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\n{expect}"
            "Content-Type: multipart/form-data; boundary=xyz\r\n"
            f"Content-Length: {40 * 1000 * 1000}\r\n\r\n")
    status_line, _, answer = await _raw_answer(client, head)
    assert status_line.startswith(b"HTTP/1.1 413"), status_line
    error = json.loads(answer)["error"]
    assert "API_SERVER_MAX_FILE_MB" in error["message"] and error["param"] == "file"


async def test_an_upload_is_bounded_by_the_file_limit_not_the_body_limit(make_client: Any) -> None:
    client = await make_client(max_body_bytes=100_000, max_file_mb=1.0)
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        created = await sdk.files.create(file=("big.txt", b"x" * 900_000, "text/plain"), purpose="user_data")
        assert created.bytes == 900_000
        with pytest.raises(openai.APIStatusError) as raised:
            await sdk.files.create(file=("big.txt", b"x" * 1_100_000, "text/plain"), purpose="user_data")
        assert raised.value.status_code == 413


async def test_a_chunked_upload_is_cut_off_with_a_413_once_its_file_passes_the_limit(make_client: Any) -> None:
    client = await make_client(max_file_mb=0.1)
    opening = (b"--xyz\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nuser_data\r\n"
               b"--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
               b"Content-Type: text/plain\r\n\r\n" + b"x" * 150_000)
    chunk = f"{len(opening):x}\r\n".encode() + opening + b"\r\n"  # and then nothing more: the client waits
    head = ("POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            "Content-Type: multipart/form-data; boundary=xyz\r\n\r\n")
    status_line, _, answer = await _raw_answer(client, head, chunk)
    assert status_line.startswith(b"HTTP/1.1 413"), status_line
    assert json.loads(answer)["error"]["code"] == "request_too_large"


async def test_another_keys_file_is_the_same_404_as_an_unknown_one_and_a_400_as_an_input(
        tmp_path: Any, make_client: Any, upstream: Any) -> None:
    alice, bob = await make_key(tmp_path, "alice"), await make_key(tmp_path, "bob")
    client = await make_client()
    data = aiohttp.FormData()
    data.add_field("purpose", "user_data")
    data.add_field("file", b"alice's notes", filename="notes.txt", content_type="text/plain")
    reply = await client.post("/v1/files", data=data, headers=bearer(alice))
    assert reply.status == 200, await reply.text()
    file_id = (await reply.json())["id"]
    unknown = "file-" + "x" * 24
    for method, path in (("GET", "/v1/files/{}"), ("GET", "/v1/files/{}/content"), ("DELETE", "/v1/files/{}")):
        answers = []
        for asked in (file_id, unknown):
            async with client.request(method, path.format(asked), headers=bearer(bob)) as got:
                answers.append((got.status, (await got.text()).replace(asked, "<id>")))
        assert answers[0] == answers[1] and answers[0][0] == 404, (method, path, answers)
    listed = await (await client.get("/v1/files", headers=bearer(bob))).json()
    assert listed["data"] == [] and listed["has_more"] is False
    reply = await client.post("/v1/responses", headers=bearer(bob), json={"model": "m", "input": [
        {"role": "user", "content": [{"type": "input_file", "file_id": file_id}]}]})
    assert reply.status == 400 and file_id in (await reply.json())["error"]["message"]
    assert upstream.requests == []
    async with client.get(f"/v1/files/{file_id}/content", headers=bearer(alice)) as got:
        assert got.status == 200 and await got.read() == b"alice's notes"


async def test_files_count_in_the_keys_stored_bytes_quota(tmp_path: Any, make_client: Any) -> None:
    small = await make_key(tmp_path, "small", "--max-stored-mb", "1")
    client = await make_client(llm_context_window=10**7)

    async def upload(size: int) -> Any:
        data = aiohttp.FormData()
        data.add_field("purpose", "user_data")
        data.add_field("file", b"x" * size, filename="big.txt", content_type="text/plain")
        return await client.post("/v1/files", data=data, headers=bearer(small))

    first = await upload(600_000)
    assert first.status == 200, await first.text()
    second = await upload(600_000)
    assert second.status == 429
    error = (await second.json())["error"]
    assert error["code"] == "insufficient_quota" and error["type"] == "insufficient_quota"
    # the file holds the quota for responses too
    reply = await client.post("/v1/responses", json={"model": "m", "input": "y" * 300_000}, headers=bearer(small))
    assert reply.status == 429
    file_id = (await first.json())["id"]
    assert (await client.delete(f"/v1/files/{file_id}", headers=bearer(small))).status == 200
    for _ in range(100):  # the room is seen once the ring re-reads the stored bytes (every 2 s)
        reply = await upload(600_000)
        if reply.status == 200:
            break
        await asyncio.sleep(0.1)
    assert reply.status == 200


@pytest.mark.parametrize("body", [
    b'--xyz\r\nContent-Disposition: form-data; name="x\x1dk"\r\n\r\nv\r\n--xyz--\r\n',  # found by the fuzzer
    b"--xyz\r\nno header line at all\r\n\r\nv\r\n--xyz--\r\n",
    b"not multipart at all",
])
async def test_a_malformed_multipart_body_is_a_400_with_the_envelope(client: Any, body: bytes) -> None:
    reply = await client.post("/v1/files", data=body,
                              headers={"Content-Type": "multipart/form-data; boundary=xyz"})
    assert reply.status == 400, await reply.text()
    assert_error_envelope(await reply.json())


async def test_a_compressed_part_is_refused_and_a_base64_part_is_decoded(client: Any) -> None:
    def form(headers: str, payload: bytes) -> bytes:
        return (b'--xyz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n'
                b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n' + headers.encode()
                + b"\r\n" + payload + b"\r\n--xyz--\r\n")

    content_type = {"Content-Type": "multipart/form-data; boundary=xyz"}
    bomb = gzip.compress(b"\0" * 5_000_000)
    reply = await client.post("/v1/files", data=form("Content-Encoding: gzip\r\n", bomb), headers=content_type)
    assert reply.status == 400 and "compressed" in (await reply.json())["error"]["message"]
    reply = await client.post("/v1/files", data=form("Content-Transfer-Encoding: x-uue\r\n", b"abc"),
                              headers=content_type)
    assert reply.status == 400, await reply.text()
    reply = await client.post("/v1/files", data=form("Content-Transfer-Encoding: base64\r\n",
                                                     base64.b64encode(b"hello")), headers=content_type)
    assert reply.status == 200, await reply.text()
    file_id = (await reply.json())["id"]
    assert await (await client.get(f"/v1/files/{file_id}/content")).read() == b"hello"
