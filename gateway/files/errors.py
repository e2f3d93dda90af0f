"""The 400s of reading a file: each names what the client can change."""

from __future__ import annotations

from gateway.errors import InvalidRequestError


class UnsupportedFileTypeError(InvalidRequestError):
    """A file of a type the gateway does not read (an image, an archive, a spreadsheet...)."""

    code = "unsupported_file"


class UnreadableFileError(InvalidRequestError):
    """A file that says it is of a type read here but cannot be read (bad base64, a broken PDF)."""

    code = "invalid_file"


class FileReferenceNotSupportedError(InvalidRequestError):
    """A `file_id` or `file_url`: named by the wire, not resolved by this gateway yet."""

    code = "unsupported_parameter"
