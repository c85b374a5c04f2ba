"""`python -m cli` is the `envscaler` command (used by the gateway image)."""

from cli.main import app

app(prog_name="envscaler")
