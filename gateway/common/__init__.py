"""Helpers every layer may use, below all of them: the JSON codec (json_in, json_out) and the masking
of secrets in URLs (redact). They import nothing from the rest of the gateway."""
