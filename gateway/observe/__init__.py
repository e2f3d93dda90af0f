"""What the gateway tells its operator: the access log and its batched writer, JSON logs, Prometheus
metrics, OpenTelemetry traces, the agent's calls observed for both, and the bookkeeping run after a
reply. Below the front door (gateway/http/) and background runs (gateway/runs/); above the agent."""
