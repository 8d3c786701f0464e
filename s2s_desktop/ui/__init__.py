"""Qt widgets: tray icon, floating window, conversation window (and, from their own files,
the settings dialog and the model manager)."""
