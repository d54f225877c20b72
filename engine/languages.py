"""Whisper's languages by name, and the user's own set of them.

`LANGUAGES` maps each code Whisper knows (faster-whisper's tokenizer has the same codes) to its
English name, in Whisper's order (by amount of training data). `parse_languages` reads the
settings' comma-separated set; `restrict` picks the most likely language of a detection within
that set, so a short clip is not taken for a language the user never speaks; `next_language`
is the cycle a hotkey and the tray step through ("" is auto-detect among the set).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

LANGUAGES: dict[str, str] = {
    "en": "English", "zh": "Chinese", "de": "German", "es": "Spanish", "ru": "Russian",
    "ko": "Korean", "fr": "French", "ja": "Japanese", "pt": "Portuguese", "tr": "Turkish",
    "pl": "Polish", "ca": "Catalan", "nl": "Dutch", "ar": "Arabic", "sv": "Swedish",
    "it": "Italian", "id": "Indonesian", "hi": "Hindi", "fi": "Finnish", "vi": "Vietnamese",
    "he": "Hebrew", "uk": "Ukrainian", "el": "Greek", "ms": "Malay", "cs": "Czech",
    "ro": "Romanian", "da": "Danish", "hu": "Hungarian", "ta": "Tamil", "no": "Norwegian",
    "th": "Thai", "ur": "Urdu", "hr": "Croatian", "bg": "Bulgarian", "lt": "Lithuanian",
    "la": "Latin", "mi": "Maori", "ml": "Malayalam", "cy": "Welsh", "sk": "Slovak",
    "te": "Telugu", "fa": "Persian", "lv": "Latvian", "bn": "Bengali", "sr": "Serbian",
    "az": "Azerbaijani", "sl": "Slovenian", "kn": "Kannada", "et": "Estonian",
    "mk": "Macedonian", "br": "Breton", "eu": "Basque", "is": "Icelandic", "hy": "Armenian",
    "ne": "Nepali", "mn": "Mongolian", "bs": "Bosnian", "kk": "Kazakh", "sq": "Albanian",
    "sw": "Swahili", "gl": "Galician", "mr": "Marathi", "pa": "Punjabi", "si": "Sinhala",
    "km": "Khmer", "sn": "Shona", "yo": "Yoruba", "so": "Somali", "af": "Afrikaans",
    "oc": "Occitan", "ka": "Georgian", "be": "Belarusian", "tg": "Tajik", "sd": "Sindhi",
    "gu": "Gujarati", "am": "Amharic", "yi": "Yiddish", "lo": "Lao", "uz": "Uzbek",
    "fo": "Faroese", "ht": "Haitian Creole", "ps": "Pashto", "tk": "Turkmen", "nn": "Nynorsk",
    "mt": "Maltese", "sa": "Sanskrit", "lb": "Luxembourgish", "my": "Myanmar", "bo": "Tibetan",
    "tl": "Tagalog", "mg": "Malagasy", "as": "Assamese", "tt": "Tatar", "haw": "Hawaiian",
    "ln": "Lingala", "ha": "Hausa", "ba": "Bashkir", "jw": "Javanese", "su": "Sundanese",
    "yue": "Cantonese",
}


def language_name(code: str) -> str:
    """"English" for "en"; "Auto-detect" for ""."""
    return LANGUAGES.get(code, code) if code else "Auto-detect"


def parse_languages(text: str) -> tuple[str, ...]:
    """The settings' ``languages`` ("en, fr") as codes in order; ValueError names a bad one."""
    codes: list[str] = []
    for part in text.replace(";", ",").split(","):
        code = part.strip().lower()
        if not code:
            continue
        if code not in LANGUAGES:
            raise ValueError(f"unknown language code {code!r} (Whisper's codes: en, de, fr, ...)")
        if code not in codes:
            codes.append(code)
    return tuple(codes)


def restrict(probabilities: Iterable[tuple[str, float]], allowed: Sequence[str]) -> str | None:
    """The most probable language among ``allowed`` (all when empty), or None when the
    detection gave none of them."""
    ranked = sorted(probabilities, key=lambda item: -item[1])
    for code, _probability in ranked:
        if not allowed or code in allowed:
            return code
    return None


def next_language(current: str, spoken: Sequence[str]) -> str:
    """The next language in the cycle auto-detect -> each spoken language -> auto-detect."""
    cycle = ["", *spoken]
    position = cycle.index(current) if current in cycle else 0
    return cycle[(position + 1) % len(cycle)]
