"""`python analyses/capacity_exponent [options]` or `python -m analyses.capacity_exponent`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
__import__("analyses.capacity_exponent.run", fromlist=["main"]).main()
