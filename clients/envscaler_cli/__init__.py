"""The `envscaler` command line."""
