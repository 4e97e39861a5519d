"""The ranking protocol (DESIGN §§2-7): split, relevance, candidate models, top-k, and the
pipeline that chains them into one Outcome."""
