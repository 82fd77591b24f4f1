"""`python analyses/atp_agreement [--from-results]` or `python -m analyses.atp_agreement`: see run.py."""
import pathlib, sys  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))   # the repository root: analyses is a package
sys.exit(__import__("analyses.atp_agreement.run", fromlist=["main"]).main())
