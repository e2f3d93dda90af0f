"""The `agent-gateway` command: `main` parses global options, one module per command group."""
