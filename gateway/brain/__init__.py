"""The LLM brain: reply pipeline stages, OpenAI-compatible providers with fallback, local-first routing."""
