"""The input layer: config.json and hardware TOML readers, model and drafter builders (the drafter
registry), `Scenario` (one validated operating point), sweep specs and measurement CSVs."""
