"""The session-based next-item protocol (docs/sessions.md): preprocessing and time split, session
models, Recall@k / MRR@k, and the pipeline that chains them into one Outcome."""
