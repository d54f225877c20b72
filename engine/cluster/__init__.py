"""Bulk transcription on a Ray cluster (`sottovoce transcribe --cluster ...`; extra ``cluster``).

Only the fan-out is this package's own; every other step is the single machine's:

    driver (engine.cluster.driver)            Ray cluster
    ------------------------------            -----------------------------------------------
    list inputs, skip complete outputs  ──►   probe tasks (CPU): audio durations, for progress
    submit one file task per input      ──►   file task (CPU, engine.cluster.remote.transcribe_one):
      (at most 2 per decode actor                 engine.files.transcribe_file(path, RemoteRunner)
       in flight)                                 = decode + VAD chunk plan + waves + ladder +
                                                  stitch, exactly as `sottovoce transcribe`;
                                                  each wave's batches go to ──►  DecodeActor
                                                                                 (one model each,
                                                                                 num_gpus=1 on GPU)
    write <out>.<fmt> atomically as each  ◄──   rendered text (engine.wire.export)
    file completes; progress bar + JSON summary

A cluster run therefore gives the same text as a local run on the submitting machine: the
same wave layout (decode streams and batch size are fixed by the driver the way the local
runner would choose them), the same model layout in the actors (threads per replica), the same
judge, retries and stitcher. Parallelism comes from many files in flight, each keeping its
own waves; one long file uses ``streams`` actors at a time, as it uses streams locally.

Nothing outside this package imports Ray; `app.commands.transcribe` imports it only for
``--cluster`` (import-linter contracts in pyproject.toml, tests/test_cluster.py).
"""

from __future__ import annotations

from engine.cluster.inputs import ClusterInput, list_inputs, output_path

__all__ = ["ClusterInput", "list_inputs", "output_path"]
