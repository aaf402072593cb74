"""Long-term memory: a stream of observation / conversation / reflection nodes per user, on
SQLite + sqlite-vec (through apsw), with local embeddings and recency+relevance+importance
retrieval. `service.MemoryService` is the one API the conversation, the CLI and MCP use."""
