"""Models: catalog, cache scan, download, verify, delete, import, and resolving references."""
