"""Everyday helpers around the voice pipeline: local commands answered without the LLM
(time, date, timers, repeat, stop), timers, earcons, dictation, start at login. Qt-free."""
