#!/usr/bin/env bash
# Bring up a real desktop session for tests: D-Bus, an unlocked gnome-keyring, Xvfb and a
# PulseAudio server with a virtual microphone. Source it (". .ci/desktop.sh"): it exports
# DISPLAY, DBUS_SESSION_BUS_ADDRESS, PULSE_SERVER... for the commands that follow.
# Idempotent: a second source in the same shell reuses what is running.
# Recipe: the project's design notes, section 7; the comments below say why each step is there.

export SOTTOVOCE_DESKTOP_DIR="${SOTTOVOCE_DESKTOP_DIR:-/tmp/sottovoce-desktop}"
mkdir -p "$SOTTOVOCE_DESKTOP_DIR"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$SOTTOVOCE_DESKTOP_DIR/runtime}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

# 1. D-Bus session bus first, so Qt and gnome-keyring share it (else Qt starts a stray bus).
if [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ] || ! dbus-send --session --dest=org.freedesktop.DBus \
    --type=method_call --print-reply / org.freedesktop.DBus.ListNames >/dev/null 2>&1; then
  eval "$(dbus-launch --sh-syntax)"
  export DBUS_SESSION_BUS_ADDRESS DBUS_SESSION_BUS_PID
fi

# 2. gnome-keyring's secret service with a "login" collection unlocked by a known password, for
#    the `keyring` library. --login creates and unlocks the collection; --start adds the secret
#    service. Its files live in our own dir so a stale keyring with another password can't block.
if ! dbus-send --session --dest=org.freedesktop.DBus --type=method_call --print-reply / \
     org.freedesktop.DBus.ListNames 2>/dev/null | grep -q org.freedesktop.secrets; then
  mkdir -p "$SOTTOVOCE_DESKTOP_DIR/keyring-data"
  export SOTTOVOCE_KEYRING_DATA="$SOTTOVOCE_DESKTOP_DIR/keyring-data"
  printf 'sottovoce-ci' | XDG_DATA_HOME="$SOTTOVOCE_KEYRING_DATA" gnome-keyring-daemon --login >/dev/null 2>&1
  eval "$(XDG_DATA_HOME="$SOTTOVOCE_KEYRING_DATA" gnome-keyring-daemon --start --components=secrets 2>/dev/null | grep '^GNOME_KEYRING')"
  export GNOME_KEYRING_CONTROL
fi

# 3. Virtual display. SOTTOVOCE_DISPLAY=auto lets Xvfb pick a free number itself (-displayfd):
#    desktops started at the same moment (the test workers) must not pick the same one.
if [ "${SOTTOVOCE_DISPLAY:-}" = auto ]; then
  Xvfb -displayfd 3 -screen 0 1600x1000x24 -nolisten tcp \
    3>"$SOTTOVOCE_DESKTOP_DIR/display" >"$SOTTOVOCE_DESKTOP_DIR/xvfb.log" 2>&1 &
  for _ in $(seq 100); do [ -s "$SOTTOVOCE_DESKTOP_DIR/display" ] && break; sleep 0.1; done
  SOTTOVOCE_DISPLAY=":$(tr -d '\n' <"$SOTTOVOCE_DESKTOP_DIR/display")"
  export SOTTOVOCE_DISPLAY
fi
export DISPLAY="${SOTTOVOCE_DISPLAY:-:99}"
if ! xdpyinfo >/dev/null 2>&1; then
  Xvfb "$DISPLAY" -screen 0 1600x1000x24 -nolisten tcp >"$SOTTOVOCE_DESKTOP_DIR/xvfb.log" 2>&1 &
  for _ in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
fi

# 4. PulseAudio with a null sink "vspk" and its monitor remapped as the default source "vmic":
#    what is played to vspk (paplay) is what the app records from the default input.
if ! pactl info >/dev/null 2>&1; then
  pulseaudio --daemonize=yes --exit-idle-time=-1 --disallow-exit --log-target=file:"$SOTTOVOCE_DESKTOP_DIR/pulse.log" \
    -n --load="module-native-protocol-unix" --load="module-always-sink" 2>/dev/null
  for _ in $(seq 50); do pactl info >/dev/null 2>&1 && break; sleep 0.1; done
  pactl load-module module-null-sink sink_name=vspk rate=16000 channels=1 \
    sink_properties=device.description=VirtualSpeaker >/dev/null
  pactl load-module module-remap-source master=vspk.monitor source_name=vmic \
    source_properties=device.description=VirtualMic >/dev/null
  # A second microphone, so a microphone can be chosen by name (Settings > Microphone, the
  # tray, `listen --device VirtualMic2`); tests add and unplug private ones of their own.
  pactl load-module module-null-sink sink_name=vspk2 rate=16000 channels=1 \
    sink_properties=device.description=VirtualSpeaker2 >/dev/null
  pactl load-module module-remap-source master=vspk2.monitor source_name=vmic2 \
    source_properties=device.description=VirtualMic2 >/dev/null
  pactl set-default-sink vspk
  pactl set-default-source vmic
fi

# 5. The accessibility bus (at-spi2-core), which app.verify reads the focused field through:
#    the session bus starts at-spi-bus-launcher on the first GetAddress, and that bus starts
#    at-spi2-registryd when asked; asking now keeps the first checked insertion from paying
#    for the start-up. Apps expose their fields when they see it (GTK), or when told (Qt:
#    QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1, tests/test_verified_insert.py).
if [ -x /usr/libexec/at-spi-bus-launcher ]; then
  a11y=$(dbus-send --session --print-reply=literal --dest=org.a11y.Bus /org/a11y/bus \
    org.a11y.Bus.GetAddress 2>/dev/null | tr -d ' ')
  [ -n "$a11y" ] && DBUS_SESSION_BUS_ADDRESS="$a11y" dbus-send --session --print-reply \
    --dest=org.a11y.atspi.Registry /org/a11y/atspi/accessible/root \
    org.a11y.atspi.Accessible.GetChildren >/dev/null 2>&1
fi
