"""The CORS policy value: which origins get a grant. Its own module so `appkeys` can type the cached
policy without importing `cors` (which imports `appkeys`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str] = frozenset()
    any_origin: bool = False

    @classmethod
    def from_origins(cls, configured: Iterable[str]) -> CorsPolicy:
        normalized = {normalize_origin(o) for o in configured if o.strip()}
        return cls(origins=frozenset(normalized - {"*"}), any_origin="*" in normalized)

    @property
    def enabled(self) -> bool:
        return self.any_origin or bool(self.origins)

    def grant(self, origin: str | None) -> str | None:
        """The `Access-Control-Allow-Origin` value for this request's origin, or None (no grant)."""
        if origin is None or not self.enabled:
            return None
        if self.any_origin:
            return "*"
        return origin if origin in self.origins else None


def normalize_origin(origin: str) -> str:
    """Browsers send `scheme://host[:port]` in lowercase with no path; config often has a `/`."""
    return origin.strip().rstrip("/").lower()
