"""JumpReLU's straight-through estimators (Rajamanoharan et al. 2024, "Jumping Ahead").

    f = jumprelu(h, theta, eps)     # h·H(h − θ); dθ through a rectangle kernel of width eps
    n = step(h, theta, eps)         # H(h − θ), the L0 count's summand; dθ likewise, no gradient to h

The Heaviside step has zero derivative in θ almost everywhere; the pseudo-derivatives below replace it by
K((h − θ)/eps)/eps with K the rectangle kernel 1[|u| < 1/2]:
    ∂/∂θ [h·H(h − θ)] ≈ −(θ/eps)·K((h − θ)/eps),      ∂/∂θ H(h − θ) ≈ −(1/eps)·K((h − θ)/eps).
The gradient to h is the ordinary one: H(h − θ) for jumprelu, none for step.
"""
import torch


def _kernel(h, theta, eps):
    return ((h - theta).abs() < eps / 2).to(h.dtype) / eps                  # (n, d_sae)


class _JumpReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, theta, eps):
        ctx.save_for_backward(h, theta)
        ctx.eps = eps
        return h * (h > theta)

    @staticmethod
    def backward(ctx, g):
        h, theta = ctx.saved_tensors
        d_theta = -(theta * _kernel(h, theta, ctx.eps) * g).sum(0)          # (d_sae,)
        return g * (h > theta), d_theta, None


class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, theta, eps):
        ctx.save_for_backward(h, theta)
        ctx.eps = eps
        return (h > theta).to(h.dtype)

    @staticmethod
    def backward(ctx, g):
        h, theta = ctx.saved_tensors
        return None, -(_kernel(h, theta, ctx.eps) * g).sum(0), None


def jumprelu(h, theta, eps):
    """h (n, d_sae), theta (d_sae,) > 0 -> h·H(h − θ) with the straight-through gradient in θ."""
    return _JumpReLU.apply(h, theta, eps)


def step(h, theta, eps):
    """h (n, d_sae), theta (d_sae,) -> H(h − θ) (n, d_sae), gradient in θ only."""
    return _Step.apply(h, theta, eps)
