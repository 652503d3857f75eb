"""Files the program renders (installer scripts, manifests) and ships inside resources.

Components publish each rendered file here as they build it, so the offline plan can write exactly
what will run under `files/` without rendering anything a second time.
"""

from __future__ import annotations

_published: dict[str, str] = {}


def publish(path: str, text: str) -> str:
    """Records `text` under the relative `path` and returns the text, for use inline."""
    if path.startswith("/") or ".." in path.split("/"):
        raise ValueError(f"artifact path must be relative and inside files/: {path}")
    previous = _published.get(path)
    if previous is not None and previous != text:
        raise ValueError(f"two different files were published as {path}")
    _published[path] = text
    return text


def published() -> dict[str, str]:
    return dict(_published)


def reset() -> None:
    _published.clear()
