"""The agent's Kubernetes side: summaries in, Secrets read, scores and health written out.

Each module implements one port of the scoring core (`dynamic_scoring.agent.ports`) or one duty the addon
contract gives the agent, against a real apiserver:

* `summaries`: watches the `dynamic-scoring-config` ConfigMap on the managed cluster;
* `secrets`: reads credential Secrets from the install namespace (the `SecretReader` port);
* `scores`: writes AddOnPlacementScores on the hub (the `ScorePublisher` port);
* `lease`: renews the health Lease OCM reads to mark the addon Available.
"""
