"""The PostgreSQL side of the shared state (`storage.backend: postgres`, docs/SCALE-OUT.md).

SQLite stays the embedded default; these modules hold the second implementation of the same
services, one concept per file. Only this package imports psycopg (the `postgres` extra).
"""
