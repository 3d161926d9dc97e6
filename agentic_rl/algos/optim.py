"""Adam whose step costs one fused kernel call per distinct set of hyper-parameters.

``torch.optim.Adam(fused=True)`` already updates every tensor of a parameter group in one
kernel, but its ``step`` spends ~100 us of Python per call on bookkeeping (per-group state
lookups, device/dtype grouping): as much as the kernels themselves for small networks, where
the update is overhead-bound. ``FusedAdam`` keeps Adam's state layout and ``state_dict`` (it is
a ``torch.optim.Adam``) and, after the first step, calls the same kernel directly on cached
tensor lists, merging parameter groups whose hyper-parameters are equal, with the step counts
of a merged group as views of one tensor (one increment instead of one per parameter).
``flat_state`` hands that state to code that applies the same step itself (the fused SAC
update does it in C++, right after each gradient is written).
"""

from __future__ import annotations

from typing import Any

import torch

_OPTIMIZER = torch.optim.Optimizer


class FusedAdam(torch.optim.Adam):
    """``torch.optim.Adam(..., fused=True)`` with a lean ``step`` (same arithmetic)."""

    def __init__(self, params: Any, **kwargs: Any) -> None:
        super().__init__(params, fused=True, **kwargs)
        self._plan: list[tuple] | None = None  # (kwargs, params, exp_avgs, sqs, [counter, *steps])
        self._plan_keys: list[tuple] = []
        self._flat: tuple[list[torch.Tensor], tuple] | None = None  # (params, flat_state)

    @staticmethod
    def _hyper(group: dict[str, Any]) -> tuple:
        # betas come back as a list from a checkpoint's JSON round trip
        return group["lr"], tuple(group["betas"]), group["eps"], group["weight_decay"]

    def _build_plan(self) -> None:
        """Group the parameters (with their state tensors) by hyper-parameters."""
        plans: dict[tuple, tuple] = {}
        for group in self.param_groups:
            lr, (beta1, beta2), eps, weight_decay = key = self._hyper(group)
            plan = plans.setdefault(key, (dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                                               weight_decay=weight_decay), [], [], [], []))
            for param in group["params"]:
                state = self.state[param]
                plan[1].append(param)
                plan[2].append(state["exp_avg"])
                plan[3].append(state["exp_avg_sq"])
                plan[4].append(state["step"])
        for _, params, _, _, steps in plans.values():
            # Each parameter keeps its own 0-dim step tensor, now a view of one shared counter.
            counter = torch.stack([step.detach().reshape(()) for step in steps])
            views = list(counter.unbind())
            for param, view in zip(params, views):
                self.state[param]["step"] = view
            steps[:] = [counter, *views]
        self._plan = list(plans.values())
        self._plan_keys = [self._hyper(group) for group in self.param_groups]
        self._flat = None

    def flat_state(self, params: list[torch.Tensor]
                   ) -> tuple[list[torch.Tensor], list[float], list[float]] | None:
        """Adam's state for code that applies this optimiser's step itself: ``[exp_avg of each
        of params, exp_avg_sq of each, step counters...]`` (incrementing every counter by one
        counts the step), each parameter's learning rate, and ``[beta1, beta2, eps]``. None
        where ``apply_gradients`` has to run instead: before the first step (which creates the
        state), after the hyper-parameters changed, with weight decay, with betas or eps that
        differ between groups, or if ``params`` are not exactly this optimiser's parameters."""
        if self._plan is None and self._fast_path_ok(need_grads=False):
            self._build_plan()  # the state exists (loaded from a checkpoint)
        if self._plan is None or self._plan_keys != [self._hyper(g) for g in self.param_groups]:
            return None
        if self._flat is None or self._flat[0] is not params:
            self._flat = (params, self._build_flat_state(params))
        return self._flat[1]

    def _build_flat_state(self, params: list[torch.Tensor]) -> tuple | None:
        assert self._plan is not None
        hypers = {(h["beta1"], h["beta2"], h["eps"], h["weight_decay"]) for h, *_ in self._plan}
        lr_of = {param: hyper["lr"] for hyper, plan_params, *_ in self._plan
                 for param in plan_params}
        counters = [steps[0] for *_, steps in self._plan]
        if (len(hypers) != 1 or next(iter(hypers))[3] != 0 or len(params) != len(lr_of)
                or any(param not in lr_of for param in params)
                or len({float(v) for counter in counters for v in counter.tolist()}) != 1):
            return None
        beta1, beta2, eps, _ = next(iter(hypers))
        states = [self.state[param] for param in params]
        return ([s["exp_avg"] for s in states] + [s["exp_avg_sq"] for s in states] + counters,
                [lr_of[param] for param in params], [beta1, beta2, eps])

    def _fast_path_ok(self, need_grads: bool = True) -> bool:
        return all(not g["amsgrad"] and not g["maximize"] and not g["differentiable"]
                   and not g.get("decoupled_weight_decay", False)
                   and not isinstance(g["lr"], torch.Tensor) for g in self.param_groups) and all(
                       (p.grad is not None or not need_grads) and "exp_avg" in self.state.get(p, {})
                       for g in self.param_groups for p in g["params"])

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        """``torch.optim.Optimizer.step``, with its step hooks and profiler record."""
        return self.apply_gradients(closure)

    @torch.no_grad()
    def apply_gradients(self, closure: Any = None) -> Any:
        """One Adam step from the parameters' ``.grad``. Called directly (the learners do) it
        skips the wrapper torch puts around ``step`` (profiler record, step hooks: about
        0.1 ms per call, as much as the kernels of a small network's step); step hooks
        registered on this optimiser do not run then."""
        if closure is None and self._plan is None and self._init_state():
            self._build_plan()
        if (closure is not None or self._plan is None
                or self._plan_keys != [self._hyper(group) for group in self.param_groups]):
            loss = super().step(closure)  # also the first step, which creates the state
            self._plan = None
            if self._fast_path_ok():
                self._build_plan()
            return loss
        grads = [[p.grad for p in plan[1]] for plan in self._plan]
        if any(g is None for plan_grads in grads for g in plan_grads):
            self._plan = None  # a parameter without gradient this step: torch's own path
            return super().step()
        for (hyper, params, exp_avgs, exp_avg_sqs, steps), plan_grads in zip(self._plan, grads):
            steps[0].add_(1)  # the shared counter; steps[1:] are its per-parameter views
            torch._fused_adam_(params, plan_grads, exp_avgs, exp_avg_sqs, [], steps[1:],
                               amsgrad=False, maximize=False, grad_scale=None, found_inf=None,
                               **hyper)
        return None

    def _init_state(self) -> bool:
        """Create Adam's state as torch's fused Adam does on its first step (0-dim float32 step
        counts, zero moments), where every parameter has a gradient and none has state yet;
        True if it did. The first step then takes the lean path too, and torch's ``step``,
        whose wrapper imports ``torch._dynamo`` (over a second), is never called."""
        params = [p for group in self.param_groups for p in group["params"]]
        if any(p.grad is None or self.state.get(p) for p in params):
            return False
        for param in params:
            self.state[param] = {
                "step": torch.zeros((), dtype=torch.float32, device=param.device),
                "exp_avg": torch.zeros_like(param, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(param, memory_format=torch.preserve_format)}
        if self._fast_path_ok():
            return True
        for param in params:  # an option the lean step does not cover: torch creates it
            del self.state[param]
        return False

    # torch wraps these in ``torch._disable_dynamo``, which imports ``torch._dynamo`` on first
    # use; outside ``torch.compile`` the wrapped function is the same call.
    def zero_grad(self, set_to_none: bool = True) -> None:
        _OPTIMIZER.zero_grad.__wrapped__(self, set_to_none)

    def state_dict(self) -> dict[str, Any]:
        """Torch's state dict, with each step count in its own storage (checkpoint files do not
        store tensors that share memory)."""
        state = _OPTIMIZER.state_dict.__wrapped__(self)
        state["state"] = {key: {**value, "step": value["step"].clone()} if "step" in value
                          else value for key, value in state["state"].items()}
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _OPTIMIZER.load_state_dict.__wrapped__(self, state_dict)
        self._plan = None  # the state tensors were replaced

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _OPTIMIZER.add_param_group.__wrapped__(self, param_group)
        self._plan = None


def merge_optimizer_states(states: list[dict[str, Any]]) -> dict[str, Any]:
    """One optimiser state dict from several, their parameter groups in the given order."""
    merged: dict[str, Any] = {"state": {}, "param_groups": []}
    offset = 0
    for state in states:
        for group in state["param_groups"]:
            merged["param_groups"].append({**group, "params": [i + offset for i in group["params"]]})
        merged["state"].update({i + offset: v for i, v in state["state"].items()})
        offset += sum(len(group["params"]) for group in state["param_groups"])
    return merged
