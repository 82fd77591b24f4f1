"""Inference over measurements: the verdict words (more of probes/' inference moves here, issue 57)."""
