"""The remote server's API key, kept only in the OS keyring (the one module importing ``keyring``).

Used by the remote client (to read the key) and the app's settings dialog (to store it). Never
in settings.toml, never in logs, no plaintext fallback: without a usable keyring backend every
call raises `KeyringUnavailableError`, whose message tells the user how to get one; the client
then connects without a key (a loopback server needs none) and the dialog stores nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.errors import EngineError, missing_dependency

log = logging.getLogger(__name__)

SERVICE = "sottovoce"
NO_BACKEND = (
    "No system keyring is available, so the server's API key cannot be kept safely (it is not "
    "stored anywhere else). Install and unlock a Secret Service provider (GNOME Keyring or "
    "KWallet on Linux; Windows Credential Manager and the macOS Keychain work out of the box)."
)


class KeyringUnavailableError(EngineError):
    """No usable OS keyring backend."""


def account(server_url: str) -> str:
    """One key per server URL (a home server and a work server can differ)."""
    return f"api-key:{server_url}"


def _keyring() -> Any:
    try:
        import keyring
    except ImportError as exc:
        raise missing_dependency("keyring", "client") from exc
    return keyring


def _backend() -> Any:
    """The active backend; keyring picks the fail/null stand-ins when nothing real exists, and
    those raise or drop keys silently, so they count as no backend."""
    from keyring.backends import fail, null

    backend = _keyring().get_keyring()
    if isinstance(backend, (fail.Keyring, null.Keyring)) or getattr(backend, "backends", 1) == []:
        raise KeyringUnavailableError(NO_BACKEND)
    return backend


def load_api_key(server_url: str) -> str | None:
    """The saved key for ``server_url``, or None when none is saved."""
    backend = _backend()
    try:
        key = backend.get_password(SERVICE, account(server_url))
    except Exception as exc:  # noqa: BLE001 - keyring backends raise their own error types
        raise KeyringUnavailableError(f"{NO_BACKEND} ({exc})") from exc
    return str(key) if key else None


def store_api_key(server_url: str, key: str) -> None:
    backend = _backend()
    try:
        backend.set_password(SERVICE, account(server_url), key)
    except Exception as exc:  # noqa: BLE001 - keyring backends raise their own error types
        raise KeyringUnavailableError(f"{NO_BACKEND} ({exc})") from exc
    log.info("API key for %s stored in %s", server_url, type(backend).__name__)


def delete_api_key(server_url: str) -> bool:
    """Remove the stored key; False when there was none."""
    backend = _backend()
    errors = _keyring().errors
    try:
        backend.delete_password(SERVICE, account(server_url))
    except errors.PasswordDeleteError:
        return False
    except Exception as exc:  # noqa: BLE001 - keyring backends raise their own error types
        raise KeyringUnavailableError(f"{NO_BACKEND} ({exc})") from exc
    return True


def keyring_status() -> str:
    """One line for the settings dialog and `doctor`: which backend holds keys, or why none can."""
    try:
        backend = _backend()
    except Exception as exc:  # noqa: BLE001 - shown to the user as is
        return str(exc)
    return f"API keys are kept in {type(backend).__module__}.{type(backend).__name__}"
