"""The model manager against a hostile hub or mirror and hostile arguments (issue 41).

A hub on 127.0.0.1 (tests/hub_server.py), pointed at with HF_ENDPOINT as a user points at a
mirror, serves a small model repository and misbehaves on demand: names that climb out of the
model folder, answers that never come, an HTML page instead of the file list, more bytes than
declared. Each test runs `sottovoce models ...` (app.cli.main, or a real second process) and
checks what the user sees (exit status, the message) and the files on disk, inside the cache
and in a watched "home" around it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import namedtuple
from fnmatch import fnmatch
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from engine import model_download
from engine.model_catalog import MODEL_FILE_PATTERNS
from engine.model_download import ModelDownloadError, download, partial_dir
from engine.model_guard import hub_file_path
from engine.models import downloaded_path, models_dir
from tests.hub_server import COMMIT, LocalHub

REPO = "Systran/faster-whisper-tiny.en"  # the catalogue's repository for tiny.en
# A small stand-in for the model: the downloader checks hashes, not whether CTranslate2 loads it.
FILES = {"config.json": b'{"fake": true}\n', "model.bin": bytes(range(256)) * 800,
         "tokenizer.json": b"{}\n", "vocabulary.txt": b"x" * 1000}
REPO_ROOT = Path(__file__).resolve().parent.parent
UP_TO_HOME = "/".join([".."] * 6)  # from <home>/.cache/sottovoce/models/hub/.partial-tiny.en/x


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home holding a dotfile, a model folder of their own, and the cache."""
    home = tmp_path / "home"
    (home / "my-model").mkdir(parents=True)
    (home / "my-model" / "model.bin").write_bytes(b"the user's own model")
    (home / ".bashrc").write_text("# the user's shell settings\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SOTTOVOCE_CACHE_DIR", str(home / ".cache" / "sottovoce"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return home


@pytest.fixture()
def hub(home: Path, monkeypatch: pytest.MonkeyPatch):
    with LocalHub() as server:
        server.state.repos[REPO] = dict(FILES)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def snapshot(root: Path) -> dict[str, str]:
    """Every file, folder and link under ``root``: content hash, "dir" or the link's target."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[key] = "dir"
        else:
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def outside_cache(home: Path) -> dict[str, str]:
    return {k: v for k, v in snapshot(home).items() if not k.startswith(".cache")}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["models", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def file_gets(hub: LocalHub) -> list[str]:
    return [p for m, p, _ in hub.state.requests if m in ("GET", "HEAD") and "/resolve/" in p]


# --- remove ----------------------------------------------------------------------------------


def refusal(name: str, reason: str) -> str:
    return (f"sottovoce: cannot remove {name!r}: {reason}. `sottovoce models remove` deletes "
            f"only models downloaded into {models_dir()} (see `sottovoce models list`); "
            "nothing was deleted\n")


@pytest.mark.parametrize("arg", [
    "", ".", "..", "../..", "../../..", "tiny.en/../..", "/", "HOME/my-model", "MODELS",
    "MODELS/tiny.en", "~/my-model", ".partial-tiny.en", ".locks", "tiny.en/", "..\\..", "a:b",
])
def test_remove_refuses_anything_but_a_model_name(hub: LocalHub, home: Path, arg: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "download", "tiny.en")[0] == 0
    (partial_dir("tiny.en")).mkdir()  # an interrupted download beside the finished one
    arg = arg.replace("HOME", str(home)).replace("MODELS", str(models_dir()))
    before = snapshot(home)
    code, out, err = run(capsys, "remove", arg)
    assert (code, out) == (1, "")
    assert err == refusal(arg, f"{arg!r} is not a model name")
    assert snapshot(home) == before


def test_remove_refuses_folders_the_cache_does_not_record(hub: LocalHub, home: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    models = models_dir()
    (models / "junk").mkdir(parents=True)  # in the cache, but no download made it
    (models / "junk" / "model.bin").write_bytes(b"?")
    (models / "small.en").symlink_to(home / "my-model")  # a catalogue name, but a link
    (models / "other").mkdir()  # a record that names another model
    (models / "other" / "sottovoce-download.json").write_text('{"name": "small"}')
    before = snapshot(home)
    assert run(capsys, "remove", "junk") == (
        1, "", refusal("junk", "'junk' is not a model Sottovoce downloaded"))
    assert run(capsys, "remove", "other") == (
        1, "", refusal("other", "'other' is not a model Sottovoce downloaded"))
    assert run(capsys, "remove", "small.en") == (
        1, "", refusal("small.en", f"{models / 'small.en'} is a link, not a download"))
    assert run(capsys, "remove", "my-model") == (
        1, "", refusal("my-model", "'my-model' is not a model Sottovoce downloaded"))
    assert snapshot(home) == before


def test_remove_deletes_a_download_and_a_recorded_one_only(hub: LocalHub, home: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    assert run(capsys, "download", "tiny.en")[0] == 0
    old = models_dir() / "large-v1"  # left by an older catalogue: its record names it
    old.mkdir()
    (old / "model.bin").write_bytes(b"m" * 3000)
    (old / "sottovoce-download.json").write_text('{"name": "large-v1"}')
    before = outside_cache(home)
    size = sum(len(v) for v in FILES.values()) + (models_dir() / "tiny.en" /
                                                 "sottovoce-download.json").stat().st_size
    assert run(capsys, "remove", "tiny.en") == (0, f"removed tiny.en: {size / 1e3:.1f} kB freed\n",
                                                 "")
    assert not (models_dir() / "tiny.en").exists()
    code, out, err = run(capsys, "remove", "large-v1")
    assert (code, out, err) == (0, "removed large-v1: 3.0 kB freed\n", "")
    assert not old.exists()
    assert outside_cache(home) == before
    assert run(capsys, "remove", "tiny.en") == (
        1, "", "sottovoce: tiny.en is bundled with Sottovoce and cannot be removed\n")
    assert run(capsys, "remove", "small.en") == (1, "", "sottovoce: small.en is not downloaded\n")


# --- what a hub may name ---------------------------------------------------------------------


def refused(name: str, reason: str) -> str:
    return (f"sottovoce: tiny.en: the hub lists a file Sottovoce refuses to save, {name!r}: "
            f"{reason}. Nothing was downloaded; the hub or mirror (HF_ENDPOINT) is wrong or "
            "hostile\n")


COMPONENT = "the name has an empty, '.' or '..' component"


@pytest.mark.parametrize(("name", "reason"), [
    (f"vocabulary.x/{UP_TO_HOME}/.bashrc", COMPONENT),  # the reported one: <home>/.bashrc
    (f"vocabulary.x/{UP_TO_HOME}/my-model/model.bin", COMPONENT),
    ("vocabulary.x/../../sottovoce-download.json", COMPONENT),
    ("vocabulary.x//.bashrc", COMPONENT),
    ("vocabulary.x/./y", COMPONENT),
    ("vocabulary.x/", COMPONENT),
    ("vocabulary.x\\..\\..\\.bashrc", "the name holds a backslash or a colon (a Windows path "
                                      "or drive)"),
    ("vocabulary.C:/Users/x/.bashrc", "the name holds a backslash or a colon (a Windows path "
                                      "or drive)"),
    ("vocabulary.x\n", "the name holds a control character"),
    ("vocabulary.x/CON", "a component of the name is not allowed on Windows"),
    ("vocabulary." + "x" * 250, "a component of the name is too long for a file system"),
    ("vocabulary.txt.part", "the name is one Sottovoce uses for its own files"),
])
def test_a_name_that_leaves_the_model_folder_is_refused_before_any_request(
        hub: LocalHub, home: Path, name: str, reason: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    hub.state.fallback = b"echo pwned\n"  # whatever URL the client made of the name, it is served
    hub.state.repos[REPO][name] = b"echo pwned\n"
    before = outside_cache(home)
    assert run(capsys, "download", "tiny.en") == (1, "", refused(name, reason))
    assert outside_cache(home) == before
    assert file_gets(hub) == []  # refused from the file list: not a HEAD, not a byte
    assert not (models_dir() / "tiny.en").exists() and not partial_dir("tiny.en").exists()


def test_names_that_clash_are_refused(hub: LocalHub, home: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    hub.state.repos[REPO].update({"vocabulary.a": b"1", "vocabulary.a/b": b"2"})
    assert run(capsys, "download", "tiny.en") == (
        1, "", refused("vocabulary.a", "it is both a file and a folder"))
    assert file_gets(hub) == []


def test_a_symbolic_link_in_the_way_is_refused(hub: LocalHub, home: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    staging = partial_dir("tiny.en")  # left by an interrupted run, then tampered with
    staging.mkdir(parents=True)
    (staging / "vocabulary.d").symlink_to(home)
    hub.state.repos[REPO]["vocabulary.d/.bashrc"] = b"echo pwned\n"
    before = outside_cache(home)
    assert run(capsys, "download", "tiny.en") == (
        1, "", refused("vocabulary.d/.bashrc", "a symbolic link is in the way (vocabulary.d)"))
    assert outside_cache(home) == before
    assert not [p for p in file_gets(hub) if p.startswith("GET")]


@pytest.mark.parametrize("link", [".partial-tiny.en", "tiny.en"])
def test_a_model_folder_that_is_a_link_is_refused(hub: LocalHub, home: Path, link: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    models_dir().mkdir(parents=True)
    (models_dir() / link).symlink_to(home / "my-model")
    before = outside_cache(home)
    assert run(capsys, "download", "tiny.en") == (
        1, "", f"sottovoce: tiny.en: a symbolic link is in the way in {models_dir()}; nothing "
               "was downloaded\n")
    assert outside_cache(home) == before
    assert not [p for p in file_gets(hub) if p.startswith("GET")]


SEGMENTS = st.sampled_from(["..", ".", "", "a", "b.txt", "\\", "C:", "~", " ", "é", "%2e%2e",
                            "CON", "lnk", "\x00", "sottovoce-download.json", "x.part", "/"])
HUB_NAMES = st.one_of(
    st.lists(SEGMENTS, min_size=1, max_size=8).map(lambda s: "vocabulary." + "/".join(s)),
    st.text(max_size=40).map(lambda t: "vocabulary." + t),
    st.text(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(name=HUB_NAMES)
def test_property_a_checked_path_stays_inside(name: str) -> None:
    """Any name either resolves inside the model folder, through no link, or is refused."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "home" / "models" / "m"
        root.mkdir(parents=True)
        (root / "vocabulary.lnk").symlink_to(Path(tmp) / "home")
        try:
            path = hub_file_path(root, name)
        except ValueError:
            return
        base = root.resolve()
        assert path.resolve().is_relative_to(base) and path.resolve() != base
        assert path.resolve() == base.joinpath(*name.split("/"))  # the name, nothing else
        assert not any(p.is_symlink() for p in [path, *path.parents] if p != root.parent)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(HUB_NAMES, min_size=1, max_size=3, unique=True))
def test_property_a_hostile_listing_writes_nothing_outside_the_model_folder(
        names: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever names a hub lists, a download either saves each one inside the model's folder
    or fails naming one of them; nothing outside the model's folder changes."""
    with tempfile.TemporaryDirectory() as tmp, LocalHub() as server:
        home = Path(tmp) / "home"
        (home / "my-model").mkdir(parents=True)
        (home / ".bashrc").write_text("# settings\n")
        monkeypatch.setenv("SOTTOVOCE_CACHE_DIR", str(home / ".cache" / "sottovoce"))
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        staging = partial_dir("tiny.en")
        staging.mkdir(parents=True)
        (staging / "vocabulary.lnk").symlink_to(home)
        server.state.repos[REPO] = {**FILES, **{n: b"hub file\n" for n in names}}
        server.state.fallback = b"hub file\n"
        before = outside_cache(home)
        try:
            path = download("tiny.en", timeout_s=20)
        except ModelDownloadError as exc:
            assert "the hub lists a file Sottovoce refuses to save" in str(exc)
            assert any(f"{n!r}:" in str(exc) for n in names)
            assert downloaded_path("tiny.en") is None
        else:
            for name in names:  # each model file (the rest is not fetched) at its name
                if any(fnmatch(name, p) for p in MODEL_FILE_PATTERNS):
                    saved = path.joinpath(*name.split("/"))
                    assert saved.resolve().is_relative_to(path.resolve())
                    assert saved.read_bytes() == b"hub file\n"
        assert outside_cache(home) == before
        model_files = {k for k in snapshot(home) if k.startswith(".cache")}
        hub_folder = str(Path(".cache", "sottovoce", "models", "hub"))
        assert all(k.startswith(hub_folder) or hub_folder.startswith(k) for k in model_files)


# --- waits, answers and sizes ----------------------------------------------------------------


@pytest.mark.parametrize(("stage", "message"), [
    ("info", "the hub did not answer the file list of tiny.en within 2 s (URL); try again "
             "later, or use another mirror (HF_ENDPOINT) or a proxy (HTTPS_PROXY)"),
    ("head", "the hub did not answer about config.json of tiny.en within 2 s (URL); try "
             "again later, or use another mirror (HF_ENDPOINT) or a proxy (HTTPS_PROXY)"),
    ("get", "the hub stopped sending config.json of tiny.en: nothing arrived for 2 s; what "
            "was downloaded is kept, and the next try resumes"),
])
def test_a_hub_that_never_answers_is_given_up_on_saying_what_it_waited_for(
        hub: LocalHub, stage: str, message: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(model_download, "HUB_TIMEOUT_S", 2)  # 30 s for users
    hub.state.hang.add(stage)
    code, out, err = run(capsys, "download", "tiny.en")
    assert (code, out, err) == (1, "", "sottovoce: " + message.replace("URL", hub.url) + "\n")
    assert downloaded_path("tiny.en") is None


def test_a_captive_portal_page_is_named(hub: LocalHub, capsys: pytest.CaptureFixture[str]) -> None:
    hub.state.captive_portal = True
    assert run(capsys, "download", "tiny.en") == (
        1, "", f"sottovoce: the hub answered with an HTML page, not the file list of tiny.en: a "
               f"captive portal or proxy? Open {hub.url} in a browser (a network login page?), "
               "or set HF_ENDPOINT or HTTPS_PROXY\n")
    assert file_gets(hub) == []
    assert not (models_dir() / "tiny.en").exists() and not partial_dir("tiny.en").exists()


def test_more_bytes_than_declared_stop_the_download_and_are_deleted(
        hub: LocalHub, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hub.state.oversend["vocabulary.txt"] = 120_000_000  # declared: 1000 bytes
    assert run(capsys, "download", "tiny.en") == (
        1, "", "sottovoce: tiny.en: the hub sent more than the 1000 bytes it declared for "
               "vocabulary.txt; the download stopped and the file was deleted. The hub or mirror "
               "(HF_ENDPOINT) is wrong or hostile\n")
    staging = partial_dir("tiny.en")
    assert not (staging / "vocabulary.txt.part").exists()
    assert not (staging / "vocabulary.txt").exists()
    # What was verified before it is kept for the next try; nothing else is on disk.
    kept = {p.name: p.stat().st_size for p in staging.iterdir()}
    assert kept == {n: len(FILES[n]) for n in ("config.json", "model.bin", "tokenizer.json")}
    assert downloaded_path("tiny.en") is None


def test_a_file_shorter_than_declared_ends_the_download(hub: LocalHub,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    hub.state.declared["config.json"] = len(FILES["config.json"]) + 100
    assert run(capsys, "download", "tiny.en") == (
        1, "", "sottovoce: the hub ended config.json of tiny.en after 15 of its 115 bytes; what "
               "was downloaded is kept, and the next try resumes\n")
    ranges = [r for m, p, r in hub.state.requests if m == "GET" and p.endswith("/config.json")]
    assert ranges == ["", "bytes=15-"]  # resumed once, and given up when nothing more came
    assert (partial_dir("tiny.en") / "config.json.part").read_bytes() == FILES["config.json"]


@pytest.mark.parametrize(("declared", "message"), [
    (-5, "the hub gave an impossible size for Systran/faster-whisper-tiny.en/model.bin"),
    (10**15, "not enough disk space for tiny.en: it needs 1000000.0 GB more"),
])
def test_impossible_declared_sizes_are_refused(hub: LocalHub, declared: int, message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    hub.state.declared["model.bin"] = declared
    code, out, err = run(capsys, "download", "tiny.en")
    assert (code, out) == (1, "") and err.startswith("sottovoce: " + message)
    assert not [p for p in file_gets(hub) if p.startswith("GET")]


def test_free_space_is_checked_again_as_bytes_arrive(hub: LocalHub, home: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Enough room when it starts; then another program fills the disk."""
    usage = namedtuple("usage", "total used free")
    margin = model_download.DISK_MARGIN
    checks: list[Path] = []

    def disk_usage(path: Path) -> tuple[int, int, int]:
        checks.append(Path(path))
        free = sum(map(len, FILES.values())) + margin + 1 if len(checks) == 1 else margin
        return usage(10**12, 10**12 - free, free)

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    code, out, err = run(capsys, "download", "tiny.en")
    staging = partial_dir("tiny.en")
    assert (code, out, err) == (
        1, "", f"sottovoce: not enough disk space for tiny.en: 50.0 MB is left in {staging} and "
               "Sottovoce keeps 50.0 MB free; the download stopped. What arrived is kept: free "
               "some space and download again to resume\n")
    assert (staging / "config.json.part").stat().st_size == 0  # checked before the first write
    assert downloaded_path("tiny.en") is None


@pytest.mark.parametrize("corrupt", [False, True])
def test_a_redirect_to_another_host_is_verified_and_given_no_token(
        hub: LocalHub, corrupt: bool, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """model.bin sent to a CDN on another host (another port: another origin), as the hub does:
    followed, hashed against what the hub recorded, and the user's HF_TOKEN stays with the hub."""
    monkeypatch.setenv("HF_TOKEN", "hf_NotARealTokenForTheTest")
    with LocalHub() as cdn:
        cdn.state.repos[REPO] = dict(FILES)
        if corrupt:
            cdn.state.corrupt.add("model.bin")
        hub.state.cdn = cdn.url
        result = run(capsys, "download", "tiny.en")
    url = f"/{REPO}/resolve/{COMMIT}/model.bin"
    assert [(m, p) for m, p, _ in cdn.state.requests] == [("GET", url)]
    assert f"/api/models/{REPO}/revision/main" in hub.state.authorized  # the token is in use...
    assert cdn.state.authorized == []  # ...and never sent to another host
    target = models_dir() / "tiny.en"
    if not corrupt:
        assert result == (0, f"tiny.en downloaded and verified: {target}\n", "")
        assert (target / "model.bin").read_bytes() == FILES["model.bin"]
        return
    good = hashlib.sha256(FILES["model.bin"]).hexdigest()
    bad = hashlib.sha256(bytes([FILES["model.bin"][0] ^ 0xFF]) + FILES["model.bin"][1:])
    assert result == (
        1, "", f"sottovoce: tiny.en: model.bin does not match the hash the hub records for it "
               f"(expected {good[:12]}…, got {bad.hexdigest()[:12]}…); it was deleted, and the "
               "model is not offered. Try again; if it keeps failing, the mirror or proxy alters "
               "it\n")
    assert not target.exists() and not (partial_dir("tiny.en") / "model.bin.part").exists()


# --- one download of a model at a time -------------------------------------------------------


def cli(*argv: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())",
            "models", *argv]


def test_a_second_download_of_the_same_model_says_who_holds_it(hub: LocalHub, home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    hub.state.drip.set()  # the first download stays under way until the test lets it go
    first = subprocess.Popen(cli("download", "tiny.en"), env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120  # a bound for a stuck test, not a measure
        while not any(m == "GET" and "/resolve/" in p for m, p, _ in hub.state.requests):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = subprocess.run(cli("download", "tiny.en"), env=env, text=True,
                                capture_output=True, timeout=120)
        assert (second.returncode, second.stdout, second.stderr) == (
            1, "", f"sottovoce: tiny.en is already being downloaded by another process "
                   f"(pid {first.pid}); wait for it to finish, or stop it, and try again\n")
        removal = subprocess.run(cli("remove", "tiny.en"), env=env, text=True,
                                 capture_output=True, timeout=120)
        assert (removal.returncode, removal.stdout, removal.stderr) == (
            1, "", f"sottovoce: cannot remove tiny.en: it is being downloaded by another process "
                   f"(pid {first.pid}); nothing was deleted\n")
        assert partial_dir("tiny.en").is_dir()
    finally:
        hub.state.drip.clear()
        out, err = first.communicate(timeout=120)
    target = models_dir() / "tiny.en"
    assert (first.returncode, out, err) == (0, f"tiny.en downloaded and verified: {target}\n", "")
    for name, data in FILES.items():
        assert (target / name).read_bytes() == data
    again = subprocess.run(cli("download", "tiny.en"), env=env, text=True,
                           capture_output=True, timeout=120)
    assert (again.returncode, again.stderr) == (0, "")
