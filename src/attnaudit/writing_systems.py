"""Scripts written without spaces between words (Chinese, Japanese, Thai, ...).

The tokeniser uses them to stop an English-tokenised corpus of such a script (a clause would be one token); the
heatmaps and the explorer use them to show tokens as the text writes them: two tokens are joined without a space
when the first ends and the second begins with a letter of such a script or with CJK punctuation ("很好。", not
"很 好 。"), ASCII punctuation beside such a letter included ("早餐,没有"), and spaced otherwise ("iphone 很好",
"the film ,"). The tokens themselves do not record the text's spaces, so a space the text had between two
such characters is not shown.
"""

from __future__ import annotations

import re
import unicodedata

#: Unicode blocks of the scripts written without spaces between words
UNSPACED_SCRIPTS = {
    "Han": ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F)),
    "Kana": ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9D)),
    "Thai": ((0x0E00, 0x0E7F),),
    "Lao": ((0x0E80, 0x0EFF),),
    "Tibetan": ((0x0F00, 0x0FFF),),
    "Myanmar": ((0x1000, 0x109F),),
    "Khmer": ((0x1780, 0x17FF),),
}
#: punctuation that such text writes without spaces: CJK symbols and punctuation (、。「」), full-width forms (，！)
UNSPACED_PUNCTUATION = ((0x3000, 0x303F), (0xFF00, 0xFFEF))


def _character_class(ranges) -> str:
    return "[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in ranges) + "]"


_UNSPACED = re.compile(
    _character_class([r for ranges in UNSPACED_SCRIPTS.values() for r in ranges] + list(UNSPACED_PUNCTUATION))
)


def script_pattern(script: str) -> str:
    """A regular-expression character class of the letters of ``script`` (a key of :data:`UNSPACED_SCRIPTS`)."""
    return _character_class(UNSPACED_SCRIPTS[script])


def _unspaced(character: str) -> bool:
    return _UNSPACED.fullmatch(character) is not None


def _punctuation(character: str) -> bool:
    return unicodedata.category(character).startswith("P")


def written_together(left: str, right: str) -> bool:
    """Whether token ``right`` follows token ``left`` without a space: they meet at two characters of unspaced
    scripts or CJK punctuation (很|好, 好|。), or at one and a punctuation mark (好|, ,|没有: Chinese text often
    has ASCII commas). Markers (``<s>``: ``<`` and ``>`` are symbols, not punctuation) stay spaced."""
    if not (left and right):
        return False
    a, b = left[-1], right[0]
    return (_unspaced(a) and (_unspaced(b) or _punctuation(b))) or (_unspaced(b) and _punctuation(a))


def spaces_before(tokens) -> list[str]:
    """What is shown before each of ``tokens``: nothing before the first and where :func:`written_together`, a space
    otherwise."""
    tokens = [str(t) for t in tokens]
    if "".join(tokens).isascii():  # no unspaced script: the explorer checks every test instance
        return [""] + [" "] * (len(tokens) - 1) if tokens else []
    return [""] + [" " if not written_together(a, b) else "" for a, b in zip(tokens, tokens[1:])]


def joined_indices(tokens) -> list[int]:
    """The positions ``j`` of ``tokens`` whose token follows token ``j - 1`` without a space (empty for English)."""
    return [j for j, space in enumerate(spaces_before(tokens)) if j and not space]


def join_tokens(tokens) -> str:
    """``tokens`` as text: spaces between them but where :func:`written_together`."""
    return "".join(space + str(t) for space, t in zip(spaces_before(tokens), tokens))
