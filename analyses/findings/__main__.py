"""`python analyses/findings [--from-results]` or `python -m analyses.findings`: writes docs/findings.md (run.py)."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
__import__("analyses.findings.run", fromlist=["main"]).main()
