"""`python -m envscaler_cli` is the `envscaler` command (used by the gateway image)."""

from envscaler_cli.main import app

app(prog_name="envscaler")
