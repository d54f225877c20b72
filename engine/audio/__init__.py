"""Audio in: file decoding (PyAV via faster-whisper), microphone capture, resampling."""
