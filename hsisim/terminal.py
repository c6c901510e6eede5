"""Output to terminals and pipes whose encoding cannot show hsisim's symbols (η, ≤, ×, σ, …).

Rich and ``print`` raise ``UnicodeEncodeError`` on an ASCII or Latin-1 stream. Instead of
failing, characters the stream cannot encode are written as readable ASCII ("eta", "<=").
"""

from __future__ import annotations

import codecs
import sys
import unicodedata

ASCII = {
    "η": "eta", "σ": "sigma", "μ": "mu", "α": "alpha", "β": "beta", "λ": "lambda", "τ": "tau", "δ": "delta",
    "≤": "<=", "≥": ">=", "≈": "~", "×": "x", "±": "+/-", "−": "-", "→": "->", "←": "<-", "…": "...",
    "–": "-", "—": "-", "“": '"', "”": '"', "‘": "'", "’": "'", "·": "*", "²": "^2", "³": "^3", "√": "sqrt",
    "⅓": "1/3", "°": " deg", "µ": "u", "━": "-", "│": "|", "─": "-", "┃": "|",
}
HANDLER = "hsisim-ascii"


def _replace(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    text = err.object[err.start:err.end]
    out = []
    for ch in text:
        plain = ASCII.get(ch)
        if plain is None:  # accents and the like: the letter without its mark, else '?'
            plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or "?"
        out.append(plain)
    return "".join(out), err.end


def tolerate_narrow_encodings() -> None:
    """Make stdout and stderr write unencodable characters as ASCII instead of raising."""
    try:
        codecs.lookup_error(HANDLER)
    except LookupError:
        codecs.register_error(HANDLER, _replace)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=HANDLER)
