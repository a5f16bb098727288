"""The model layer: kernel pytrees (`trees`), the input catalogue, statuses, the dtype policy and the
pure JAX cost kernels of one operating point (`roofline`, `acceptance`, `memory`, `speculative`).
Imports nothing outside this layer but `specjax.errors`: no files, tables, figures or command line."""
