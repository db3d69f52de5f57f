"""The special tokens of every vocabulary (tokenise stage): padding, unknown word and the sentence markers."""

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)
