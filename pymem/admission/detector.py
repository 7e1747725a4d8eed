"""What the classifier adds beyond the visible words of a note: hidden text, misspellings, doubts.

The learned model and its structural signals (pymem.admission.classifier) score the words a
note shows. Attackers write what a reader does not see, or what a word list does not hold, so
once the model has not refused a note, `beyond_words`:

1. keeps a refusal by a decisive combination of structural signals only when the model's score
   backs it (at least the doubt band) or a chat-template token ("<|im_start|>") made it; otherwise
   the signal is a doubt ("a decisive signal without a signature");
2. decodes the text hidden in the note (pymem.admission.hidden: tag characters, variation
   selectors, base64, hex, binary, URL encoding, rot13, reversed text) and judges each decoded
   piece with the signatures and the model: an instruction there refuses as `hidden.<encoding>`
   (a decoded piece scoring in the doubt band is refused too: hiding text is itself a sign);
   prose hidden where prose has no business is a doubt under the same name;
3. reads a note in German, French, Spanish, Italian, Portuguese, Russian or Chinese through an
   English gloss of its instruction vocabulary (pymem.admission.glossary) and judges the gloss
   with the signatures and the model (refused under the deciding name; its score counts);
4. reads misspellings of the override vocabulary back (pymem.admission.spelling) and refuses
   under a signature's name when the corrected text matches it;
5. adds the named shapes (pymem.admission.shapes: a bare tool action, an instruction in a data
   field, a record or payment redirection) as doubts.

The doubts are ordered most telling first and carried by `Judgement.doubts`; the write gate holds
a doubtful note (and one whose score lies in its doubt band, just under the refusal threshold)
instead of admitting it. Refusals and doubts carry names, a score and the digest of the deciding
piece, never text.

The doubt band's lower edge is calibrated with the model on held-out benign notes and stored in
the weight file's header (`default_band`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .glossary import gloss
from .hidden import hidden_texts
from .model import Model, default_model
from .normalise import normalize
from .scanning import scan_text
from .shapes import SHAPE_NAMES, shapes
from .signals import ROLE, SIGNAL_NAMES, chat_template_token
from .spelling import corrected

__all__ = ["beyond_words", "default_band", "HIDDEN_PREFIX", "SHAPE_NAMES", "DECODED_PIECE", "DEFAULT_BAND_RATIO"]

#: Prefix of the names decided on decoded hidden text (`hidden.base64`, `hidden.tag_characters` ...).
HIDDEN_PREFIX = "hidden."
#: `Judgement.piece_index` of a verdict decided on a decoded piece or on the corrected text.
DECODED_PIECE = -1
#: The doubt band's lower edge as a share of the threshold, for a model that stores none.
DEFAULT_BAND_RATIO = 0.75


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def default_band(model: Model | None = None) -> float:
    """The lower edge of the doubt band calibrated with `model` (the shipped one by default):
    a note scoring in [band, threshold) is doubtful. Stored in the weight file's header (its
    calibration's `band`); a model without one uses DEFAULT_BAND_RATIO x its threshold."""
    model = model or default_model()
    calibration = model.meta.get("calibration")
    band = calibration.get("band") if isinstance(calibration, dict) else None
    return float(band) if band is not None else round(DEFAULT_BAND_RATIO * model.threshold, 6)


def beyond_words(judged: Any, parts: list[str], model: Model, limit: float, low: float,
                 judge: Callable[[list[str], Model, float], Any]) -> Any:
    """Steps 1-5 above, for a note the model did not refuse (or refused by signals alone).
    `judged` is the classifier's Judgement of the note and `judge` its judgement of a list of
    strings (the classifier passes its own: this module does not import it, which would be a
    cycle); the result is `judged` with the steps' decision."""
    best = judged.score
    doubts: list[str] = []
    whole = normalize("\n".join(parts))
    if judged.refused:  # a decisive combination of structural signals
        if judged.score >= low or (judged.name == ROLE and chat_template_token(whole)):
            return judged
        assert judged.name is not None
        doubts.append(judged.name)
        judged = replace(judged, refused=False, name=None)

    signals = set(judged.signals)
    for part in parts:
        for h in hidden_texts(part):
            name = HIDDEN_PREFIX + h.encoding
            text = normalize(h.text)
            if scan_text(h.text) is not None:
                return replace(judged, refused=True, name=name, piece_index=DECODED_PIECE, piece_digest=_digest(text),
                               doubts=())
            j = judge([h.text], model, limit)
            best = max(best, j.score)
            signals.update(j.signals)
            if j.refused or j.score >= low:
                return replace(judged, refused=True, name=name, score=best, piece_index=DECODED_PIECE,
                               piece_digest=j.piece_digest, signals=tuple(n for n in SIGNAL_NAMES if n in signals),
                               doubts=())
            # A URL's query decodes to words all the time; only a suspicious one is a doubt.
            if name not in doubts and (h.encoding != "url" or j.signals or j.score >= low / 2 or shapes(text)):
                doubts.append(name)

    glossed = gloss("\n".join(parts))
    if glossed is not None:
        signature = scan_text(glossed)
        if signature is not None:
            return replace(judged, refused=True, name=signature, score=best, piece_index=DECODED_PIECE,
                           piece_digest=_digest(glossed), doubts=())
        j = judge([glossed], model, limit)
        best = max(best, j.score)
        if (j.refused and j.score >= low) or j.score >= limit:
            return replace(judged, refused=True, name=j.name or model.name, score=best, piece_index=DECODED_PIECE,
                           piece_digest=j.piece_digest, doubts=())
    if whole:
        fixed = corrected(whole)
        if fixed is not None:
            signature = scan_text(fixed)
            if signature is not None:
                return replace(judged, refused=True, name=signature, score=best, piece_index=DECODED_PIECE,
                               piece_digest=_digest(fixed), doubts=())
        doubts.extend(shapes(whole))
        if glossed is not None:  # a redirection or a bare action written in another language
            doubts.extend(d for d in shapes(glossed) if d not in doubts)
    return replace(judged, score=best, doubts=tuple(doubts))

