"""``rollout``: many members simulated at once, the batch axis sharded over
every visible device.  A thin composition of :func:`jaxmbd.simulate` with
``vmap``; nothing here integrates."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .inputs import NO_INPUTS, Inputs
from .options import Save, Solver, Start, Steps
from .simulate import Solution, simulate, validate_times


Rollout = Solution
"""A rollout's result is a :class:`Solution` whose fields (all but ``ts``)
carry a leading batch axis: qs/vs (B, S, nq/nv) or None, obs (B, S, ...),
status (B,), stats dict of (B,) counters, t (B,)."""


def _batch_size(tree):
    sizes = {int(x.shape[0]) for x in jax.tree_util.tree_leaves(tree)}
    if len(sizes) > 1:
        raise ValueError(f"batched inputs disagree on the batch size: {sorted(sizes)}")
    return sizes.pop() if sizes else None


def _with_params(model, model_params):
    for name, value in model_params.items():
        model = eqx.tree_at(lambda m, name=name: _field(m, name), model, value)
    return model


def _field(model, name):
    """A parameter by name; dotted names reach inside (a mechanism's
    "tree.mass"), numbers index tuples (a model's force elements,
    "forces.0.stiffness")."""
    for part in name.split("."):
        if isinstance(model, tuple) and part.isdigit():
            model = model[int(part)] if int(part) < len(model) else None
        else:
            model = getattr(model, part, None)
    return model


def rollout(model, start=None, t1=1.0, *, integrator, inputs: Inputs = NO_INPUTS, steps: Steps = Steps(),
            save: Save = Save(), solver: Solver = Solver(), model_params=None, batch_size=None, chunk_size=None,
            shard=True) -> Solution:
    """Simulate a batch of members of one mechanism (one topology): a
    ``vmap`` of :func:`jaxmbd.simulate`, whose arguments it takes.

    start: a :class:`jaxmbd.Start` (or a tuple (q0, v0)) whose q, v are
      (B, nq), (B, nv), or None for the model's own initial state
      (broadcast); its time is shared; its ``reference`` (a previous
      rollout's ``Solution.reference``), if given, has (B,) leaves.
    inputs: :class:`jaxmbd.Inputs`; its ``params`` leaves carry the batch
      axis, its ``ctrl`` may be a (B, nu) array (one constant control vector
      per member), an (nu,) array (the same for every member) or a function.
    steps, save, solver: as for :func:`jaxmbd.simulate`, shared by every
      member; with ``Save(states=False, observe=...)`` no member carries its
      (S, nq) trajectory, so a large batch need not hold every trajectory.
    model_params: {Model field name: array with a leading batch axis}, e.g.
      ``{"stiffness": ks}`` with ks (B, nv): each member gets its own value;
      dotted names reach inside and numbers index tuples
      (``{"tree.forces.0.stiffness": ks}`` with ks (B, 1): the stiffness of
      a mechanism's first force element, its spring).
    batch_size: needed only when nothing above is batched.
    chunk_size: run the members (of each device's share) this many at a
      time, one chunk after another (``jax.lax.map``), instead of all at
      once.  It bounds the memory the integrator's intermediates take
      (they grow with the number of members integrated together: needed
      for batches of ~10^5), and with adaptive steps a member waits only
      for the slowest member of its chunk.  Results are the same.
    shard: with more than one visible device, the batch is split over all of
      them (a 1-d ``Mesh`` named "batch"; members are padded to a multiple of
      the device count and the padding dropped afterwards).  The result is
      the same as on one device.

    As in simulate, failures are per member in ``status``.  Works under jit
    and grad."""
    start = Start.of(start)
    if not isinstance(inputs, Inputs):
        raise TypeError(f"inputs must be a jaxmbd.Inputs, got {type(inputs).__name__}")
    ctrl, params = inputs.ctrl, inputs.params
    model_params = {} if model_params is None else dict(model_params)
    for name in model_params:
        if not isinstance(_field(model, name), jax.Array):
            raise ValueError(f"model_params: {name!r} is not a parameter field of the model")
    per_member_ctrl = ctrl is not None and not callable(ctrl) and jnp.ndim(ctrl) == 2
    batched = {k: v for k, v in dict(q0=start.q, v0=start.v, params=params, model_params=model_params,
                                     ctrl=ctrl if per_member_ctrl else None, reference=start.reference).items()
               if v is not None}
    batched = jax.tree_util.tree_map(jnp.asarray, batched)
    for leaf in jax.tree_util.tree_leaves(batched):
        if leaf.ndim == 0:
            raise ValueError("rollout: batched inputs need a leading batch axis (got a scalar)")
    B = _batch_size(batched)
    if B is None:
        if batch_size is None:
            raise ValueError("rollout: nothing is batched; give q0/v0/params/model_params with a batch axis "
                             "or batch_size")
        B = int(batch_size)
    elif batch_size is not None and int(batch_size) != B:
        raise ValueError(f"batch_size={batch_size} but the inputs have {B} members")
    if B < 1:
        raise ValueError("rollout: empty batch")
    if "q0" not in batched:
        batched["q0"] = jnp.broadcast_to(model.q0, (B, model.nq))
    if "v0" not in batched:
        batched["v0"] = jnp.broadcast_to(model.v0, (B, model.nv))
    if batched["q0"].shape[1:] != (model.nq,) or batched["v0"].shape[1:] != (model.nv,):
        raise ValueError(f"q0, v0 must be (B, {model.nq}), (B, {model.nv}); got {batched['q0'].shape}, "
                         f"{batched['v0'].shape}")
    if per_member_ctrl and batched["ctrl"].shape[1:] != (model.nu,):
        raise ValueError(f"rollout: ctrl has shape {batched['ctrl'].shape}, expected (B, {model.nu}) (one control "
                         f"per actuator and member, nu = {model.nu}) or ({model.nu},)")
    shared = Inputs(inputs.tau, None if per_member_ctrl else ctrl)
    validate_times(start.t, t1, save.ts, steps.dt0)
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
                                   or chunk_size < 1):
        raise ValueError(f"rollout: chunk_size must be a positive integer, got {chunk_size!r}")

    devices = jax.devices()
    n_dev = len(devices) if shard else 1
    chunk = None
    if chunk_size is not None and chunk_size < B:
        chunk = -(-int(chunk_size) // n_dev) * n_dev  # each device takes an equal share of a chunk
        size = -(-B // chunk) * chunk
    else:
        size = -(-B // n_dev) * n_dev
    pad = size - B
    if pad:  # repeat the last member; the copies are dropped below
        batched = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, 0)]), batched)
    if n_dev > 1:
        mesh = Mesh(np.array(devices), ("batch",))
        spec = NamedSharding(mesh, PartitionSpec("batch"))
        batched = jax.tree_util.tree_map(lambda x: jax.device_put(x, spec), batched)
    out = _rollout(model, batched, Start(t=start.t, assemble=start.assemble), t1, integrator, shared, steps, save, solver, chunk)
    if pad:
        out = jax.tree_util.tree_map(lambda x: x[:B], out)
    return eqx.tree_at(lambda r: r.ts, out, out.ts[0])


@eqx.filter_jit
def _rollout(model, batched, start, t1, integrator, shared, steps, save, solver, chunk):
    def one(b):
        m = _with_params(model, b.get("model_params", {}))
        inputs = Inputs(shared.tau, b.get("ctrl", shared.ctrl), b.get("params"))
        return simulate(m, Start(b["q0"], b["v0"], start.t, start.assemble, b.get("reference")), t1,
                        integrator=integrator,
                        inputs=inputs, steps=steps, save=save, solver=solver)
    if chunk is None:
        return jax.vmap(one)(batched)
    # members m = c * n + i, chunk i = {c * n + i}: the chunk axis c stays the
    # leading (sharded) one, so each device runs its own share of every chunk.
    n = jax.tree_util.tree_leaves(batched)[0].shape[0] // chunk
    split = lambda x: jnp.swapaxes(x.reshape((chunk, n) + x.shape[1:]), 0, 1)
    join = lambda y: jnp.swapaxes(y, 0, 1).reshape((chunk * n,) + y.shape[2:])
    out = jax.lax.map(jax.vmap(one), jax.tree_util.tree_map(split, batched))
    return jax.tree_util.tree_map(join, out)


__all__ = ["rollout", "Rollout"]
