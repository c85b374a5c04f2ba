"""The ``envscaler_verifiers`` taskset of verifiers (v1): EnvScaler scenarios, served by a gateway.

verifiers imports a taskset id as a top-level module and takes the `Taskset` its ``__all__``
exports, so this package ships beside `envscaler_client` in the client's distribution
(``pip install './clients[verifiers]'``)::

    import verifiers.v1 as vf
    env = vf.load_environment(vf.SingleAgentEnvConfig(taskset={"id": "envscaler_verifiers",
                                                   "env": "library_loans", "split": "rl"}))

See `envscaler_verifiers.taskset` for the tasks, their tools and their reward.
"""

from envscaler_verifiers.taskset import EnvScalerTaskset

__all__ = ["EnvScalerTaskset"]
