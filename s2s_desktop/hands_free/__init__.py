"""Hands-free conversation: the listener (echo-cancelled microphone, VAD, end of turn by
model, voice barge-in), its session on the real devices, and the adapter to the pipeline."""
