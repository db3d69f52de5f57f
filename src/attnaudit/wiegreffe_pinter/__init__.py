"""Wiegreffe & Pinter (2019), "Attention is not not Explanation": the stage's subcommands (being built)."""


def add_cli(subparsers) -> None:
    subparsers.add_parser("wiegreffe-pinter", aliases=["wp"], help="Wiegreffe & Pinter (2019) audits")
