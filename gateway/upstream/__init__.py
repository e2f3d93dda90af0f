"""The upstream model client: any OpenAI-compatible `/v1` endpoint."""
