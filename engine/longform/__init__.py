"""Long recordings: VAD chunking, batched decoding, hallucination retries, stitching.

`transcribe_long` turns a whole file's audio into one `Transcript` on the file's timeline; it is
what ``sottovoce transcribe`` and the app's "Open file..." use. See `engine.longform.pipeline`.
"""

from engine.longform.chunking import Chunk, ChunkingOptions
from engine.longform.pipeline import LongFormOptions, transcribe_long
from engine.longform.retry import RetryPolicy
from engine.longform.runners import choose_batch_size, long_form_backend
from engine.longform.workers import ProcessPoolRunner, WorkerSettings

__all__ = [
    "Chunk",
    "ChunkingOptions",
    "LongFormOptions",
    "ProcessPoolRunner",
    "RetryPolicy",
    "WorkerSettings",
    "choose_batch_size",
    "long_form_backend",
    "transcribe_long",
]
