"""Train the shipped admission classifier and write its weight file.

    pip install -e '.[train]'
    python training/train_detector.py          # writes pymem/admission/classifier_v1.bin

Reproducible: the data is rebuilt from pinned wheels, seeded generators and the interpreter's
own standard-library docstrings (see DATA_MANIFEST.md); the solver is deterministic. The
threshold stored with the model is calibrated on benign notes scored by models that did not see
their source (see learn.calibrate). `--check` retrains and fails if the result differs from the
file in the package.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import datasets  # noqa: E402
import learn  # noqa: E402

from pymem.admission.model import WEIGHTS_FILE, encode  # noqa: E402

OUT = HERE.parent / "pymem" / "admission" / WEIGHTS_FILE


def main() -> None:
    parser = argparse.ArgumentParser(description="Train the admission classifier.")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--check", action="store_true", help="fail if retraining does not reproduce the file at --out")
    args = parser.parse_args()

    rows = datasets.build_all()
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
    counts = Counter((r["source"], r["label"]) for r in rows)
    threshold, cal = learn.calibrate(rows)
    model = learn.fit(rows, threshold)
    import numpy
    import scipy
    import sklearn

    meta = {
        "data_sha256": digest,
        "examples": {s: {"payloads": counts[(s, 1)], "benign": counts[(s, 0)]} for s in datasets.SOURCES},
        "calibration": cal, "calibration_target": learn.CALIBRATION_TARGET, "C": learn.C, "seed": datasets.SEED,
        "python": ".".join(platform.python_version_tuple()[:2]), "scikit_learn": sklearn.__version__,
        "numpy": numpy.__version__, "scipy": scipy.__version__,
    }
    data = encode(name=learn.NAME, spec=learn.SPEC, bias=model.bias, weights=learn.sparse_weights(model),
                  signal_weights=model.signal_weights, threshold=round(threshold, 6), meta=meta)
    out = Path(args.out)
    if args.check:
        same = out.exists() and out.read_bytes() == data
        print("reproduced" if same else "DIFFERENT from " + str(out))
        raise SystemExit(0 if same else 1)
    out.write_bytes(data)
    print(f"wrote {out} ({len(data) / 1024:.0f} KiB), threshold {threshold:.4f}, data sha256 {digest[:12]}")


if __name__ == "__main__":
    main()
