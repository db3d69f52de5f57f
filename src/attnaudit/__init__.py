"""attnaudit: is attention explanation? A reproducible audit pipeline.

Reruns Jain & Wallace (2019), Wiegreffe & Pinter (2019), Tutek & Snajder (2020) and
Bastings & Filippova (2020) on real corpora and on a user's own data.
"""

__version__ = "0.1.0"


class AttnauditError(Exception):
    """An error whose message is meant for the user: it names the file/key and what was expected."""
