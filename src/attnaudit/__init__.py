"""attnaudit: is attention explanation? A reproducible audit pipeline.

Reruns Jain & Wallace (2019), Wiegreffe & Pinter (2019), Tutek & Snajder (2020) and
Bastings & Filippova (2020) on real corpora and on a user's own data.
"""

__version__ = "0.1.0"


class AttnauditError(Exception):
    """An error whose message is meant for the user: it names the file/key and what was expected."""


class ConfigKeyError(AttnauditError):
    """What is wrong with one config key (``key``: its keys and list positions), said ``config <key>: <problem>``;
    the workflow adds the file and line the key is written at (``config_errors.ConfigSources.locate``)."""

    def __init__(self, key: tuple, problem: str):
        self.key, self.problem = tuple(key), problem
        super().__init__(f"config {key_path(self.key)}: {problem}")


def key_path(path, root: str = "") -> str:
    """``('datasets', 'sst', 'train', 'lr')`` → ``datasets.sst.train.lr`` (list positions as ``[i]``)."""
    key = root
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else f"{'.' if key else ''}{part}"
    return key
