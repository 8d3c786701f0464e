"""s2s-desktop: a private, local push-to-talk voice assistant."""

__version__ = "0.1.0"
