"""vad backends."""
