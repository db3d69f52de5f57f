"""Tutek & Šnajder (2020), "Staying True to Your Word": the stage's subcommands (being built)."""


def add_cli(subparsers) -> None:
    subparsers.add_parser("tutek-snajder", aliases=["ts"], help="Tutek & Šnajder (2020) audits")
