"""The wire contract: what the hub, the agent and every scorer must read and write alike.

``wire`` holds the documents themselves (the summary list the hub sends each agent, the scoring
request and response, a scorer's ``/config``); beside it, what those documents' validation needs and
nothing else: ``regex`` (label selectors with RE2 semantics), ``score_size`` (how much of an
AddOnPlacementScore the hub can store) and ``validation`` (a rejected document as text a user reads).
It knows nothing of Kubernetes, HTTP or processes: a scorer in any language can be checked against it.
"""
