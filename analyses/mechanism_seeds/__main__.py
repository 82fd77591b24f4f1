"""`python analyses/mechanism_seeds [options]` or `python -m analyses.mechanism_seeds`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
__import__("analyses.mechanism_seeds.run", fromlist=["main"]).main()
