"""The human report: HTML and Markdown rendered from the Parquet report datasets."""
