"""The session-based next-item protocol (DESIGN §8): preprocessing and time split, session
models, Recall@k / MRR@k, and the pipeline that chains them into one Outcome."""
