"""EnvScaler: synthesized tool-interactive environments for LLM agents, served from sandboxes."""
