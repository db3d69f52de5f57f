from attnaudit.cli import run

run()
