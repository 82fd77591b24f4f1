"""`python analyses/sampler_scaling [options]` or `python -m analyses.sampler_scaling`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
__import__("analyses.sampler_scaling.run", fromlist=["main"]).main()
