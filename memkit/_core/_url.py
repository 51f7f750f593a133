"""Small URL helpers shared by adapters' ``from_url``; they never echo secrets."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from memkit._core._errors import ConfigError

__all__ = ["query_options", "sqlite_path"]


def sqlite_path(url: str) -> str:
    """``sqlite:///rel.db`` -> ``rel.db``; ``sqlite:////abs.db`` -> ``/abs.db``; ``sqlite://`` -> ``:memory:``."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise ConfigError(f"not a sqlite:// URL: {parts.scheme}://...")
    if parts.netloc:
        raise ConfigError("sqlite URLs have no host: use sqlite:///relative/path.db or sqlite:////absolute/path.db")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    return path or ":memory:"


def query_options(url: str) -> dict[str, str]:
    """The ``?key=value`` options of a URL."""
    return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def embedder_option(value: str) -> str | None:
    """``?embedder=`` in a URL: ``none`` (or empty) asks for a keyword-only store."""
    return None if value.strip().lower() in ("", "none") else value


def bool_option(name: str, value: str) -> bool:
    """``?name=true`` / ``false`` (also 1/0, yes/no, on/off) in a URL."""
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} in the URL must be true or false")
