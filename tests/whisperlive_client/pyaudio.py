"""Stand-in for PyAudio, which WhisperLive's client imports at module level for microphones and
playback. The tests stream files with ``mute_audio_playback=True``, so nothing here is played;
opening a device fails as it does on a machine without a sound card (the client warns and goes
on). Only the names the client touches exist. PyAudio itself needs PortAudio's C library."""

paInt16 = 8


class PyAudio:
    def open(self, *args: object, **kwargs: object) -> None:
        raise OSError("no audio device (test stand-in for PyAudio)")

    def get_format_from_width(self, width: int) -> int:
        return paInt16

    def terminate(self) -> None:
        pass
