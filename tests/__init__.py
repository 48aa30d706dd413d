"""Engram's test suite (a package, so test folders such as tests/responses never shadow installed libraries
of the same name: moto imports the PyPI ``responses`` package)."""
