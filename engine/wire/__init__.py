"""Sans-I/O wire protocols and file formats: the WebSocket protocols (ours and WhisperLive's) as
codecs and session state machines, and the transcript/caption exports. Pure like engine.core (no
threads, sockets, clocks); they may use engine.core, never the other way round."""
