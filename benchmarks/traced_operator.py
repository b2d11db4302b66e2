"""The operator under tracemalloc: on SIGUSR2 (sent once it has taken up every object) the
largest allocation sites by file and by line go to a file. Used by
``operator_memory.py --trace``.

    python benchmarks/traced_operator.py OUT.txt [operator flags...]
"""

from __future__ import annotations

import signal
import sys
import threading
import tracemalloc
from pathlib import Path


def report(out: Path) -> None:
    snapshot = tracemalloc.take_snapshot()
    current, peak = tracemalloc.get_traced_memory()
    lines = [f"traced now {current / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB", ""]
    for key in ("filename", "lineno"):
        lines.append(f"# top by {key}")
        for stat in snapshot.statistics(key)[:40]:
            lines.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d} blocks  {stat.traceback}")
        lines.append("")
    out.write_text("\n".join(lines))


def main() -> None:
    out = Path(sys.argv[1])
    sys.argv = [sys.argv[0], *sys.argv[2:]]
    tracemalloc.start(1)
    # the report is written by a thread: the snapshot must not run inside a signal handler
    # that interrupted an allocation
    signal.signal(
        signal.SIGUSR2,
        lambda *_: threading.Thread(target=report, args=(out,), daemon=True).start(),
    )
    from coworkgym_operator.__main__ import main as operator_main

    operator_main()


if __name__ == "__main__":
    main()
