"""A hundred real subscribers on one publisher, on this machine: memory, drain time, the
publisher's GET /queues p99 and CPU, and each joiner's time from start to ready.

One ``scd publisher`` and ``--agents`` subscriber agents (default 100), each with its own Delta
store on local disk, in ``--daemons`` subscriber daemons, on the real Kafka broker and S3
server of deploy/services.sh. ``--packages`` requests go through the REST API at ``--rate``
per second (adds and deletes of a small tree, every ``--spill-every``-th one spilled to S3). A
third of the way through, ``--leave`` agents stop; halfway, ``--join`` agents start, half on
copies of running agents' stores, half from ``earliest``. By default both happen in the running
daemons (their agents files rewritten, SIGHUP); ``--new-daemons`` runs the leavers in a daemon
of their own that stops, and starts the joiners in a new daemon (a Spark start). The scenario
and its checks are tests/e2e/fleet.py's (tests/e2e/test_hundred.py runs it small): every store
equals the model, no offset imported twice, one distributed event per package.

    eval "$(bash deploy/services.sh env)"
    .venv/bin/python -m bench.subscriber_hundred                  # the full size, JSON on stdout
    .venv/bin/python -m bench.subscriber_hundred --packages 200   # smaller

Progress on stderr; exit status 1 if a check failed (the report lists the problems).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from tests import services
from tests.e2e.fleet import Size, log, run_scenario, start_fleet

START_TIMEOUT_S = 900.0
CONVERGE_TIMEOUT_S = 1800.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--daemons", type=int, default=3, help="daemons of the staying agents")
    parser.add_argument("--packages", type=int, default=1000)
    parser.add_argument("--leave", type=int, default=20)
    parser.add_argument("--join", type=int, default=20)
    parser.add_argument("--spill-every", type=int, default=50)
    parser.add_argument("--rate", type=float, default=10.0, help="requests per second")
    parser.add_argument("--driver-memory", default="1g", help="each daemon's Spark driver")
    parser.add_argument("--no-maintenance", action="store_true")
    parser.add_argument(
        "--new-daemons",
        action="store_true",
        help="the leavers run in a daemon of their own that stops, the joiners start in a new "
        "one (default: both by SIGHUP to the running daemons, their agents files rewritten)",
    )
    parser.add_argument(
        "--work", type=Path, default=None, help="keep stores and logs here (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    size = Size(
        agents=args.agents,
        daemons=args.daemons,
        packages=args.packages,
        leave=args.leave,
        join=args.join,
        spill_every=args.spill_every,
        rate=args.rate,
        driver_memory=args.driver_memory,
        maintenance=not args.no_maintenance,
        reload=not args.new_daemons,
    )
    kafka, s3 = services.native_services()
    # A stop (SIGTERM) unwinds like an error: the daemons started are stopped, not left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_at_start = os.getloadavg()[0]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scd-hundred-") as tmp:
        work = args.work or Path(tmp)
        log(f"starting the publisher and {size.agents} agents in {size.daemons + 1} daemons")
        fleet = start_fleet(kafka, s3, work, size, START_TIMEOUT_S)
        start_s = time.monotonic() - started
        log(f"all ready after {start_s:.1f} s; distributing {size.packages} packages")
        try:
            with services.local_spark() as spark:
                report = run_scenario(fleet, size, spark, CONVERGE_TIMEOUT_S)
        finally:
            fleet.close()
    report = {
        "benchmark": "subscriber_hundred",
        "size": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cpus": os.cpu_count(),
        "load_avg_1m_at_start": round(load_at_start, 2),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "first_start_to_all_ready_s": round(start_s, 1),
        **report,
        "wall_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report, indent=2))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
