"""The server's web page in a real browser (Debian's headless Chromium driven by Selenium), with a
WAV as the browser's fake microphone, against the real server and the real tiny.en model: the
speech's text appears on the page as it would for a person, and a file put in the page's file
field is transcribed through the OpenAI-compatible endpoint. Screenshots go to tests/artifacts/
for a look."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.evaluation import ManifestEntry, error_rate
from engine.asr.ct2_decoder import Ct2Runner
from engine.server.server import ServerOptions, ServerThread, TranscriptionServer

pytestmark = [pytest.mark.timeout(300), pytest.mark.model]
KEY = "sk-web-page-test"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def server(tiny_transcriber: Any) -> Iterator[ServerThread]:
    runner = Ct2Runner(tiny_transcriber.model)
    runner.load()
    thread = ServerThread(TranscriptionServer(runner, ServerOptions(port=0, api_key=KEY)))
    thread.start()
    yield thread
    thread.stop()


def browser(microphone: Path) -> Any:
    if not (CHROMIUM and DRIVER):
        pytest.skip("chromium and chromedriver are not installed (apt: chromium "
                    "chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,900",
                 "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                 f"--use-file-for-fake-audio-capture={microphone}",
                 "--autoplay-policy=no-user-gesture-required"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def jfk(manifest: list[ManifestEntry]) -> ManifestEntry:
    return next(e for e in manifest if e.path.name.startswith("jfk"))


def transcript(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return " ".join(item.text for item in driver.find_elements(By.CSS_SELECTOR,
                                                                "#transcript li"))


def test_the_microphone_text_appears_on_the_page(server: ServerThread,
                                                 manifest: list[ManifestEntry]) -> None:
    """Record (the browser plays the JFK clip as its microphone, over and over): partials then
    finals appear, the latency meter reads, and one play of the clip reads as the clip."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    clip = jfk(manifest)
    driver = browser(clip.path)
    try:
        driver.get(f"http://127.0.0.1:{server.port}/")
        driver.find_element(By.ID, "key").send_keys(KEY)
        driver.find_element(By.ID, "record").click()
        # Four "country": the clip (two per play) heard in full at least once, wherever in
        # the loop the browser's fake microphone was when recording began.
        WebDriverWait(driver, 240).until(lambda d: transcript(d).lower().count("country") >= 4)
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "web-page-recording.png"))
        assert driver.find_element(By.ID, "status").text == "Listening"
        assert driver.find_element(By.ID, "latency").text.startswith("latency: ")
        driver.find_element(By.ID, "record").click()  # stop: the last final comes back
        WebDriverWait(driver, 60).until(
            lambda d: d.find_element(By.ID, "status").text == "Stopped")
        words = transcript(driver).split()
        # One play is the words between two ends of the clip (each ends on "country").
        ends = [i + 1 for i, w in enumerate(words) if "country" in w.lower()]
        plays = [" ".join(words[a:b]) for a in [0, *ends] for b in ends if b > a]
        best = min(plays, key=lambda play: error_rate([clip.text], [play]))
        assert error_rate([clip.text], [best]) <= 0.25, (best, words)
        assert driver.find_element(By.ID, "record").text == "Record"
    finally:
        driver.quit()


def test_a_file_given_to_the_page_is_transcribed(server: ServerThread,
                                                 manifest: list[ManifestEntry]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    clip = next(e for e in manifest if e.path.name == "ls-tc-1995-1837-0001.wav")
    driver = browser(jfk(manifest).path)
    try:
        driver.get(f"http://127.0.0.1:{server.port}/")
        driver.find_element(By.ID, "key").send_keys(KEY)
        driver.find_element(By.ID, "file").send_keys(str(clip.path))
        WebDriverWait(driver, 120).until(
            lambda d: d.find_element(By.ID, "file-status").text.endswith(": done"))
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "web-page-file.png"))
        assert driver.find_element(By.ID, "progress").get_attribute("value") == "100"
        assert error_rate([clip.text], [transcript(driver)]) <= 0.25, transcript(driver)
    finally:
        driver.quit()


def test_the_page_without_the_key_says_why(server: ServerThread,
                                           manifest: list[ManifestEntry]) -> None:
    """A file sent without the key is refused, and the page says so in words."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser(jfk(manifest).path)
    try:
        driver.get(f"http://127.0.0.1:{server.port}/")
        driver.find_element(By.ID, "file").send_keys(str(jfk(manifest).path))
        WebDriverWait(driver, 60).until(
            lambda d: "unauthorized" in d.find_element(By.ID, "file-status").text)
        assert transcript(driver) == ""
    finally:
        driver.quit()
