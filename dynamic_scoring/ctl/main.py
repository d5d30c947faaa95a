"""The ``dynamic-scoring`` click group; each subcommand lives in a module named after it."""

from __future__ import annotations

import click

from dynamic_scoring.ctl.explain import explain
from dynamic_scoring.ctl.output import Group
from dynamic_scoring.ctl.record import record
from dynamic_scoring.ctl.replay import replay
from dynamic_scoring.ctl.scorer import scorer
from dynamic_scoring.ctl.status import status
from dynamic_scoring.ctl.why import why


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dynamic-scoring")
def main() -> None:
    """Tools for people who write scorers and run placements with the dynamic-scoring addon.

    Exit codes: 0 ok, 1 findings (the thing checked is wrong), 2 bad arguments (a --kubeconfig that
    does not exist included), 3 could not ask: the hub, Prometheus or the scorer unreachable, or the
    default kubeconfig missing or unusable.  With -o json every error is one JSON document on stdout.
    """


# Subcommands register here, one line each (keep them in this order).
main.add_command(why)
main.add_command(explain)
main.add_command(record)
main.add_command(replay)
main.add_command(status)
main.add_command(scorer)
