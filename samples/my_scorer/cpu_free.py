import os

from dynamic_scoring.scorer import BearerToken, ScorerApp, ScoreResult, ScoringRequest, result, serve

TOKEN_FILE = os.environ.get("TOKEN_FILE")  # deploy.yaml mounts the token Secret and names it here


def score(request: ScoringRequest) -> list[ScoreResult]:
    """100 when the cluster is idle, 0 when every core is busy, from the window's mean busy share."""
    series = list(request.with_points())  # series with at least one finite point
    if not series:
        return []  # no data: no score (the agent reports NoData), never a made-up 100
    busy = sum(max(s.mean(), 0) for s in series)  # the query divides by the cores: 0..1 per cluster
    return [result(100 * (1 - min(busy, 1)))]  # one result: one item per cluster


app = ScorerApp(
    score,
    name="cpu_free",
    description="free CPU of the cluster, in % of its cores: 100 idle, 0 fully busy",
    query='sum(rate(container_cpu_usage_seconds_total{container!=""}[1m])) / sum(machine_cpu_cores)',
    range=300,
    step=15,
    interval=30,
    token=BearerToken.from_file(TOKEN_FILE) if TOKEN_FILE else None,  # /scoring answers 401 without it
)

if __name__ == "__main__":
    serve(app, port=8000)  # every interface in a pod or container (the agents call it), loopback elsewhere
