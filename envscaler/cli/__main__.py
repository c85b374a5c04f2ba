"""`python -m envscaler.cli` is the `envscaler` command (used by the gateway image)."""

from envscaler.cli.main import app

app(prog_name="envscaler")
