"""The output layer: result files (atomic Parquet, manifests), DataFrames from kernel outputs,
summaries, figures and the HTML report."""
