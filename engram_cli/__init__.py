"""The ``engram`` command line: ingest, search, stores, stats, delete, demo."""
