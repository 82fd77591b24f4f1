"""Local (patch) oracles: the exact posterior mean when each output pixel sees only its patch.

Kamb & Ganguli (ICML 2025, "An analytic theory of creativity in convolutional diffusion models")
define the optimal denoiser under a locality constraint — output pixel p may depend on x only
through the p×p window P(p) centred on p — and, with translation equivariance added, the
"equivariant local score" (ELS) machine. Written here from those definitions (no code copied):

    D_p(x, σ) = Σ_c w_c(x) · t_c[centre],   w = softmax_c( -‖x_P(p) - t_c‖² / 2σ² )

over candidate patches t_c, each a (C·p·p) patch of a signed training image (C channels of each
window pixel), counted with multiplicity:

- non-equivariant (`equivariant=False`): the N training patches at the same position p — the
  exact posterior mean of v_p given x_P(p) when v_P(p) is drawn from the empirical distribution of
  training patches at p;
- equivariant (`equivariant=True`): the N·H·W training patches of every position pooled — the
  posterior under the position-independent empirical patch distribution (the ELS machine).

Boundary: the image is zero-padded in signed space (0 is the midpoint of ±1) before the windows
are cut, for x and for the training images alike. Non-equivariant, the padded slots hold 0 in x
and in every candidate, so they drop out of the softmax: exactly a window truncated at the border.
Equivariant, a candidate cut at another position is compared on the same slots, padded ones
included: an in-image training value against a padded 0 costs (±1 - 0)² = 1, so a border pixel
prefers patches cut at the same kind of border (a convolution with zero padding sees the border
the same way). This is the choice of the published ELS machine for zero-padded networks.

Multi-channel images (one-hot Sudoku / Latin squares) are handled: a window holds all C channels
of its pixels and the output is the C channels of the centre pixel, so a patch is a joint symbol
pattern. Candidate patches are deduplicated (log multiplicity added to the logit), so the
equivariant oracle costs O(B·H·W·U·C·p²) for U distinct patches.
"""
import math
import numbers

import torch

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.limits import MAX_GRID_BYTES
from scoreprobe.oracles.common import as_bits, check_inputs

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


def _check_size(patch, n, c, h, w):
    """Refuse, before any allocation, a patch wider than an image needs (2·max(H, W) − 1 already covers the
    whole image from every pixel: more is zero padding only) or candidate tables over MAX_GRID_BYTES."""
    widest = 2 * max(h, w) - 1
    if patch > widest:
        raise ConfigError(f"patch={patch} is wider than a {h}×{w} image needs: {widest} already covers the whole "
                          "image from every pixel")
    size = n * h * w * c * patch * patch * 8                                      # (N, HW, K) float64
    if size > MAX_GRID_BYTES:
        raise ConfigError(f"patch={patch} over {n} training images needs {size / 2**30:.1f} GiB of candidate "
                          f"patches, over the {MAX_GRID_BYTES >> 30} GiB limit (scoreprobe.limits)")


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
    """Exact local (patch) oracle; see the module docstring for the definition and the boundary.

    Parameters
    ----------
    train : (N, D) uint8 bits, the training images (D = C·H·W, channel-major as everywhere).
    patch : odd int >= 1, the window side (patch × patch pixels centred on the output pixel).
    equivariant : bool, pool the candidate patches over all positions (the ELS machine).
    shape : (C, H, W) or (H, W), optional; default a square one-channel image.

    Attributes
    ----------
    dim : int, D.  image_shape : (C, H, W).  n_candidates : (H·W,) int, distinct candidate patches
    per position (all equal when equivariant).
    """

    def __init__(self, train, patch=3, equivariant=False, shape=None):
        bits = as_bits(train, "train")
        if isinstance(patch, bool) or not isinstance(patch, numbers.Integral) or patch < 1 or patch % 2 == 0:
            raise ConfigError(f"patch must be an odd positive integer (a window centred on its pixel), got {patch!r}")
        self.patch, self.equivariant = int(patch), bool(equivariant)
        self.dim = bits.shape[1]
        self.image_shape = _image_shape(self.dim, shape)
        c, h, w = self.image_shape
        _check_size(self.patch, bits.shape[0], c, h, w)
        signed = torch.from_numpy(bits).to(torch.float64).reshape(-1, c, h, w) * 2 - 1
        cand = patches(signed, self.patch)                                        # (N, HW, K)
        self._centre = centre_slots(c, self.patch)
        self._cand, self._logm = (self._pooled(cand) if self.equivariant else self._per_position(cand))
        self.n_candidates = torch.isfinite(self._logm).sum(-1).numpy()
        self._cache = {}

    @staticmethod
    def _pooled(cand):
        """Distinct patches over all positions and items: (1, U, K) and log multiplicities (1, U)."""
        uniq, counts = torch.unique(cand.reshape(-1, cand.shape[-1]), dim=0, return_counts=True)
        return uniq[None], counts.to(torch.float64).log()[None]

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
            cand = self._cand.to(device=x.device, dtype=x.dtype)                  # (Q, U, K)
            bias = self._logm.to(device=x.device, dtype=x.dtype)                  # (Q, U)
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
        return out.clamp_(-1.0, 1.0)                                              # NaN in x stays NaN

    def __repr__(self):
        kind = "equivariant" if self.equivariant else "per-position"
        return f"LocalDenoiser(patch={self.patch}, {kind}, shape={self.image_shape})"
