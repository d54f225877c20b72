"""ASR backends behind one small interface (`engine.asr.base.Transcriber`)."""
