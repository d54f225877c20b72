"""The remote server's API key, kept only in the OS keyring (never in settings.toml, never a
plaintext fallback). Without a usable keyring backend the user gets a message saying how to get
one, and the key is simply not stored."""

from __future__ import annotations

import logging
from typing import Any

from engine.errors import missing_dependency

log = logging.getLogger(__name__)

SERVICE = "sottovoce"


class KeyringUnavailableError(RuntimeError):
    """No OS keyring backend is usable; the message tells the user what to do."""


NO_BACKEND_MESSAGE = (
    "No system keyring is available, so the API key cannot be stored safely and was not saved. "
    "Install and unlock a Secret Service provider (GNOME Keyring or KWallet on Linux; Windows "
    "Credential Manager and macOS Keychain work out of the box), then enter the key again."
)


def _keyring() -> Any:
    try:
        import keyring
    except ImportError as exc:
        raise missing_dependency("keyring", "gui") from exc
    return keyring


def _usable_backend(keyring: Any) -> Any:
    """The active backend, or KeyringUnavailableError for the fail/null backends that `keyring`
    selects when nothing real is present (they would raise or silently drop the key)."""
    from keyring.backends import fail, null

    backend = keyring.get_keyring()
    if isinstance(backend, (fail.Keyring, null.Keyring)):
        raise KeyringUnavailableError(NO_BACKEND_MESSAGE)
    chained = getattr(backend, "backends", None)
    if chained is not None and not chained:
        raise KeyringUnavailableError(NO_BACKEND_MESSAGE)
    return backend


def _account(server_url: str) -> str:
    # One key per server: a user may have a home server and a work server.
    return f"api-key:{server_url}"


def store_api_key(server_url: str, key: str) -> None:
    keyring = _keyring()
    backend = _usable_backend(keyring)
    try:
        backend.set_password(SERVICE, _account(server_url), key)
    except keyring.errors.KeyringError as exc:
        raise KeyringUnavailableError(f"{NO_BACKEND_MESSAGE} ({exc})") from exc
    log.info("API key for %s stored in %s", server_url, type(backend).__name__)


def load_api_key(server_url: str) -> str | None:
    """The stored key, or None when there is none. Raises KeyringUnavailableError when no
    keyring can be asked (the caller shows the message)."""
    keyring = _keyring()
    backend = _usable_backend(keyring)
    try:
        value = backend.get_password(SERVICE, _account(server_url))
    except keyring.errors.KeyringError as exc:
        raise KeyringUnavailableError(f"{NO_BACKEND_MESSAGE} ({exc})") from exc
    return str(value) if value is not None else None


def delete_api_key(server_url: str) -> bool:
    """Remove the stored key; False when there was none."""
    keyring = _keyring()
    backend = _usable_backend(keyring)
    try:
        backend.delete_password(SERVICE, _account(server_url))
    except keyring.errors.PasswordDeleteError:
        return False
    except keyring.errors.KeyringError as exc:
        raise KeyringUnavailableError(f"{NO_BACKEND_MESSAGE} ({exc})") from exc
    return True


def keyring_status() -> str:
    """One line for the settings dialog: which backend holds keys, or why none can."""
    try:
        backend = _usable_backend(_keyring())
    except (KeyringUnavailableError, Exception) as exc:  # noqa: BLE001 - shown to the user
        return str(exc)
    return f"API keys are kept in {type(backend).__module__}.{type(backend).__name__}"
