"""Local (patch) oracles: the exact posterior mean when each output pixel sees only its patch.

Kamb & Ganguli (ICML 2025, "An analytic theory of creativity in convolutional diffusion models")
define the optimal denoiser under a locality constraint — output pixel p may depend on x only
through the p×p window P(p) centred on p — and, with translation equivariance added, the
"equivariant local score" (ELS) machine. Written here from those definitions (no code copied):

    D_p(x, σ) = Σ_c w_c(x) · t_c[centre],   w = softmax_c( -‖x_P(p) - t_c‖² / 2σ² )

over candidate patches t_c, each a (C·p·p) patch of a signed training image (C channels of each
window pixel), counted with multiplicity. Windows are cut from the image zero-padded in signed
space (0 is the midpoint of ±1), for x and the training images alike. The candidate set names
the variant:

- per position (`equivariant=False`; the paper's LS machine): the N training patches at the same
  position p — the exact posterior mean of v_p given x_P(p) under the empirical distribution of
  training patches at p. The padded slots hold 0 in x and in every candidate and drop out of the
  softmax: exactly a window truncated at the border.
- pooled over all positions (`equivariant=True, boundary="pooled"`, the default): the N·H·W
  zero-padded patches of every position. A candidate cut at another kind of position is compared
  on the same slots, padded ones included: an in-image training value against a padded 0 costs
  (±1 - 0)² = 1, a padded 0 against an in-image x value costs x², so border and interior patches
  mix with a SOFT penalty that vanishes as σ grows. This variant is scoreprobe's own; it is not
  one of the paper's machines.
- per position class (`equivariant=True, boundary="position_class"`; the paper's boundary-broken
  ELS, "bbELS", for zero-padded convolutional networks): a pixel's class is its (row class,
  column class), where a row i with r ≤ i < H - r (r = patch // 2) is interior and any other row
  is its own class (its exact distance to the border); columns alike. Candidates are the
  zero-padded training patches cut at the positions of the same class: interior pixels pool
  every fully-inside patch, edge pixels the patches at the same distance from the same edge
  (anywhere along it), corner pixels only the patches at the same position (as per position).
  Two windows have the same padding pattern exactly when their positions share a class, so this
  is the pooled variant with every candidate of another padding pattern excluded (a HARD
  boundary). For a patch with r ≥ H/2 and r ≥ W/2 no pixel is interior on either axis and it
  equals the per-position oracle. (The paper's plain ELS is for circularly padded networks:
  the input wrapped around, the candidates the fully-inside patches; not implemented here.)

The definitions are checked against the authors' code (github.com/Kambm/convolutional_diffusion,
utils/idealscore.py: LocalScoreModule, LocalEquivScoreModule, LocalEquivBordersScoreModule).

Multi-channel images (one-hot Sudoku / Latin squares) are handled: a window holds all C channels
of its pixels and the output is the C channels of the centre pixel, so a patch is a joint symbol
pattern. Candidate patches are deduplicated (log multiplicity added to the logit), so the
equivariant oracles cost O(B·H·W·U·C·p²) for U distinct patches.
"""
import math
import numbers

import torch

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.limits import MAX_GRID_BYTES
from scoreprobe.oracles.common import as_bits, check_inputs, undefined_at_nan_sigma

_ELEMENT_BUDGET = 1 << 24      # logits held at once (rows of x per chunk = budget / (H·W·U))


def _image_shape(dim, shape):
    """(C, H, W) from `shape` ((H, W) or (C, H, W)) or, when None, a square one-channel image."""
    if shape is None:
        side = math.isqrt(dim)
        if side * side != dim:
            raise ConfigError(f"images of {dim} bits are not square: pass shape=(C, H, W) "
                              "(a rule's image_shape)")
        return 1, side, side
    shape = tuple(int(s) for s in shape)
    if len(shape) == 2:
        shape = (1,) + shape
    if len(shape) != 3 or min(shape) < 1 or math.prod(shape) != dim:
        raise ConfigError(f"shape={shape} does not describe images of {dim} bits; pass (C, H, W) "
                          "with C·H·W equal to the number of bits")
    return shape


def patches(img, patch):
    """Zero-padded windows of every pixel. img: (B, C, H, W) -> (B, H·W, C·patch²), pixel-major
    (row-major over positions); the centre pixel's C channels sit at `centre_slots`."""
    r = patch // 2
    padded = torch.nn.functional.pad(img, (r, r, r, r))                          # (B, C, H+2r, W+2r)
    win = padded.unfold(2, patch, 1).unfold(3, patch, 1)                         # (B, C, H, W, p, p)
    b, c, h, w = img.shape
    return win.permute(0, 2, 3, 1, 4, 5).reshape(b, h * w, c * patch * patch)


def centre_slots(channels, patch):
    """Indices of the centre pixel's channels inside a flattened (C, p, p) window. -> list of C."""
    mid = (patch // 2) * patch + patch // 2
    return [ch * patch * patch + mid for ch in range(channels)]


def _check_size(patch, n, c, h, w, boundary):
    """Refuse, before any allocation, a patch that is not odd or wider than an image needs (2·max(H, W) − 1
    already covers the whole image from every pixel: more is zero padding only) or tables over
    MAX_GRID_BYTES (the candidates; per position class also an (H·W, U) table of which candidates apply)."""
    widest = 2 * max(h, w) - 1
    if isinstance(patch, bool) or not isinstance(patch, numbers.Integral) or patch < 1 or patch % 2 == 0 \
            or patch > widest:
        raise ConfigError(f"patch must be an odd integer from 1 to {widest} for a {h}×{w} image (a window centred "
                          f"on its pixel; {widest} already covers the whole image from every pixel), got patch={patch!r}")
    size = n * h * w * c * patch * patch * 8                                      # (N, HW, K) float64
    if boundary == "position_class":
        size += n * (h * w) ** 2 * 8                                              # (HW, U ≤ N·HW) float64
    if size > MAX_GRID_BYTES:
        raise ConfigError(f"patch={patch} over {n} training images needs {size / 2**30:.1f} GiB of candidate "
                          f"tables, over the {MAX_GRID_BYTES >> 30} GiB limit (scoreprobe.limits)")


def position_classes(h, w, patch):
    """Class id of every pixel, row-major (H·W,) int64: pixels share a class when their rows are both
    interior (r ≤ i < H − r, r = patch // 2) or equal, and likewise their columns (module docstring)."""
    r = patch // 2
    rows = torch.arange(h)
    cols = torch.arange(w)
    row_class = torch.where((rows >= r) & (rows < h - r), -1, rows) + 1          # (H,) 0: interior
    col_class = torch.where((cols >= r) & (cols < w - r), -1, cols) + 1          # (W,)
    return (row_class[:, None] * (w + 1) + col_class[None, :]).reshape(-1)     # (H·W,)


def _logits(fit, s2, bias):
    """Softmax logits of the candidates: fit/σ² + log multiplicity, fit = x_P·t − ‖t‖²/2 (b, HW, U), s2 (b, 1, 1).
    At σ = 0 the exact limit: only the best-fitting candidates (the nearest patches; ties kept) with weights
    ∝ their multiplicities."""
    with torch.no_grad():
        scaled = fit / torch.where(s2 > 0, s2, torch.ones_like(s2)) + bias
        fit = torch.where(torch.isfinite(bias), fit, torch.full_like(fit, -math.inf))   # padding slots never fit
        top = fit.amax(-1, keepdim=True)
        nearest = torch.where(fit >= top - 1e-9 * (1 + top.abs()), bias, torch.full_like(bias, -math.inf))
    return torch.where(s2 > 0, scaled, nearest)


class LocalDenoiser:
    """Exact local (patch) oracle; see the module docstring for the definitions and the boundary.

    Parameters
    ----------
    train : (N, D) uint8 bits, the training images (D = C·H·W, channel-major as everywhere).
    patch : odd int from 1 to 2·max(H, W) − 1, the window side (patch × patch pixels centred on the
        output pixel).
    equivariant : bool, pool the candidate patches over positions (an ELS machine); False: per position
        (the LS machine).
    boundary : "pooled" (default) | "position_class", which positions an equivariant oracle pools:
        all of them, the border met by a soft penalty (scoreprobe's variant), or those of the pixel's
        position class (Kamb & Ganguli's boundary-broken ELS). Only for equivariant=True.
    shape : (C, H, W) or (H, W), optional; default a square one-channel image.

    Attributes
    ----------
    dim : int, D.  image_shape : (C, H, W).  variant : "position" | "pooled" | "position_class".
    n_candidates : int array, distinct candidate patches per position ((H·W,); (1,) when pooled).
    """

    BOUNDARIES = ("pooled", "position_class")

    def __init__(self, train, patch=3, equivariant=False, shape=None, boundary="pooled"):
        bits = as_bits(train, "train")
        if boundary not in self.BOUNDARIES:
            raise ConfigError(f"boundary must be one of {', '.join(self.BOUNDARIES)}, got {boundary!r}")
        if boundary != "pooled" and not equivariant:
            raise ConfigError(f"boundary={boundary!r} chooses which positions an equivariant oracle pools; "
                              "pass equivariant=True (per position, equivariant=False, there is nothing to pool)")
        self.dim = bits.shape[1]
        self.image_shape = _image_shape(self.dim, shape)
        c, h, w = self.image_shape
        _check_size(patch, bits.shape[0], c, h, w, boundary if equivariant else None)
        self.patch, self.equivariant = int(patch), bool(equivariant)
        self.variant = boundary if self.equivariant else "position"
        signed = torch.from_numpy(bits).to(torch.float64).reshape(-1, c, h, w) * 2 - 1
        cand = patches(signed, self.patch)                                        # (N, HW, K)
        self._centre = centre_slots(c, self.patch)
        if self.variant == "position_class":
            self._cand, self._logm = self._by_class(cand, position_classes(h, w, self.patch))
        else:
            self._cand, self._logm = (self._pooled(cand) if self.equivariant else self._per_position(cand))
        self.n_candidates = torch.isfinite(self._logm).sum(-1).numpy()
        self._cache = {}

    @staticmethod
    def _pooled(cand):
        """Distinct patches over all positions and items: (1, U, K) and log multiplicities (1, U)."""
        uniq, counts = torch.unique(cand.reshape(-1, cand.shape[-1]), dim=0, return_counts=True)
        return uniq[None], counts.to(torch.float64).log()[None]

    @staticmethod
    def _by_class(cand, cls):
        """Distinct (class, patch) pairs pooled over items and positions: (1, U, K) patches and an (HW, U) log
        multiplicity, -inf where the candidate's class is not the position's. cls: (HW,) class ids."""
        n, q, k = cand.shape
        tagged = torch.cat([cls.to(cand.dtype).expand(n, q)[..., None], cand], -1).reshape(-1, k + 1)
        uniq, counts = torch.unique(tagged, dim=0, return_counts=True)           # (U, 1 + K), (U,)
        same = cls.to(cand.dtype)[:, None] == uniq[None, :, 0]                   # (HW, U)
        logm = torch.where(same, counts.to(cand.dtype).log()[None], -math.inf)
        return uniq[None, :, 1:].contiguous(), logm

    @staticmethod
    def _per_position(cand):
        """Distinct patches per position, padded to a common U with log multiplicity -inf.
        -> (HW, U, K), (HW, U)."""
        per = [torch.unique(cand[:, q], dim=0, return_counts=True) for q in range(cand.shape[1])]
        u = max(len(p[0]) for p in per)
        out = torch.zeros(cand.shape[1], u, cand.shape[2], dtype=cand.dtype)
        logm = torch.full((cand.shape[1], u), -math.inf, dtype=cand.dtype)
        for q, (uniq, counts) in enumerate(per):
            out[q, :len(uniq)] = uniq
            logm[q, :len(uniq)] = counts.to(cand.dtype).log()
        return out, logm

    def _tables(self, x):
        key = (x.device, x.dtype)
        if key not in self._cache:
            cand = self._cand.to(device=x.device, dtype=x.dtype)                  # (Q, U, K) Q = 1 or HW
            bias = self._logm.to(device=x.device, dtype=x.dtype)                  # (1 or HW, U)
            sq = 0.5 * (cand * cand).sum(-1)                                       # (Q, U) ‖t‖²/2
            self._cache[key] = (cand, bias, sq, cand[..., self._centre])          # centres (Q, U, C)
        return self._cache[key]

    @torch.no_grad()
    def __call__(self, x, sigma):
        """Posterior mean. x: (B, D) float, sigma: (B,) -> (B, D) same dtype/device."""
        sigma = check_inputs(x, sigma, self.dim)
        if bool((sigma < 0).any()):
            raise DataError("LocalDenoiser: sigma must be >= 0 (0: the exact limit, the nearest patches)")
        c, h, w = self.image_shape
        cand, bias, sq, centres = self._tables(x)
        rows = max(1, _ELEMENT_BUDGET // (h * w * cand.shape[1]))
        out = torch.empty_like(x)
        for start in range(0, x.shape[0], rows):
            xs, s2 = x[start:start + rows], sigma[start:start + rows, :, None] ** 2    # (b, D), (b, 1, 1)
            win = patches(xs.reshape(-1, c, h, w), self.patch)                    # (b, HW, K)
            if self.equivariant:
                dot = win @ cand[0].T                                              # (b, HW, U)
            else:
                dot = torch.einsum("bqk,quk->bqu", win, cand)                      # (b, HW, U)
            weights = torch.softmax(_logits(dot - sq, s2, bias), -1)             # (b, HW, U)
            if self.equivariant:
                mean = weights @ centres[0]                                        # (b, HW, C)
            else:
                mean = torch.einsum("bqu,quc->bqc", weights, centres)              # (b, HW, C)
            out[start:start + rows] = mean.permute(0, 2, 1).reshape(len(xs), -1)   # channel-major (b, D)
        return undefined_at_nan_sigma(out.clamp_(-1.0, 1.0), sigma)                 # NaN in x or σ stays NaN

    def __repr__(self):
        return f"LocalDenoiser(patch={self.patch}, {self.variant}, shape={self.image_shape})"
