"""Wire formats, pure: request bodies -> agent requests, agent events -> OpenAI objects. No I/O."""
