from dynamic_scoring.scorer import ScorerApp, ScoreResult, ScoringRequest, result, serve

CAPACITY_CORES = 4.0


def score(request: ScoringRequest) -> list[ScoreResult]:
    """100 when the cluster is idle, 0 at CAPACITY_CORES busy, from the window's mean CPU use."""
    series = list(request.with_points())  # series with at least one finite point
    if not series:
        return []  # no data: no score (the agent reports NoData), never a made-up 100
    busy = sum(max(s.mean(), 0) for s in series)  # the query sums the cluster; add up any rest
    return [result(100 * (1 - min(busy / CAPACITY_CORES, 1)))]  # one result: one item per cluster


app = ScorerApp(
    score,
    name="cpu_free",
    description="free CPU of the cluster: 100 idle, 0 at 4 busy cores",
    query='sum(rate(container_cpu_usage_seconds_total{container!=""}[1m]))',
    range=300,
    step=15,
    interval=30,
)

if __name__ == "__main__":
    serve(app, port=8000)  # every interface in a pod or container (the agents call it), loopback elsewhere
