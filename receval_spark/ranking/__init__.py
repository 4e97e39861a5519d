"""The ranking protocol (docs/evaluation.md): split, relevance, candidate models, top-k, and the
pipeline that chains them into one Outcome."""
