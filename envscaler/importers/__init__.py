"""Importers: other environment collections converted into our catalogue format (``envformat``).

``envscaler.importers.envscaler_release`` converts the published EnvScaler release (191 environments, 2,550
RL scenarios) into one folder per environment that ``envscaler.format.loader.load_env`` accepts.
"""
