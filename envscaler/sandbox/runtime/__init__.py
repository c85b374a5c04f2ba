"""In-sandbox runtime: loads one environment, executes tool calls, runs checks. Standard library
only."""
