"""HTTP routes, one module per resource: health (and metrics), environments, sessions."""
