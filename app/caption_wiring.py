"""Settings -> captions: the caption engine's config and the overlay's style, and a final as an
overlay line. Kept out of the controller, which only routes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.captions import CaptionConfig
from app.settings import Settings
from engine.captions import final_line
from engine.core.captions import CaptionLine
from engine.events import FinalText
from ui.caption_window import CaptionStyle


def caption_config(s: Settings, model: str, input_path: Path | None,
                   vocabulary: tuple[str, ...]) -> CaptionConfig:
    source = f"app:{s.caption_app}" if s.caption_source == "app" else s.caption_source
    if input_path is not None:
        source = "mic"  # a file played as the microphone
    return CaptionConfig(
        source=source, you=s.caption_you, them=s.caption_them, translate=s.caption_translate,
        mask=s.caption_mask_profanity, model=model, device=s.device, compute_type=s.compute_type,
        language=s.language or None, server=s.remote_url if s.backend == "remote" else "",
        input_path=input_path, vocabulary=vocabulary)


def caption_style(s: Settings) -> CaptionStyle:
    return CaptionStyle(lines=s.caption_lines, font_family=s.caption_font_family,
                        font_pt=s.caption_font_pt, background=s.caption_background,
                        opacity=s.caption_opacity, dock=s.caption_dock,
                        click_through=s.caption_click_through,
                        languages=s.caption_translate != "off",
                        translated=s.caption_translate == "alone")


def caption_line(final: FinalText, shown: str) -> CaptionLine:
    """A final as the overlay shows it (``shown``: after the replacement rules)."""
    return replace(final_line(final), text=shown)
