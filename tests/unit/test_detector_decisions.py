"""The detector decides exactly what it decided when tests/data/detector_decisions.txt was written.

Every text of tests/helpers/detector_corpora.py (the project's corpora, 8 to 64 KiB notes, hostile
periodic text, and the classifier's training corpora when Faker is installed) is judged again and
compared, decision by decision, with the pinned file. Run as a script with --write to pin the
decisions of the code as it is (only when a change is meant to change what the detector decides).
"""

from __future__ import annotations

import sys

import pytest

if __name__ == "__main__":  # run as a script: the suite's pythonpath
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.detector_corpora import DECISIONS, SOURCES, decision, digest, training_corpora


def _pinned() -> dict[str, dict[str, str]]:
    """{source: {digest: decision}} from the file: a "# source" line, then "digest decision" lines."""
    pinned: dict[str, dict[str, str]] = {}
    source = None
    with DECISIONS.open(encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# "):
                source = line[2:]
                continue
            key, _, decided = line.partition(" ")
            pinned.setdefault(source, {})[key] = decided
    return pinned


def _check(source: str, texts, pinned: dict[str, str]) -> None:
    seen: set[str] = set()
    changed = []
    for text in texts:
        key = digest(text)
        if key in seen:
            continue
        seen.add(key)
        assert key in pinned, f"{source}: a text that was not pinned (digest {key}); regenerate the file on purpose"
        now = decision(text)
        if now != pinned[key]:
            changed.append(f"{key}: pinned {pinned[key]!r}, now {now!r}")
    assert len(seen) == len(pinned), f"{source}: {len(pinned)} texts pinned, {len(seen)} judged"
    assert not changed, f"{len(changed)} of {len(seen)} {source} decisions changed:\n" + "\n".join(changed[:10])


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_decisions_are_unchanged(source):
    _check(source, SOURCES[source](), _pinned()[source])


@pytest.mark.slow
def test_decisions_on_the_training_corpora_are_unchanged():
    texts = training_corpora()
    if texts is None:
        pytest.skip("the training corpora need Faker (pip install -e '.[train]')")
    pinned = _pinned().get("training")
    if pinned is None:
        pytest.skip("the training corpora were not pinned")
    if sys.version_info[:2] != (3, 11):
        # The docstring source is the running interpreter's standard library.
        pytest.skip("the training corpora were pinned on CPython 3.11 (their docstring source differs here)")
    _check("training", texts, pinned)


def _write() -> None:
    """Pin the decisions of the code as it is now."""
    DECISIONS.parent.mkdir(parents=True, exist_ok=True)
    sources = {name: build() for name, build in sorted(SOURCES.items())}
    training = training_corpora()
    if training is not None:
        sources["training"] = training
    count = 0
    with DECISIONS.open("w", encoding="utf-8") as f:
        for name, texts in sources.items():
            f.write(f"# {name}\n")
            seen = set()
            for text in texts:
                key = digest(text)
                if key not in seen:
                    seen.add(key)
                    f.write(f"{key} {decision(text)}\n")
            count += len(seen)
    print(f"pinned {count} decisions in {DECISIONS}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/unit/test_detector_decisions.py --write")
    _write()
