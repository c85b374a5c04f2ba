"""Trainer adapters: the gateway's sessions in the shapes RL trainers plug environments in.

- `envscaler_client.adapters.trl`: a class for TRL's ``GRPOTrainer(environment_factory=...)``
  (needs nothing beyond the base client; TRL itself is not imported).
- `envscaler_client.adapters.verl`: an agent loop and a tool for verl's ``ToolAgentLoop``
  (imports verl: install the client's ``verl`` extra where verl runs).

Both build their dataset rows with `envscaler_client.adapters.rows` and go through the same
session operations as the REST API (create, tool calls, reset, validate), so idempotency,
trajectories, deadlines and limits hold for them too.
"""
