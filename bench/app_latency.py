"""Desktop app latency: cold start to ready, memory, and hotkey release to text inserted.

    . .ci/desktop.sh && python bench/app_latency.py --out bench/results/app_latency.json
    . .ci/desktop.sh && python bench/app_latency.py --smoke --out /tmp/app_latency.json

Runs the real app (`sottovoce`, bundled tiny.en) on the X display with the PulseAudio virtual
microphone, like tests/test_e2e_desktop.py. For each insertion mode (paste, the default; type,
the peer in the same run) it starts the app cold and measures:
  cold start   process start -> engine "listening" (model loaded, microphone open)
  RSS          resident memory once ready, and the peak after all dictations
  release->text  N times: hold Ctrl+Alt+Space, play a short speech clip into the mic, release;
               time from the key release to the complete text in another app's text field
               (CLOCK_MONOTONIC, shared across processes); a different sentence each time
  breakdown    per dictation, where that time went: the app's "latency breakdown" log line
               (app.latency_trace: key release seen by the app, utterance closed, final decode
               queued / started / done, final emitted, received on the GUI thread, injection
               start, clipboard set, paste keys sent or text typed) plus the bench's own
               "xdotool_returned" (its key-up command came back) and "visible" (the text
               complete in the target app), all in ms after the app saw the release
  release->verified  the app's own check that the text is in the field (app.verify reads the
               target field back over AT-SPI; the target runs with accessibility on): the
               breakdown's "verified" step, how much later than "visible" it comes ("check
               adds"), and each dictation's verdict (verified / sent, not verified / failed)
On Wayland (`--sessions wayland`, or `x11 wayland` to compare in one run) the same app runs as a
native Wayland client of a headless sway (tests/support/wayland_driver.py), the target field too; there
is no key grab, so push-to-talk is what a sway binding sends, the control socket's `ptt press` /
`ptt release` (sent here in-process: the bench's release time is when the release reached the
socket; a binding that execs `sottovoce ptt release` adds that command's start-up, measured
once and printed as "control command start-up"), and text goes in through wtype / wl-copy.
Prints the tables (median and p95 over the runs, with the load average), writes JSON.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, pct, print_table, write_json

sys.path.insert(0, str(REPO / "tests"))  # the desktop drivers the end-to-end tests use

from support.desktop_driver import (  # noqa: E402
    TARGET_TITLE,
    LoggedProcess,
    focus,
    missing_prerequisite,
    play,
    start_app,
    start_monitor_reader,
    start_target,
    window_id,
    xdotool,
)
from support.wayland_driver import SwaySession  # noqa: E402
from support.wayland_driver import missing_prerequisite as missing_sway  # noqa: E402

from app.control import send_command  # noqa: E402
from app.latency_trace import parse  # noqa: E402

TEST_AUDIO = REPO / "tests" / "audio"
# Different sentences, as in real dictation: repeating one sentence makes it the prompt of the
# next decode, which trips the engine's repetition guards and measures their retries instead.
DEFAULT_CLIPS = ("arctic-aew-a0001.flac", "arctic-aew-a0002.flac", "arctic-aew-a0003.flac",
                 "arctic-axb-a0004.flac", "arctic-axb-a0006.flac", "ls-tc-6930-75918-0000.flac",
                 "cmusphinx-goforward.flac", "timit-ldc93s1.flac", "mfa-thoughts.flac",
                 "speechrecognition-english-one-two-three.flac")
MODES = ("paste", "type")
SESSIONS = ("x11", "wayland")


class X11Keys:
    """Push-to-talk as a person does it on X11: the hotkey held with xdotool."""

    def __init__(self) -> None:
        self.target_wid = window_id(f"^{TARGET_TITLE}$")

    def focus_target(self) -> None:
        focus(self.target_wid)

    def press(self) -> None:
        xdotool("keydown", "ctrl+alt+space")

    def release(self) -> None:
        xdotool("keyup", "space", "alt", "ctrl")

    def quit(self, app: LoggedProcess) -> None:
        focus(window_id("^Sottovoce$"))
        xdotool("key", "--clearmodifiers", "ctrl+q")
        try:
            app.proc.wait(20)
        except subprocess.TimeoutExpired:
            # The key can miss the window on a busy X server (CI saw it once); SIGTERM quits the
            # same way (File > Quit), so the run still ends cleanly, and says so.
            print("ctrl+q did not reach the app within 20 s; quitting it with SIGTERM.\n"
                  + "\n".join(["app log (last lines):", *app.log[-20:]]), file=sys.stderr)
            app.proc.terminate()
            app.proc.wait(60)


class WaylandKeys:
    """Push-to-talk as a sway binding sends it: the control socket's ptt press / release."""

    def __init__(self, sway: Any, socket: Path) -> None:
        self.sway, self.socket = sway, socket

    def focus_target(self) -> None:
        self.sway.focus(TARGET_TITLE)

    def press(self) -> None:
        send_command("ptt press", self.socket)

    def release(self) -> None:
        send_command("ptt release", self.socket)

    def quit(self, app: LoggedProcess) -> None:
        app.proc.terminate()  # SIGTERM quits like File > Quit
        app.proc.wait(60)


def write_settings(config_dir: Path, mode: str) -> None:
    # The app's own settings file, so the run uses the chosen insertion mode.
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "settings.toml").write_text(
        f'version = 2\ninject_mode = "{mode}"\nfirst_run_hint = false\n')


def dictate_once(app: LoggedProcess, target: LoggedProcess, keys: Any,
                 clip: Path, before: int) -> tuple[float, float, int, dict[str, float], str]:
    """One push-to-talk dictation into a field holding `before` characters: ms from key release
    to the complete text in the other app, ms from release to the app logging its final text
    (the engine's share), the field's new length and the breakdown (module docstring). The
    field is never cleared: extra key strokes between runs would only add ways to disturb the
    measurement."""
    keys.focus_target()
    target.drain()
    keys.press()
    app.next_matching("talking=True", 30)
    play(clip)
    time.sleep(0.4)  # release just after the last word, as a person does
    keys.release()
    released = time.monotonic()
    final_at, _ = app.next_matching("INFO app.final_route: final", 60)
    inserted = app.next_matching("characters", 60)[1]  # "Pasted 41 characters · verified"
    steps = read_breakdown(app)
    expected = before + int(re.findall(r"(\d+) characters", inserted)[-1])
    while True:
        at, line = target.next_matching("text", 30)
        length = int(line.split()[2])
        if length >= expected:
            if steps:
                app_release = steps.pop("_at")
                # The bench's release time is taken when xdotool has returned, so this is
                # how long after the app saw the key up that happened (not a delay of the app).
                steps["xdotool_returned"] = (released - app_release) * 1000
                steps["visible"] = (at - app_release) * 1000
            return (at - released) * 1000, (final_at - released) * 1000, length, steps, \
                verdict(inserted)


def verdict(message: str) -> str:
    """What the app's insertion message says of the check (app.checked_inject)."""
    if "· verified" in message:
        return "verified"
    return "sent, not verified" if "not verified" in message else "failed"


def read_breakdown(app: LoggedProcess) -> dict[str, float]:
    """The app's "latency breakdown from release at T: a=+1 b=+2" line as {step: ms}, with
    "_at" = T; {} from an app that does not log one."""
    try:
        line = app.next_matching("latency breakdown from release", 10)[1]
    except AssertionError:
        return {}
    found = re.search(r"latency breakdown from release at ([\d.]+): (.*)$", line)
    if found is None:
        return {}
    return {**parse(found.group(2)), "_at": float(found.group(1))}


def breakdown_stats(rows: list[dict[str, float]]) -> dict[str, dict[str, float | None]]:
    """Median and p95 per step, steps in the order of their medians."""
    names = {name for row in rows for name in row}
    out = {name: pct([row[name] for row in rows if name in row]) for name in names}
    return dict(sorted(out.items(), key=lambda item: item[1]["p50"] or 0.0))


def run_mode(mode: str, runs: int, clips: list[Path], root: Path,
             sway: Any = None) -> dict[str, Any]:
    """One cold start and `runs` dictations in one insertion mode; on Wayland when `sway` (a
    tests/support/wayland_driver.SwaySession) is given."""
    root = root / ("wayland" if sway else "x11") / mode
    env = dict(os.environ, SOTTOVOCE_CONFIG_DIR=str(root / "config"),
               SOTTOVOCE_DATA_DIR=str(root / "data"),
               SOTTOVOCE_CONTROL_SOCKET=str(root / "control.sock"), PYTHONUNBUFFERED="1")
    if sway is not None:
        env = sway.env(env)
    write_settings(root / "config", mode)
    # On the accessibility bus, so the app can check its text arrived (app.verify).
    target = start_target(dict(env, QT_LINUX_ACCESSIBILITY_ALWAYS_ON="1"), root / "field.txt")
    # A Wayland seat without a keyboard tells no window it is active, so nothing reads as
    # focused; a real session has one (wtype's own come and go with each run).
    keyboard = subprocess.Popen(["wtype", "-s", "3600000"], env=env) if sway else None
    started = time.monotonic()
    app = start_app(env)
    try:
        app.wait_for("engine state listening", 180)
        cold_start_s = time.monotonic() - started
        app.wait_for("hotkey route" if sway else "global hotkey", 30)
        rss_ready, _ = app.rss_mib()
        keys = WaylandKeys(sway, root / "control.sock") if sway else X11Keys()
        timings: list[tuple[float, float]] = []
        steps: list[dict[str, float]] = []
        verdicts: list[str] = []
        length = 0
        for run in range(runs):
            clip = clips[run % len(clips)]
            to_text, to_final, length, row, said = dictate_once(app, target, keys, clip, length)
            timings.append((to_text, to_final))
            verdicts.append(said)
            if row:
                steps.append(row)
        _, rss_peak = app.rss_mib()
        command_ms = command_startup_ms(env) if sway else None
        keys.quit(app)
    except AssertionError:
        print("\n".join(["app log (last lines):", *app.log[-40:]]), file=sys.stderr)
        raise
    finally:
        app.stop()
        target.stop()
        if keyboard is not None:
            keyboard.kill()
            keyboard.wait(10)
    return {"verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
            "release_to_verified_ms": pct([r["verified"] for r in steps if "verified" in r]),
            "check_adds_ms": pct([r["verified"] - r["visible"] for r in steps
                                  if "verified" in r and "visible" in r]),
            "cold_start_s": cold_start_s, "control_command_startup_ms": command_ms, "rss_ready_mib": rss_ready, "rss_peak_mib": rss_peak,
            "release_to_text_ms": pct([t for t, _ in timings]),
            "release_to_final_ms": pct([f for _, f in timings]),
            "samples_ms": [t for t, _ in timings],
            "breakdown_ms": breakdown_stats(steps) if steps else None}


def command_startup_ms(env: dict[str, str], times: int = 3) -> dict[str, float | None]:
    """What a compositor binding adds: `sottovoce ptt release` is a new Python process
    (measured with `ptt release` while not talking, which changes nothing)."""
    samples = []
    for _ in range(times):
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "app.cli", "ptt", "release"], env=env, cwd=REPO,
                       check=True, capture_output=True, timeout=60)
        samples.append((time.monotonic() - started) * 1000)
    return pct(samples)


def print_results(results: dict[str, dict[str, Any]]) -> None:
    print_table(("mode", "cold start s", "RSS MiB", "peak MiB", "release->text median ms",
                 "p95 ms", "release->final median"),
                [(mode, round(r["cold_start_s"], 2), round(r["rss_ready_mib"]),
                  round(r["rss_peak_mib"]), r["release_to_text_ms"]["p50"],
                  r["release_to_text_ms"]["p95"], r["release_to_final_ms"]["p50"])
                 for mode, r in results.items()])
    print()
    print_table(("route", "verdicts", "release->verified median ms", "p95 ms",
                 "check adds median ms"),
                [(mode, ", ".join(f"{n} {v}" for v, n in r["verdicts"].items()),
                  r["release_to_verified_ms"]["p50"], r["release_to_verified_ms"]["p95"],
                  r["check_adds_ms"]["p50"]) for mode, r in results.items()])
    for mode, r in results.items():
        if r.get("breakdown_ms"):
            print()
            print_table((f"{mode}: ms after the app saw the key release", "median", "p95"),
                        [(name, s["p50"], s["p95"]) for name, s in r["breakdown_ms"].items()])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="dictations per mode")
    parser.add_argument("--clips", type=Path, nargs="+",
                        default=[TEST_AUDIO / name for name in DEFAULT_CLIPS],
                        help="speech WAVs to dictate, in turn")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--sessions", nargs="+", default=["x11"], choices=SESSIONS,
                        help="x11 (Xvfb), wayland (headless sway), or both to compare")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "app_latency.json")
    parser.add_argument("--smoke", action="store_true", help="one dictation, paste mode only")
    args = parser.parse_args(argv)
    if args.smoke:
        args.runs, args.modes = 1, ["paste"]
    reason = missing_prerequisite() or ("wayland" in args.sessions and missing_sway())
    if reason:
        print(f"app_latency: {reason}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]  # a shared machine: say how busy it was
    reader = start_monitor_reader()
    results: dict[str, dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="sottovoce-bench-") as tmp:
            if "x11" in args.sessions:
                results.update({mode: run_mode(mode, args.runs, args.clips, Path(tmp))
                                for mode in args.modes})
            if "wayland" in args.sessions:
                sway = SwaySession()
                try:
                    results.update({f"wayland/{mode}": run_mode(mode, args.runs, args.clips,
                                                                Path(tmp), sway)
                                    for mode in args.modes})
                finally:
                    sway.stop()
    finally:
        reader.terminate()
        reader.wait(10)
    print_results(results)
    for mode in args.modes:
        wayland, x11 = results.get(f"wayland/{mode}"), results.get(mode)
        if wayland:
            startup = wayland["control_command_startup_ms"]["p50"]
            print(f"wayland/{mode}: control command start-up (a binding's exec) median "
                  f"{startup:.0f} ms")
        if wayland and x11:
            ratio = (wayland["release_to_text_ms"]["p50"]
                     / x11["release_to_text_ms"]["p50"])
            results[f"wayland/{mode}"]["over_x11_median"] = ratio
            print(f"{mode}: Wayland / X11 release->text median ratio: {ratio:.2f}")
    summary: dict[str, Any] = {"clips": [c.name for c in args.clips], "runs": args.runs,
                               "modes": results,
                               "load_average_1m": [load_before, os.getloadavg()[0]],
                               "cpu_count": os.cpu_count()}
    print(f"1-minute load average before/after: {load_before:.1f} / {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    if "paste" in results and "type" in results:  # X11
        summary["type_over_paste_median"] = (
            results["type"]["release_to_text_ms"]["p50"]
            / results["paste"]["release_to_text_ms"]["p50"])
        print(f"type / paste median ratio: {summary['type_over_paste_median']:.2f}")
    print(f"cold start mean over modes: "
          f"{statistics.fmean(r['cold_start_s'] for r in results.values()):.2f} s")
    write_json(args.out, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
