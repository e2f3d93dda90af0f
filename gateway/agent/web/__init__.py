"""The agent's web tools: `web_search` and `web_extract` over the providers, with their fallback chain,
cool-downs, result cache and per-request options."""
