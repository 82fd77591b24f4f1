"""`python analyses/sudoku_transpose [options]` or `python -m analyses.sudoku_transpose`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
__import__("analyses.sudoku_transpose.run", fromlist=["main"]).main()
