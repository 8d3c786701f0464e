"""llm backends."""
