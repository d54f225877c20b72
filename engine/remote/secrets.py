"""The remote server's API key from the OS keyring (the only engine module importing ``keyring``).

Same service and account names as the desktop app's settings dialog (``app.secrets``), so a key
saved there is found here. There is no plaintext fallback: without a usable keyring backend
`load_api_key` raises `KeyringUnavailableError` whose message says how to get one, and the
caller connects without a key (a loopback server needs none).
"""

from __future__ import annotations

from typing import Any

from engine.errors import EngineError, missing_dependency

SERVICE = "sottovoce"
NO_BACKEND = (
    "no system keyring is available, so the server's API key cannot be read; install and "
    "unlock a Secret Service provider (GNOME Keyring or KWallet on Linux; Windows Credential "
    "Manager and the macOS Keychain work out of the box)"
)


class KeyringUnavailableError(EngineError):
    """No usable OS keyring backend."""


def account(server_url: str) -> str:
    """One key per server URL (a home server and a work server can differ)."""
    return f"api-key:{server_url}"


def _backend() -> Any:
    try:
        import keyring
        from keyring.backends import fail, null
    except ImportError as exc:
        raise missing_dependency("keyring", "client") from exc
    backend = keyring.get_keyring()
    # keyring picks these stand-ins when nothing real exists: they raise or drop keys silently.
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


def save_api_key(server_url: str, key: str) -> None:
    backend = _backend()
    try:
        backend.set_password(SERVICE, account(server_url), key)
    except Exception as exc:  # noqa: BLE001 - keyring backends raise their own error types
        raise KeyringUnavailableError(f"{NO_BACKEND} ({exc})") from exc
