"""Chat model backends against the scripted fake model server."""
