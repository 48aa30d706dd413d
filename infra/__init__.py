"""AWS deployment as code (never packaged into Lambda): see infra/README.md."""
