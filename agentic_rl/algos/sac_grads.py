"""SAC's (and OPD's MSE distillation's) losses and their gradients without autograd.

For the networks SAC builds (ReLU MLP actor with a tanh-Gaussian head, ReLU ensemble critic)
the backward pass written out takes far fewer tensor operations than autograd's (618 aten
calls per update instead of 1,086 at [64,64], nested calls included) and no graph:

- the actor runs once over ``[s'; s; prototype states]`` (one noise draw ``[2B, a]``, s' first,
  in the order the autograd path draws it);
- the online critic runs once over ``[(s, a); (s, pi(s))]``: the same weights before this
  step's update serve the critic loss (first half) and the actor loss (second half); weight
  gradients are taken from the first half only, the action gradient from the second;
- the tanh-Gaussian's log-density and squashing are differentiated in closed form
  (d log pi / d pre-tanh = 2 tanh(pre-tanh), d log pi / d log std = -1 + dpre/dlog_std terms).

The gradients are written into each parameter's ``.grad``; ``SAC.update`` then takes one
optimiser step. ``tests/unit/test_sac_grads.py`` checks them against autograd on the losses of
``losses.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from agentic_rl.algos import losses
from agentic_rl.nets.actors import (LOG_STD_MAX, LOG_STD_MIN, gaussian_log_prob,
                                    tanh_log_det_jacobian)
from agentic_rl.nets.mlp import EnsembleLinear

LOG_STD_SCALE = 0.5 * (LOG_STD_MAX - LOG_STD_MIN)


def relu_backward(grad: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """``grad`` where the ReLU's ``output`` is positive, 0 elsewhere (autograd's own kernel)."""
    return torch.ops.aten.threshold_backward(grad, output, 0)


def supports(actor: nn.Module, critic: nn.Module) -> bool:
    """True for the layer types this module differentiates: Linear/ReLU actor trunk, ensemble
    critic of EnsembleLinear/ReLU (as ``SAC`` builds them with ``activation: relu``)."""
    trunk_ok = len(actor.trunk) > 0 and all(
        isinstance(layer, nn.Linear if i % 2 == 0 else nn.ReLU)
        for i, layer in enumerate(actor.trunk))
    layers = list(critic.net)
    critic_ok = len(layers) >= 3 and all(
        isinstance(layer, EnsembleLinear if i % 2 == 0 else nn.ReLU)
        for i, layer in enumerate(layers))
    return trunk_ok and critic_ok


LOSS_HOOKS = ("actor_loss", "autograd_gradients")


def defining_class(cls: type, name: str) -> type:
    return next(c for c in cls.__mro__ if name in c.__dict__)


def reference_reason(sac: Any) -> str | None:
    """Why ``sac`` must run the autograd update, or ``None`` where the hand-written
    gradients (``sac_grads``, and the fused C++ call built on them) compute the same one."""
    if not supports(sac.actor, sac.critic):
        return ("sac_grads differentiates ReLU MLPs only (this actor or critic has other "
                "layers, e.g. tanh or layer norm)")
    cls = type(sac)
    covered_by = defining_class(cls, "manual_gradients_for")
    for hook in LOSS_HOOKS:
        owner = defining_class(cls, hook)
        if owner is not covered_by and issubclass(owner, covered_by):
            return (f"{owner.__name__} overrides {hook} without a hand-written gradient "
                    "(override manual_gradients_for to declare one)")
    return None


@torch.no_grad()
def actor_forward(actor: nn.Module, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Trunk activations ``[x, h_1, ..., h_L]`` and the heads' output ``[R, 2a]`` (mean, then
    the pre-tanh log-std), with the same products as ``TanhGaussianActor.forward``."""
    activations = [x]
    for linear in list(actor.trunk)[::2]:
        activations.append(torch.addmm(linear.bias, activations[-1], linear.weight.t()).relu_())
    head_weight = torch.cat([actor.mean_head.weight, actor.log_std_head.weight])
    head_bias = torch.cat([actor.mean_head.bias, actor.log_std_head.bias])
    return activations, torch.addmm(head_bias, activations[-1], head_weight.t())


@torch.no_grad()
def critic_forward(critic: nn.Module, z: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Ensemble activations (``[R, in]``, then ``[n, R, h]`` per hidden layer) and ``q [n, R]``,
    computed as ``EnsembleQ.forward`` computes them."""
    linears = list(critic.net)[::2]
    activations = [z]
    out = linears[0](z)
    for linear in linears[1:]:
        activations.append(out.relu_())
        out = torch.baddbmm(linear.bias, out, linear.weight)
    return activations, out.squeeze(-1)


@torch.no_grad()
def critic_backward(critic: nn.Module, activations: list[torch.Tensor], grad_q: torch.Tensor,
                    rows: int, act_dim: int) -> torch.Tensor:
    """Weight gradients of the critic from its first ``rows`` rows (written to ``.grad``), and
    the gradient with respect to the action columns of the other rows, summed over members.

    Args:
        activations: from ``critic_forward``; ``activations[0]`` is the input ``[R, in]``.
        grad_q: ``[n, R]`` loss gradient with respect to each member's Q.
        rows: the leading rows whose loss trains the critic.
        act_dim: the input's trailing action columns.

    Returns:
        ``[R - rows, act_dim]``.
    """
    linears = list(critic.net)[::2]
    grad = grad_q.unsqueeze(-1)  # [n, R, out]
    for linear, inputs in zip(reversed(linears[1:]), reversed(activations[1:])):
        linear.weight.grad = torch.bmm(inputs[:, :rows].transpose(1, 2), grad[:, :rows])
        linear.bias.grad = grad[:, :rows].sum(dim=1, keepdim=True)
        grad = relu_backward(torch.bmm(grad, linear.weight.transpose(1, 2)), inputs)
    first, z = linears[0], activations[0]
    members, in_features, hidden = first.weight.shape
    stacked_grad = grad[:, :rows].transpose(0, 1).reshape(rows, members * hidden)
    first.weight.grad = torch.mm(z[:rows].t(), stacked_grad).view(
        in_features, members, hidden).permute(1, 0, 2).contiguous()
    first.bias.grad = grad[:, :rows].sum(dim=1, keepdim=True)
    action_weight = first.weight[:, in_features - act_dim:].transpose(1, 2)  # [n, h, a]
    return torch.bmm(grad[:, rows:], action_weight).sum(dim=0)


@torch.no_grad()
def actor_backward(actor: nn.Module, activations: list[torch.Tensor], grad_heads: torch.Tensor,
                   first_row: int) -> None:
    """Write the actor's weight gradients from ``grad_heads [R - first_row, 2a]`` (mean, then
    pre-tanh log-std), the loss gradient of the heads' output rows ``first_row`` onwards."""
    act_dim = actor.mean_head.out_features
    hidden = activations[-1][first_row:]
    head_weight_grad = torch.mm(grad_heads.t(), hidden)
    head_bias_grad = grad_heads.sum(dim=0)
    actor.mean_head.weight.grad, actor.log_std_head.weight.grad = head_weight_grad.split(act_dim)
    actor.mean_head.bias.grad, actor.log_std_head.bias.grad = head_bias_grad.split(act_dim)
    head_weight = torch.cat([actor.mean_head.weight, actor.log_std_head.weight])
    grad = relu_backward(torch.mm(grad_heads, head_weight), hidden)
    linears = list(actor.trunk)[::2]
    for index in reversed(range(len(linears))):
        inputs = activations[index][first_row:]
        linears[index].weight.grad = torch.mm(grad.t(), inputs)
        linears[index].bias.grad = grad.sum(dim=0)
        if index > 0:
            grad = relu_backward(torch.mm(grad, linears[index].weight), inputs)


@torch.no_grad()
def policy_sample(heads: torch.Tensor, rows: int, act_dim: int, generator: torch.Generator
                  ) -> dict[str, torch.Tensor]:
    """The tanh-Gaussian draw over the first ``2 * rows`` rows of the heads' output ``[R, 2a]``
    (``[s'; s]``), exactly as ``TanhGaussianActor.sample`` computes it: ``action`` and
    ``log_prob`` (``[2B, a]``, ``[2B]``), with the ``noise``, ``std`` and ``squashed_log_std``
    (``tanh`` of the raw log-std) that the backward pass reads."""
    mean, raw_log_std = heads[: 2 * rows, :act_dim], heads[: 2 * rows, act_dim:]
    squashed_log_std = torch.tanh(raw_log_std)
    log_std = LOG_STD_MIN + LOG_STD_SCALE * (squashed_log_std + 1.0)
    std = log_std.exp()
    noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
    pre_tanh = mean + std * noise
    action = torch.tanh(pre_tanh)
    log_prob = gaussian_log_prob(noise, log_std) - tanh_log_det_jacobian(pre_tanh)
    return {"action": action, "log_prob": log_prob, "noise": noise, "std": std,
            "squashed_log_std": squashed_log_std}


@torch.no_grad()
def critic_gradients(sac: Any, batch: dict[str, Any], x: torch.Tensor, next_x: torch.Tensor,
                     sample: dict[str, torch.Tensor], alpha: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Write the critic's gradients of its loss; return ``dL_actor / d pi(s)`` ``[B, a]``
    (through ``-min_i Q_i(s, pi(s))``), that minimum ``[B]`` (the actor's loss reads it) and
    the critic's loss and mean Q. Sets ``batch["td_error"]`` under prioritised replay."""
    rows, act_dim = x.shape[0], sample["action"].shape[1]
    next_action, policy_action = sample["action"][:rows], sample["action"][rows:]
    next_q = sac.target_critic(next_x, next_action)
    target = losses.soft_q_target(batch["reward"], batch["terminated"], next_q,
                                  sample["log_prob"][:rows], alpha, sac.config.gamma)
    critic_input = torch.cat([torch.cat([x, batch["action"]], dim=-1),
                              torch.cat([x, policy_action], dim=-1)])
    critic_activations, q_all = critic_forward(sac.critic, critic_input)
    q, q_pi = q_all[:, :rows], q_all[:, rows:]
    error = q - target.unsqueeze(0)
    weight = batch.get("weight")  # prioritised replay's importance-sampling weights [B]
    weighted = error if weight is None else error * weight.unsqueeze(0)
    critic_loss = 0.5 * (weighted * error).mean(dim=1).sum()
    if weight is not None:
        batch["td_error"] = error.abs().amax(dim=0)
    q_pi_min, q_pi_argmin = q_pi.min(dim=0)

    # dL/dQ: critic loss on the first half, -min_i Q_i(s, pi(s)) / B on the second.
    grad_q = torch.zeros_like(q_all)
    torch.div(weighted, rows, out=grad_q[:, :rows])
    grad_q[:, rows:].scatter_(0, q_pi_argmin.unsqueeze(0), -1.0 / rows)
    grad_action = critic_backward(sac.critic, critic_activations, grad_q, rows, act_dim)
    return grad_action, q_pi_min, {"critic_loss": critic_loss, "q_mean": q.mean()}


@torch.no_grad()
def head_gradients(heads: torch.Tensor, sample: dict[str, torch.Tensor],
                   grad_action: torch.Tensor, alpha: torch.Tensor, rows: int) -> torch.Tensor:
    """``[R - B, 2a]``: the SAC actor loss's gradient with respect to the heads' rows ``s``
    (mean, then raw log-std), through the tanh squashing and the Gaussian
    (d log pi / d pre-tanh = 2 tanh(pre-tanh)); rows past ``2B`` (prototype states) are left
    unwritten."""
    act_dim = grad_action.shape[1]
    coef = alpha / rows  # dL/d log pi per row
    policy_action = sample["action"][rows:]
    squashed_log_std = sample["squashed_log_std"][rows:]
    grad_pre = grad_action * (1.0 - policy_action * policy_action) + (2.0 * coef) * policy_action
    grad_log_std = grad_pre * sample["std"][rows:] * sample["noise"][rows:] - coef
    grad_heads = torch.empty(heads.shape[0] - rows, 2 * act_dim, dtype=heads.dtype,
                             device=heads.device)
    grad_heads[:rows, :act_dim] = grad_pre
    torch.mul(grad_log_std * LOG_STD_SCALE, 1.0 - squashed_log_std * squashed_log_std,
              out=grad_heads[:rows, act_dim:])
    return grad_heads


@torch.no_grad()
def distill_gradients(heads: torch.Tensor, grad_heads: torch.Tensor, rows: int,
                      prototype_action: torch.Tensor, weight: float) -> torch.Tensor:
    """Write ``weight * distill_mse``'s gradient into ``grad_heads``' prototype rows (past
    ``B``; the deterministic action ``tanh(mean)`` against ``prototype_action [P, a]``) and
    return the unweighted loss."""
    act_dim = prototype_action.shape[1]
    deterministic = torch.tanh(heads[2 * rows:, :act_dim])
    difference = deterministic - prototype_action
    distill = losses.distill_mse_loss(deterministic, prototype_action)
    scale = 2.0 * weight / difference.numel()
    torch.mul(difference * scale, 1.0 - deterministic * deterministic,
              out=grad_heads[rows:, :act_dim])
    grad_heads[rows:, act_dim:] = 0.0
    return distill


@torch.no_grad()
def sac_gradients(sac: Any, batch: dict[str, Any], x: torch.Tensor, next_x: torch.Tensor,
                  prototype: tuple[torch.Tensor, torch.Tensor, float] | None
                  ) -> dict[str, torch.Tensor]:
    """Write the gradients of critic loss + actor loss (+ ``weight * distill_mse`` on the
    prototype states ``x_p`` and actions ``a_p`` when ``prototype = (x_p, a_p, weight)``) +
    temperature loss into ``.grad`` of every parameter; return the losses and statistics."""
    actor, alpha = sac.actor, sac.alpha
    rows, act_dim = x.shape[0], actor.mean_head.out_features
    inputs = [next_x, x] if prototype is None else [next_x, x, prototype[0]]
    actor_activations, heads = actor_forward(actor, torch.cat(inputs))
    sample = policy_sample(heads, rows, act_dim, sac.generator)
    policy_log_prob = sample["log_prob"][rows:]
    grad_action, q_pi_min, critic_metrics = critic_gradients(sac, batch, x, next_x, sample,
                                                             alpha)
    sac_loss = (alpha * policy_log_prob - q_pi_min).mean()
    grad_heads = head_gradients(heads, sample, grad_action, alpha, rows)
    metrics: dict[str, torch.Tensor] = {"actor_sac_loss": sac_loss}
    total = sac_loss
    if prototype is not None:
        _, prototype_action, weight = prototype
        distill = distill_gradients(heads, grad_heads, rows, prototype_action, weight)
        total = sac_loss + weight * distill
        metrics["actor_distill_loss"] = distill
    metrics["actor_total_loss"] = total
    actor_backward(actor, actor_activations, grad_heads, rows)

    entropy_error = policy_log_prob + sac.target_entropy
    alpha_loss = -(sac.log_alpha.detach() * entropy_error).mean()
    sac.log_alpha.grad = -entropy_error.mean()
    return {"critic_loss": critic_metrics["critic_loss"], "alpha_loss": alpha_loss,
            "q_mean": critic_metrics["q_mean"], "entropy": -policy_log_prob.mean(),
            "policy_std": sample["std"][rows:].mean(), **metrics}
