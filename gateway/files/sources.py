"""Files a turn names rather than holds: an uploaded file (`file_id`, the caller's own) or a URL
(`file_url`), read into a Document as inline files are.

- `file_id`: the owner's file from the store (another key's id is as unknown as a made-up one: a
  400 naming it). Its text is read once and kept beside it (store/files.py), so the next turn that
  names it reads no PDF again.
- `file_url`: fetched through the web tools' SafeFetcher (providers/urlsafety.py): http(s) only, no
  loopback, private or metadata address unless WEB_ALLOW_PRIVATE_URLS, every redirect checked, the
  body cut at API_SERVER_MAX_FILE_MB (a cut file is a 400, not half a document), 20 s at most.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import unquote, urlsplit

from gateway.errors import InvalidRequestError, echo
from gateway.files.read import Document, ReadLimits
from gateway.store.files import FileText, OwnedFiles
from gateway.wire.file_inputs import FileReference

#: (data, filename, media type, param) -> the Document: the reader, in a worker thread, its errors
#: named where the file was given (files/parts.py)
Reader = Callable[[bytes, str, str, str], Awaitable[Document]]
FETCH_SECONDS = 20.0


class UnknownFileIdError(InvalidRequestError):
    """A `file_id` the caller has no file for: 400 naming it (as OpenAI answers an input's bad id)."""

    code = "invalid_file_id"


class FileSources:
    """Where a turn's referenced files come from: the caller's uploads, and URLs fetched safely."""

    def __init__(self, files: OwnedFiles | None, *, max_bytes: int, allow_private_urls: bool = False) -> None:
        self.files = files
        self.max_bytes = max_bytes
        self.allow_private_urls = allow_private_urls

    async def document(self, given: FileReference, param: str, limits: ReadLimits | None, read: Reader) -> Document:
        if given.kind == "file_id":
            return await self._uploaded(given, param, limits, read)
        return await self._fetched(given, param, read)

    async def _uploaded(self, given: FileReference, param: str, limits: ReadLimits | None,
                        read: Reader) -> Document:
        files = self.files
        found = await files.text(given.value) if files is not None else None
        if files is None or found is None:
            raise UnknownFileIdError(f"No file with id '{echo(given.value)}' was found: upload it with "
                                     "POST /v1/files (files are each API key's own).", param=f"{param}.file_id")
        file, cached = found
        filename = given.filename or file.filename
        if cached is not None:
            return Document(filename, cached.text, cached.note)
        data = await files.content(given.value)
        if data is None:  # deleted between the two reads
            raise UnknownFileIdError(f"No file with id '{echo(given.value)}' was found.", param=f"{param}.file_id")
        document = await read(data, file.filename, file.media_type, param)
        if limits is None or limits == ReadLimits():  # the text kept is the default reader's
            await files.keep_text(given.value, FileText(document.text, document.note))
        return Document(filename, document.text, document.note)

    async def _fetched(self, given: FileReference, param: str, read: Reader) -> Document:
        from providers.urlsafety import SafeFetcher  # aiohttp's client session: made only for a file_url
        from providers.web import ProviderError

        where = f"{param}.file_url"
        fetcher = SafeFetcher(allow_private=self.allow_private_urls, max_bytes=self.max_bytes,
                              timeout=FETCH_SECONDS, user_agent="agent-gateway (+file_url)")
        try:
            fetched = await fetcher.fetch(given.value)
        except ProviderError as exc:  # a refused address, a DNS or connection failure, a timeout
            raise InvalidRequestError(f"The file_url could not be fetched: {echo(str(exc))}", param=where) from None
        finally:
            await fetcher.aclose()
        if fetched.status != 200:
            raise InvalidRequestError(f"The file_url answered HTTP {fetched.status}.", param=where)
        if fetched.truncated:
            raise InvalidRequestError(f"The file at file_url is larger than API_SERVER_MAX_FILE_MB "
                                      f"({self.max_bytes / 1_000_000:g} MB).", param=where)
        filename = given.filename or _url_filename(fetched.final_url)
        return await read(fetched.body, filename, fetched.content_type, param)


def _url_filename(url: str) -> str:
    name = unquote(urlsplit(url).path.rpartition("/")[2])
    return name or "download"
