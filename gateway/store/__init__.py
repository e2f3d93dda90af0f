"""State kept between requests: stored responses, conversations, idempotency entries."""
