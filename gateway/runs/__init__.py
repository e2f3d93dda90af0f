"""Background runs (`background: true`): the runs this process holds and their events, the keeper
of their leases and expiries, followers on any replica, the queue's claims, and the deadlines of
whole runs. Above the store and the agent; below the front door (gateway/http/), which starts and
streams them (gateway/http/routes/responses_*.py)."""
