"""Creating a PyTorch optimizer's lazily created state before it is registered, without
changing training.

PyTorch's optimizers create their per-parameter state (Adam's exp_avg, exp_avg_sq and step;
SGD's momentum_buffer) in their first step(), so right after construction an optimizer's
state dict holds no tensors and there is nothing to register. "One step with zero gradients"
is not the answer: it advances Adam's step count (the bias correction of every later step
changes) and AdamW's weight decay moves the parameters.

init_optimizer_state runs that step anyway, to let the optimizer itself create its state
with the shapes, dtypes, devices and memory formats of the running PyTorch version, and then
undoes what the step did: every parameter's bytes are put back from a copy (in host memory),
every gradient is put back as it was (None or the same tensor object), and every state value
is reset to the value the optimizer's first real step starts from (zeros, step 0; NAdam's
mu_product 1). The state tensors keep their identity, so the ones registered are the ones the
optimizer updates in place. The following steps are then bit-identical to those of an
optimizer that never had this call.

Only optimizers whose first step is known to start from such values are supported; any other
is refused with a TypeError before anything is touched (create its state yourself, or
register after its first real step).
"""

# Per supported optimizer class (by name in torch.optim): state key -> the value its first
# step starts from. A key the step creates that is not listed is an error (a PyTorch version
# whose optimizer changed: refusing beats guessing).
_ADAM = {"step": 0.0, "exp_avg": 0.0, "exp_avg_sq": 0.0, "max_exp_avg_sq": 0.0}
_START = {
    "Adam": _ADAM,
    "AdamW": _ADAM,
    "Adamax": {"step": 0.0, "exp_avg": 0.0, "exp_inf": 0.0},
    "RAdam": {"step": 0.0, "exp_avg": 0.0, "exp_avg_sq": 0.0},
    "NAdam": {"step": 0.0, "mu_product": 1.0, "exp_avg": 0.0, "exp_avg_sq": 0.0},
    # SGD's first step sets momentum_buffer = a copy of the gradient; later ones compute
    # buf * momentum + (1 - dampening) * grad. With dampening 0 and buf = -0.0 that is the
    # gradient bit for bit (-0.0 * m = -0.0, and -0.0 + g = g for every g, signed zeros
    # included; +0.0 would turn a gradient of -0.0 into +0.0).
    "SGD": {"momentum_buffer": -0.0},
}


def supported():
    """The names of the torch.optim classes init_optimizer_state handles."""
    return sorted(_START)


def _optimizer_class(optimizer):
    import torch.optim
    for name in _START:
        cls = getattr(torch.optim, name, None)
        if cls is not None and type(optimizer) is cls:
            return name
    return None


def _check_groups(name, optimizer):
    if name == "SGD":
        for i, group in enumerate(optimizer.param_groups):
            if group.get("momentum", 0) != 0 and group.get("dampening", 0) != 0:
                raise ValueError(
                    "ft.init_optimizer_state: SGD param group %d has momentum %r and dampening %r: its first "
                    "step copies the gradient into momentum_buffer, later ones damp it, so no buffer created "
                    "in advance gives the same training; register the state after the first real step" %
                    (i, group["momentum"], group["dampening"]))


def init_optimizer_state(optimizer):
    """Creates `optimizer`'s lazily created per-parameter state (for every parameter that
    requires a gradient and has none yet) so that optimizer.state_dict() holds the tensors to
    register, leaving parameters, gradients and the course of training exactly as they were:
    the following steps are bit-identical to those of an optimizer without this call. Returns
    the number of parameters whose state was created (0: nothing to do; calling it again is
    harmless).

    Supported: torch.optim.Adam, AdamW, SGD (momentum with dampening 0, or none), Adamax,
    RAdam, NAdam (exactly those classes, not subclasses), and any optimizer whose state
    already exists (Adagrad creates it in its constructor). Anything else raises TypeError,
    and SGD with momentum and dampening != 0 ValueError, before anything is touched. Needs host
    memory for one copy of the parameters that get state, for the duration of the call."""
    try:
        import torch
    except ImportError as e:  # pragma: no cover - who has an optimizer has torch
        raise TypeError("ft.init_optimizer_state needs PyTorch: %s" % e)
    params, seen = [], set()
    for group in optimizer.param_groups:
        for p in group["params"]:
            if id(p) in seen or not p.requires_grad or optimizer.state.get(p):
                continue
            seen.add(id(p))
            params.append(p)
    if not params:
        return 0  # every parameter has its state (or none needs any): any optimizer
    name = _optimizer_class(optimizer)
    if name is None:
        raise TypeError("ft.init_optimizer_state: %s.%s is not supported (supported: torch.optim.%s); create "
                        "its state before registering (or register after its first real step)" %
                        (type(optimizer).__module__, type(optimizer).__qualname__,
                         ", ".join(supported())))
    _check_groups(name, optimizer)
    start = _START[name]

    everyone = [p for group in optimizer.param_groups for p in group["params"]]
    grads = [(p, p.grad) for p in everyone]
    with torch.no_grad():
        saved = [p.detach().to("cpu", copy=True) for p in params]
    created = False
    try:
        # Only the parameters without state get a (zero) gradient: the optimizer skips the
        # others, whose state and bytes this step must not touch.
        for p in everyone:
            p.grad = None
        for p in params:
            p.grad = torch.zeros_like(p)
        created = True
        # The class's step, not the instance attribute: an LR scheduler wraps the latter to
        # count the program's steps.
        type(optimizer).step(optimizer)
        for p in params:
            state = optimizer.state.get(p, {})
            unknown = sorted(k for k in state if k not in start)
            if unknown:
                raise TypeError("ft.init_optimizer_state: torch.optim.%s created state %s this version of ft "
                                "does not know the start value of; create the state yourself" % (name, unknown))
            for key, value in list(state.items()):
                if isinstance(value, torch.Tensor):
                    value.detach().fill_(start[key])
                elif isinstance(value, (int, float)) and not isinstance(value, bool):
                    state[key] = type(value)(start[key])
        with torch.no_grad():
            for p, copy in zip(params, saved):
                p.copy_(copy)
        created = False
    finally:
        if created:  # failed half way: no state of ours stays behind, the bytes come back
            for p in params:
                optimizer.state.pop(p, None)
            with torch.no_grad():
                for p, copy in zip(params, saved):
                    p.copy_(copy)
        for p, grad in grads:
            p.grad = grad
    if any(p.is_cuda for p in params):
        torch.cuda.synchronize()  # the state is in place before anyone registers or copies it
    return len(params)
