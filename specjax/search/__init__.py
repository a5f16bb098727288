"""The search layer: pure JAX searches over the cost kernels (crossover batch, optimal draft
length, sensitivities by the implicit function theorem) and the sweep-reduction registry."""
