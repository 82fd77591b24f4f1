"""The findings page: every claim of the paper read from the studies' shipped results (docs/findings.md)."""
