"""What every long-running process of ours needs, written once for the hub, the agent and the scorers.

The threaded HTTP server base the manager's health endpoint, the scorer library, the agent's OTLP
receiver and the CLI's local servers derive from (``threaded_server``), the one reader of a listen
address (``bind_address``), and backoff with jitter for every retry loop (``backoff``).
"""
