"""Sottovoce engine: audio, VAD, ASR backends, streaming policy, protocol, server, export.

Never imports Qt (enforced by tests/test_layering.py).
"""

__version__ = "0.1.0"
