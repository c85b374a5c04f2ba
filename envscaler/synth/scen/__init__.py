"""ScenGenerator: per environment, initial states, tasks, checklists, checks and reference solutions."""
