"""`python analyses/decompose [options]` or `python -m analyses.decompose`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
sys.exit(__import__("analyses.decompose.run", fromlist=["main"]).main())
