"""Audio in and out behind small interfaces: files in tests and `run`, sounddevice in the app."""
