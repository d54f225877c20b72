"""Build live captions from settings or command-line options: which sources (microphone, what
the computer plays, one app, or you and them), local model or remote server, translation and
the profanity mask. Used by `sottovoce listen --source ...` and the app's captions mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.engine_parts import live_options, live_runner, remote_engine
from engine.audio.sources import AudioSource
from engine.captions import CaptionEngine, EngineBuilder, Feed, SharedRunner, SourceEngine
from engine.events import EngineFailed, EventSink
from engine.models import DEFAULT_MODEL

SOURCES = ("mic", "system", "app", "both")
TRANSLATE_MODES = ("off", "below", "alone")
TRANSLATION_MODEL = "base"  # the bundled multilingual model: Whisper's translate task needs one


@dataclass(frozen=True)
class CaptionConfig:
    """``source``: "mic", "system", "app:NAME", "both" (mic as ``you``, system as ``them``) or
    "device:NAME" (one named PulseAudio source or monitor). ``translate``: "off", "below" (an
    English line under each original) or "alone" (English only). ``server``: a remote server's
    URL (ours or whisperlive://) instead of the local model."""

    source: str = "mic"
    you: str = "You"
    them: str = "Them"
    translate: str = "off"
    mask: bool = False
    model: str = DEFAULT_MODEL
    device: str = "auto"
    compute_type: str = "auto"
    language: str | None = None
    server: str = ""
    mic: int | str | None = None  # input device for the microphone (None: the default)
    input_path: Path | None = None  # a file played as the microphone (tests, demos)
    journal: bool = True
    vocabulary: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        kind = self.source.partition(":")[0]
        if kind not in (*SOURCES, "device"):
            raise ValueError(f"unknown caption source {self.source!r}: use mic, system, "
                             "app:NAME or both")
        if kind in ("app", "device") and not self.source.partition(":")[2].strip():
            raise ValueError(f"{kind}: needs a name ({kind}:NAME)")
        if self.translate not in TRANSLATE_MODES:
            raise ValueError(f"translate must be one of {TRANSLATE_MODES}")
        if self.source == "both" and (not self.you.strip() or not self.them.strip()
                                      or self.you.strip() == self.them.strip()):
            raise ValueError("the two sources need two different names")
        if self.server and self.translate != "off":
            raise ValueError("translation needs the local multilingual model (not --server)")

    @property
    def decode_model(self) -> str:
        """The model to load: a translation needs a multilingual one."""
        if self.translate != "off" and self.model.endswith(".en"):
            return TRANSLATION_MODEL
        return self.model


def _microphone(config: CaptionConfig) -> AudioSource:
    from engine.audio.sources import FileSource, MicrophoneSource

    if config.input_path is not None:
        return FileSource(config.input_path, realtime=True, tail_silence_s=1.0)
    return MicrophoneSource(config.mic)


def _output(spec: str) -> AudioSource:
    from engine.audio.outputs import CaptureTarget, output_capture

    return output_capture(CaptureTarget.parse(spec))


def feeds(config: CaptionConfig) -> list[Feed]:
    """The sources to caption; "both" without any microphone is the computer's sound alone
    (`caption_engine` says so)."""
    if config.source == "both":
        them = Feed(config.them.strip(), _output("system"))
        if config.input_path is None and config.mic is None and not _has_microphone():
            return [them]
        return [Feed(config.you.strip(), _microphone(config)), them]
    if config.source == "mic":
        return [Feed("", _microphone(config))]
    return [Feed("", _output(config.source))]


def _has_microphone() -> bool:
    from engine.audio.devices import has_microphone

    return has_microphone()


def caption_engine(config: CaptionConfig, sink: EventSink) -> tuple[CaptionEngine, SharedRunner | None]:
    """The caption engine for ``config`` (not started) and its shared local runner (None with
    a server). Raises EngineError (no sound server, no model...) with a message to show."""
    sources = feeds(config)
    if config.source == "both" and len(sources) == 1:
        # Else the sound server's default input, a monitor, would be "you" hearing "them".
        sink(EngineFailed(f"there is no microphone: only the computer's sound is captioned "
                          f"(as {config.them.strip()!r})", recoverable=True))
    mask = None
    if config.mask:
        from engine.profanity import profanity_mask

        mask = profanity_mask()
    journal = CaptionEngine.new_journal() if config.journal else None
    if config.server:
        return CaptionEngine(sink, sources, _remote_builder(config), mask=mask,
                             journal=journal), None
    runner = SharedRunner(live_runner(config.decode_model, config.device,
                                      compute_type=config.compute_type))
    return CaptionEngine(sink, sources, _local_builder(config, runner),
                         translate_with=runner if config.translate == "below" else None,
                         mask=mask, journal=journal), runner


def _local_builder(config: CaptionConfig, runner: SharedRunner) -> EngineBuilder:
    from engine.live import LocalLiveEngine

    task = "translate" if config.translate == "alone" else "transcribe"
    # Captions commit the stable words of a long utterance while it is still spoken: a
    # lecture or a video rarely pauses long enough to end one (the pieces of a sentence make
    # one line: engine.core.captions.continues). Not with two sources, whose echo guard
    # compares whole lines, nor with a translation below each line, which translates each
    # final's audio on its own.
    commit = config.source != "both" and config.translate != "below"
    options = live_options("vad", language=config.language, vocabulary=config.vocabulary,
                           journal=False, task=task, commit_stable=commit)

    def build(source: AudioSource, sink: EventSink) -> SourceEngine:
        return LocalLiveEngine(sink, source=source, runner=runner, options=options)
    return build


def _remote_builder(config: CaptionConfig) -> EngineBuilder:
    def build(source: AudioSource, sink: EventSink) -> SourceEngine:
        return remote_engine(sink, config.server, source, language=config.language,
                             mode="vad", vocabulary=config.vocabulary)
    return build
