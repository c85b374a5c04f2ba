"""The gates generated code must pass: static (in-process, AST only), executable and scenario (in a
sandbox). Each returns a ``GateResult`` with every problem found."""

from envscaler.synth.gates.executable import executable_gate
from envscaler.synth.gates.report import GateResult, Problem
from envscaler.synth.gates.scenario import ScenarioSpec, scenario_gate
from envscaler.synth.gates.static import check_function_problems, static_gate

__all__ = ["GateResult", "Problem", "ScenarioSpec", "check_function_problems", "executable_gate",
           "scenario_gate", "static_gate"]
