"""Trainer adapters: the gateway's sessions in the shapes RL trainers plug environments in.

- `envscaler_client.adapters.trl`: a class for TRL's ``GRPOTrainer(environment_factory=...)``
  (needs nothing beyond the base client; TRL itself is not imported).
- `envscaler_client.adapters.verl`: an agent loop and a tool for verl's ``ToolAgentLoop``
  (imports verl: install the client's ``verl`` extra where verl runs).
- `envscaler_client.adapters.gem`: GEM environments ``envscaler:{env}`` for ROLL (imports gem:
  the ``gem`` extra).
- `envscaler_client.adapters.nemo_gym`: NeMo Gym's dataset rows for the gateway's NeMo Gym door.

They build their dataset rows with `envscaler_client.adapters.rows`, keep a rollout's session in
`envscaler_client.adapters.slot`, and go through the same session operations as the REST API
(create, tool calls, reset, validate), so idempotency, trajectories, deadlines and limits hold
for them too. The verifiers taskset is the top-level package ``envscaler_verifiers``.
"""
