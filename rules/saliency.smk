# Bastings & Filippova (2020) saliency methods and faithfulness (stub until that stage lands).


def saliency_targets():
    return []
