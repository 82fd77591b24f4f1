"""`python analyses/exactk_ladder [options]` or `python -m analyses.exactk_ladder`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
__import__("analyses.exactk_ladder.run", fromlist=["main"]).main()
