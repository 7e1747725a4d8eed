"""Every training and evaluation example, grouped by the source it comes from.

Deterministic: every random choice comes from a generator seeded with SEED and the source's
name, and the external texts come from pinned wheels. An example is
    {"source", "label" (1 payload / 0 benign), "text", "kind", "core" (the payload alone, when it
     is hidden in a larger text; used as an extra training row), "id"}
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

from . import encoded, external, hosts, multilingual, own_data
from .goals import SPIKEE_AGENT_TYPES, goals

SEED = 20260512
ROOT = Path(__file__).resolve().parent.parent

SOURCES = ("spikee", "pyrit", "own-framings", "host-documents", "everyday-notes", "python-docs", "project-corpus",
           "multilingual", "encoded")

#: Standard-library modules whose docstrings give the benign "python-docs" source: plain English
#: prose, much of it imperative ("call this", "you should pass ..."), none of it to the agent.
DOC_MODULES = (
    "argparse", "asyncio", "base64", "bisect", "calendar", "collections", "configparser", "contextlib", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "email", "enum", "fractions", "ftplib", "functools", "gettext", "glob", "gzip", "hashlib",
    "heapq", "hmac", "html", "http.client", "imaplib", "inspect", "io", "ipaddress", "itertools", "json", "logging", "mailbox",
    "math", "mimetypes", "os", "pathlib", "pickle", "pprint", "queue", "random", "re", "sched", "secrets", "shelve", "shutil",
    "smtplib", "socket", "sqlite3", "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap", "threading",
    "time", "timeit", "unittest", "urllib.parse", "urllib.request", "uuid", "warnings", "weakref", "xml.etree.ElementTree",
    "zipfile", "zoneinfo",
)


def _rng(name: str) -> random.Random:
    return random.Random(f"{SEED}:{name}")


def _ex(source, label, text, kind, i, core=None, encoded=False) -> dict:
    ex = {"source": source, "label": label, "text": text, "kind": kind, "core": core, "id": f"{source}/{kind}/{i}"}
    if encoded:
        ex["encoded"] = True  # trained on its decoded core only: the model reads words, the decoders read encodings
    return ex


def spikee() -> list[dict]:
    rng = _rng("spikee")
    data = external.spikee()
    out = []
    templates = [j["text"] for j in data["jailbreaks"]]
    memory_goals = goals(0, rng, 4 * len(templates))
    for i, tpl in enumerate(templates):
        for k in range(4):
            goal = memory_goals[4 * i + k][1]
            out.append(_ex("spikee", 1, tpl.replace("<INSTRUCTION>", goal), "template+memory_goal", 4 * i + k, core=goal))
    agent = [ins["text"] for ins in data["instructions"] if ins["type"] in SPIKEE_AGENT_TYPES]
    for i, ins in enumerate(agent):
        out.append(_ex("spikee", 1, rng.choice(templates).replace("<INSTRUCTION>", ins.rstrip(".")), "template+instruction", i,
                       core=ins))
    for i, doc in enumerate(data["documents"]):
        out.append(_ex("spikee", 0, doc["text"].replace("<PLACEHOLDER>", ""), "document", i))
        for k in range(10):
            payload = rng.choice(templates).replace("<INSTRUCTION>", memory_goals[rng.randrange(len(memory_goals))][1])
            text = doc["text"].replace("<PLACEHOLDER>", payload) if "<PLACEHOLDER>" in doc["text"] else hosts.hide(doc["text"], payload, rng)
            out.append(_ex("spikee", 1, text, "document+payload", 10 * i + k, core=payload))
    for i, b in enumerate(data["benign"]):
        out.append(_ex("spikee", 0, b["text"], "fp_prompt", i))
    return out


def pyrit() -> list[dict]:
    rng = _rng("pyrit")
    templates = external.pyrit_templates()
    memory_goals = goals(1, rng, len(templates))
    return [_ex("pyrit", 1, t["text"].replace("{{ prompt }}", g), "template+memory_goal", i, core=g)
            for i, (t, (_, g)) in enumerate(zip(templates, memory_goals, strict=False))]


def own_framings() -> list[dict]:
    rng = _rng("own-framings")
    out = [_ex("own-framings", 1, a["text"], a["framing"], i, core=a["core"]) for i, a in enumerate(own_data.attack_notes(goals(2, rng, 360), rng))]
    out += [_ex("own-framings", 1, a["text"], a["framing"], 1000 + i, core=a["core"])
            for i, a in enumerate(own_data.generic_notes(goals(2, rng, 2 * len(own_data.GENERIC)), rng))]
    out += [_ex("own-framings", 0, b["text"], b["kind"], i) for i, b in enumerate(own_data.benign_notes(rng, 2 * len(own_data._BENIGN_TEMPLATES)))]
    out += [_ex("own-framings", 1, a["text"], "multilingual+" + a["lang"], i, core=a["core"])
            for i, a in enumerate(multilingual.payloads(1, rng, 12))]
    return out


def host_documents() -> list[dict]:
    rng = _rng("host-documents")
    out = []
    hidden_goals = goals(3, rng, 45 * len(hosts.KINDS))
    n = 0
    for kind in sorted(hosts.KINDS):
        for _k in range(45):
            seed = SEED + 1000 * n
            out.append(_ex("host-documents", 0, hosts.document(kind, seed), kind, n))
            payload = rng.choice(hosts.HIDDEN).format(goal=hidden_goals[n][1])
            poisoned = hosts.hide(hosts.document(kind, seed + 1), payload, rng)
            out.append(_ex("host-documents", 1, poisoned, kind + "+payload", n, core=payload))
            n += 1
    return out


def everyday_notes() -> list[dict]:
    """Short memory notes of the everyday kind: preferences, facts, plans, contacts (Faker)."""
    from faker import Faker

    from .hosts import _END, _MONTHS, _START, _WEEKDAYS

    f = Faker("en_US")
    f.seed_instance(SEED)
    rng = _rng("everyday-notes")
    shapes = [
        lambda: f"{f.first_name()}'s birthday is on {f.random_element(_MONTHS)} {f.random_int(1, 28)}.",
        lambda: f"Prefers {rng.choice(['window', 'aisle'])} seats and {rng.choice(['vegetarian', 'gluten-free', 'no'])} meals on long flights.",
        lambda: f"Flight to {f.city()} on {f.date_between_dates(_START, _END)} departs at {f.random_int(5, 22):02d}:{f.random_element(['00', '15', '30', '45'])}; booking reference {f.bothify('??#?#?').upper()}.",
        lambda: f"The dentist appointment moved to {f.random_element(_WEEKDAYS)} at {rng.randint(8, 17)}:00.",
        lambda: f"{f.name()} is the new {f.job().lower()} at {f.company()}; reach her at {f.company_email()}.",
        lambda: "Wi-Fi password for the cabin is on the fridge; the router is in the hallway closet.",
        lambda: f"Likes {rng.choice(['jazz', 'podcasts about history', 'sci-fi novels', 'trail running', 'chess'])} and dislikes {rng.choice(['early meetings', 'cilantro', 'long emails', 'crowded trains'])}.",
        lambda: f"The car is due for service at {rng.randint(10, 90)},000 km; the garage is on {f.street_name()}.",
        lambda: f"Kid's school pickup is at {rng.randint(2, 4)}:{rng.choice(['00', '15', '30'])} on weekdays.",
        lambda: f"Budget for the kitchen renovation is {rng.randint(5, 40)},000 dollars; contractor is {f.company()}.",
        lambda: f"Shopping list: {', '.join(f.words(rng.randint(3, 6)))}.",
        lambda: f"Meeting with {f.name()} about {f.bs()} went well; follow up next {f.random_element(_WEEKDAYS)}.",
        lambda: "Always books hotels near the train station when travelling for work.",
        lambda: f"Allergic to {rng.choice(['penicillin', 'shellfish', 'pollen', 'cats'])}.",
        lambda: f"The user works remotely from {f.city()} and is in the {rng.choice(['CET', 'EST', 'PST', 'IST'])} time zone.",
        lambda: f"Project {f.word().capitalize()} deadline is {f.date_between_dates(_START, _END)}; {f.first_name()} owns the design review.",
        lambda: f"Send the monthly report to {f.first_name()} in finance every first Monday.",
        lambda: f"Favourite restaurant: {f.last_name()}'s on {f.street_name()}; ask for the corner table.",
        lambda: f"The gym membership renews on {f.date_between_dates(_START, _END)} and costs {rng.randint(20, 90)} dollars a month.",
        lambda: f"{f.first_name()} forwarded the lease agreement; the deposit is {rng.randint(1, 4)} months of rent.",
        lambda: f"Remember that {f.first_name()} prefers to be called {f.first_name()} at work from now on.",
        lambda: f"Please keep in mind for all future trips that I get motion sick on {rng.choice(['boats', 'buses', 'small planes'])}.",
        lambda: f"From now on my standup moves to {rng.randint(9, 11)}:{rng.choice(['00', '30'])}; please remember that.",
        lambda: f"Save for later: the spare key is with {f.name()} at {f.street_address()}.",
        lambda: f"Note permanently: I don't eat {rng.choice(['pork', 'beef', 'dairy', 'eggs'])}.",
        lambda: f"IT warned that a fake invoice from {f.company()} asked staff to send passwords to an outside site; nobody replied.",
        lambda: f"{f.first_name()} reported a phishing text asking for her bank PIN; she deleted it.",
        lambda: "The helpdesk says they will never ask for your password by email.",
        lambda: f"Instructions for the babysitter: bedtime at {rng.randint(7, 9)}pm, no screens after dinner.",
        lambda: f"System update on the laptop is scheduled for {f.random_element(_WEEKDAYS)} night; save your work first.",
        # memory stores often phrase facts in the third person
        lambda: f"The user's {rng.choice(['sister', 'landlord', 'manager', 'dentist', 'accountant', 'neighbour'])} is {f.name()}; "
                f"{rng.choice(['she', 'he', 'they'])} lives in {f.city()}.",
        lambda: f"The user's {rng.choice(['passport', 'driving licence', 'car insurance', 'gym membership', 'lease'])} "
                f"{rng.choice(['expires', 'renews', 'ends'])} in {f.random_element(_MONTHS)} {rng.randint(2026, 2030)}.",
        lambda: f"The user's company moved from {rng.choice(['Slack', 'Zoom', 'Jira', 'Dropbox'])} to "
                f"{rng.choice(['Teams', 'Meet', 'Linear', 'Google Drive'])} in {f.random_element(_MONTHS)}.",
        lambda: f"The user's bank sends statements by {rng.choice(['post', 'email', 'the app'])}; they check them monthly.",
        lambda: f"The user's phone is a {rng.choice(['Pixel 8', 'iPhone 15', 'Galaxy S23', 'Fairphone 5'])} and their laptop runs "
                f"{rng.choice(['macOS', 'Windows 11', 'Ubuntu'])}.",
        lambda: f"The user asked for all invoices to be filed under {f.company()} in the accounting app.",
        lambda: f"The user prefers {rng.choice(['email', 'phone calls', 'text messages'])} over "
                f"{rng.choice(['video calls', 'letters', 'chat'])} for anything about {rng.choice(['billing', 'school', 'work travel'])}.",
        lambda: f"The user's accountant needs receipts for business expenses by {f.random_element(_MONTHS)} {rng.randint(1, 28)}.",
        lambda: f"The user read that you should {rng.choice(['water succulents once a week', 'stretch before running', 'back up photos twice'])}.",
        lambda: f"The user's contact at {f.company()} is {f.name()} ({f.company_email()}).",
        lambda: f"The user's {rng.choice(['son', 'daughter'])} {f.first_name()} starts school on {f.random_element(_MONTHS)} {rng.randint(1, 28)}.",
        lambda: f"The user always pays the {rng.choice(['rent', 'electricity bill', 'nursery fees'])} on the {rng.randint(1, 28)}th by bank transfer.",
        # notification e-mails the user keeps (they tell the reader to ignore them if unexpected)
        lambda: f"From: no-reply@{f.domain_name()}\nSubject: Reset your password\n\nHi {f.first_name()}, someone asked to reset the "
                f"password of your account. Use this link within 30 minutes: https://{f.domain_name()}/reset/{f.uuid4()[:8]}. "
                "If it wasn't you, ignore this email; your password stays the same.",
        lambda: f"Sign-in alert from {f.company()}: a new login from {rng.choice(['Chrome on Windows', 'Safari on iPhone', 'Firefox on Linux'])} "
                f"near {f.city()}. If this was you, you can ignore this message. If not, change your password now.",
        lambda: f"Your {f.company()} verification code is {rng.randint(100000, 999999)}. Don't share it with anyone. If you didn't "
                "request it, ignore this text.",
    ]
    out = [_ex("everyday-notes", 0, rng.choice(shapes)(), "note", i) for i in range(400)]
    out += [_ex("everyday-notes", 0, b["text"], "note+" + b["lang"], i) for i, b in enumerate(multilingual.benign(1, rng, 15))]
    return out


def python_docs() -> list[dict]:
    """Paragraphs of the running interpreter's standard-library docstrings (CPython 3.11 for the
    shipped model; another minor version gives slightly different text)."""
    import importlib
    import inspect
    import re

    paras: list[str] = []
    for name in DOC_MODULES:
        mod = importlib.import_module(name)
        # Submodules are skipped: which of them appear as attributes depends on what else
        # has been imported, and the data must not.
        objs = [mod] + [getattr(mod, n) for n in sorted(dir(mod)) if not n.startswith("_")]
        for o in objs:
            if inspect.ismodule(o) and o is not mod:
                continue
            if not (inspect.ismodule(o) or inspect.isclass(o) or inspect.isfunction(o) or inspect.isbuiltin(o)):
                continue
            doc = inspect.getdoc(o)
            for p in re.split(r"\n\s*\n", doc or ""):
                p = " ".join(p.split())
                if 80 <= len(p) <= 1200 and not p.startswith(">>>") and sum(c.isalpha() for c in p) > 0.6 * len(p):
                    paras.append(p)
    seen: set[str] = set()
    unique = [p for p in paras if not (p in seen or seen.add(p))]
    return [_ex("python-docs", 0, p, "docstring", i) for i, p in enumerate(unique)]


def project_corpus() -> list[dict]:
    # The project's own corpus is data kept beside the tests that replay it; it is read from its
    # file (no import path changed), so training does not depend on the test helpers' package.
    spec = importlib.util.spec_from_file_location("_pymem_poisoning_corpus", ROOT / "tests" / "helpers" / "poisoning_corpus.py")
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    BENIGN, PAYLOADS = corpus.BENIGN, corpus.PAYLOADS
    out = [_ex("project-corpus", 1, t, c, i) for i, (c, t) in enumerate(PAYLOADS)]
    out += [_ex("project-corpus", 0, t, c, i) for i, (c, t) in enumerate(BENIGN)]
    return out


def multilingual_notes() -> list[dict]:
    """Payloads and benign notes in seven languages (multilingual.py, pool 0)."""
    rng = _rng("multilingual")
    out = [_ex("multilingual", 1, a["text"], "payload+" + a["lang"], i, core=a["core"])
           for i, a in enumerate(multilingual.payloads(0, rng, 20))]
    out += [_ex("multilingual", 0, b["text"], "note+" + b["lang"], i) for i, b in enumerate(multilingual.benign(0, rng, 30))]
    return out


def encoded_notes() -> list[dict]:
    """Payloads hidden in encodings (goals of pool 0) and benign notes carrying encoded data (encoded.py)."""
    rng = _rng("encoded")
    out = [_ex("encoded", 1, a["text"], a["encoding"], i, core=a["core"], encoded=True)
           for i, a in enumerate(encoded.payloads(goals(0, rng, 180), rng))]
    out += [_ex("encoded", 0, b["text"], b["kind"], i) for i, b in enumerate(encoded.benign(rng, 180))]
    return out


BUILDERS = {"spikee": spikee, "pyrit": pyrit, "own-framings": own_framings,
            "host-documents": host_documents, "everyday-notes": everyday_notes, "python-docs": python_docs, "project-corpus": project_corpus,
            "multilingual": multilingual_notes, "encoded": encoded_notes}


def build_all() -> list[dict]:
    out = []
    for name in SOURCES:
        out.extend(BUILDERS[name]())
    return out


if __name__ == "__main__":
    from collections import Counter

    rows = build_all()
    c = Counter((r["source"], r["label"]) for r in rows)
    for s in SOURCES:
        print(f"{s:22s} payloads {c[(s, 1)]:5d}  benign {c[(s, 0)]:5d}")
