"""The special tokens of every vocabulary (tokenise stage): padding, unknown word and the sentence markers."""

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)


def marker_ids(vocab: dict[str, int]) -> tuple[int, ...]:
    """Vocabulary ids of the sentence markers ``<s>``, ``</s>`` (those the vocabulary has)."""
    return tuple(vocab[m] for m in (BOS, EOS) if m in vocab)


def without_markers(tokens) -> list[str]:
    """``tokens`` without the ``<s>``/``</s>`` the tokeniser puts around them (a QA query as shown to a reader)."""
    tokens = [str(token) for token in tokens]
    start = 1 if tokens[:1] == [BOS] else 0
    end = len(tokens) - 1 if len(tokens) > start and tokens[-1] == EOS else len(tokens)
    return tokens[start:end]
