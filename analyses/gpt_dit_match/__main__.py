"""`python analyses/gpt_dit_match [options]` or `python -m analyses.gpt_dit_match`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
__import__("analyses.gpt_dit_match.run", fromlist=["main"]).main()
