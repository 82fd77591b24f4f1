"""`python analyses/oracle_samples [--from-results]` or `python -m analyses.oracle_samples`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
sys.exit(__import__("analyses.oracle_samples.run", fromlist=["main"]).main())
