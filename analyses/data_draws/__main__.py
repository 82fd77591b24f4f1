"""`python analyses/data_draws [options]` or `python -m analyses.data_draws`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
__import__("analyses.data_draws.run", fromlist=["main"]).main()
