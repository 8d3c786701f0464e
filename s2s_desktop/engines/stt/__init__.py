"""stt backends."""
