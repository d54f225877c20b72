"""A python-dbusmock template serving the xdg-desktop-portal interfaces Sottovoce uses, as their
documentation describes them (https://flatpak.github.io/xdg-desktop-portal/docs/): the
GlobalShortcuts and RemoteDesktop portals and the host registry. No portal backend can be run
headless and consented to by a test, so this stands in for the one that asks the user.

Like the real portal, methods that need the user answer through a Request object's Response
signal: 0 with results, or 1 when the user declines. The consent dialog is simulated: `Start`
without a valid restore token "shows the dialog" (counted) and is accepted unless the test
called org.sottovoce.Test.SetConsent(false); each accepted Start issues a new single-use
restore token. Runs under the system Python (dbus-python), started by tests/test_portal.py:
    python3 -m dbusmock --template tests/support/portal_mock.py
"""

import dbus
from dbusmock.mockobject import objects

BUS_NAME = "org.freedesktop.portal.Desktop"
MAIN_OBJ = "/org/freedesktop/portal/desktop"
MAIN_IFACE = "org.freedesktop.portal.GlobalShortcuts"
SYSTEM_BUS = False

REQUEST = "org.freedesktop.portal.Request"
SHORTCUTS = "org.freedesktop.portal.GlobalShortcuts"
REMOTE = "org.freedesktop.portal.RemoteDesktop"
REGISTRY = "org.freedesktop.host.portal.Registry"
TEST = "org.sottovoce.Test"


def respond(mock, options, code, results):
    """The Request object for this call and its Response (sent before the method returns, as
    a fast portal may: clients must subscribe first)."""
    mock.requests += 1  # the real path names the caller; tokens repeat across clients
    path = f"{MAIN_OBJ}/request/mock{mock.requests}/{options['handle_token']}"
    mock.AddObject(path, REQUEST, {}, [])
    objects[path].EmitSignal(REQUEST, "Response", "ua{sv}",
                             [dbus.UInt32(code), dbus.Dictionary(results, signature="sv")])
    return dbus.ObjectPath(path)


def create_session(mock, options):
    handle = f"{MAIN_OBJ}/session/mock{mock.requests + 1}/{options['session_handle_token']}"
    return respond(mock, options, 0, {"session_handle": dbus.String(handle)})


def bind_shortcuts(mock, session, shortcuts, parent_window, options):
    bound = [dbus.Struct((name, dbus.Dictionary(
        {"description": props["description"],
         "trigger_description": props.get("preferred_trigger", "")}, signature="sv")))
        for name, props in shortcuts]
    return respond(mock, options, 0, {"shortcuts": dbus.Array(bound, signature="(sa{sv})")})


def select_devices(mock, session, options):
    mock.offered_token = str(options.get("restore_token", ""))
    return respond(mock, options, 0, {})


def start(mock, session, parent_window, options):
    if not (mock.offered_token and mock.offered_token == mock.valid_token):
        mock.dialogs += 1  # the consent dialog would show here
        if not mock.consent:
            return respond(mock, options, 1, {})
    mock.issued += 1
    mock.valid_token = f"restore-token-{mock.issued}"  # single use: a new one each start
    return respond(mock, options, 0, {"devices": dbus.UInt32(1),
                                      "restore_token": dbus.String(mock.valid_token)})


def load(mock, parameters):
    mock.consent, mock.dialogs, mock.issued, mock.requests = True, 0, 0, 0
    mock.valid_token = mock.offered_token = ""
    mock.AddProperties(SHORTCUTS, {"version": dbus.UInt32(2)})
    mock.AddProperties(REMOTE, {"version": dbus.UInt32(2),
                                "AvailableDeviceTypes": dbus.UInt32(1 | 2)})
    mock.AddMethods(SHORTCUTS, [
        ("CreateSession", "a{sv}", "o", create_session),
        ("BindShortcuts", "oa(sa{sv})sa{sv}", "o", bind_shortcuts),
        ("ConfigureShortcuts", "osa{sv}", "", ""),
    ])
    mock.AddMethods(REMOTE, [
        ("CreateSession", "a{sv}", "o", create_session),
        ("SelectDevices", "oa{sv}", "o", select_devices),
        ("Start", "osa{sv}", "o", start),
        ("NotifyKeyboardKeysym", "oa{sv}iu", "", ""),
    ])
    mock.AddMethods(REGISTRY, [("Register", "sa{sv}", "", "")])
    mock.AddMethods(TEST, [
        ("SetConsent", "b", "", lambda self, consent: setattr(self, "consent", bool(consent))),
        ("Dialogs", "", "u", lambda self: dbus.UInt32(self.dialogs)),
    ])
