"""Long recordings: VAD chunking, batched decoding, hallucination retries, stitching.

The steps of a file's transcription; `engine.files.transcribe_file` drives them (the one entry
point for files) and yields the stitched segments as they become final. See
`engine.longform.pipeline`.
"""

from engine.longform.chunking import Chunk, ChunkingOptions
from engine.longform.pipeline import ChunkJob, FileRun, LongFormOptions, plan_file
from engine.longform.retry import RetryPolicy
from engine.longform.runners import choose_batch_size
from engine.longform.stitch import ChunkResult, Stitcher
from engine.longform.workers import ProcessPoolRunner, WorkerSettings

__all__ = [
    "Chunk",
    "ChunkJob",
    "ChunkResult",
    "ChunkingOptions",
    "FileRun",
    "LongFormOptions",
    "ProcessPoolRunner",
    "RetryPolicy",
    "Stitcher",
    "WorkerSettings",
    "choose_batch_size",
    "plan_file",
]
