"""How far `envscaler eval tau-bench` / `envscaler eval acebench` agree with the benchmarks' own
scorers, on a real checkout: ``cases`` writes answer files (the ground truth and perturbations of
it) with the project's own readers; ``tau_score.py`` and ``acebench_score.py`` score them with the
benchmark's code, each in a throwaway virtualenv of its own (they import the checkout: they are
never imported by the project and never run in its processes); ``compare`` counts agreements.
docs/importers/tau-bench.md and docs/importers/acebench.md give the commands."""
