"""The turn pipeline: QThread stages chained by queues (QtCore only, runs headless)."""
