"""The ``jaxmbd`` command.

  jaxmbd simulate [MODEL] --batch N --t1 T --integrator NAME ...   batched rollout, saved to .npz (+ .png, .html)
  jaxmbd view RUN.npz                                              a finished run's web page (3-D, time slider)
  jaxmbd info MODEL                                                topology and predicted operation counts
  jaxmbd bench [MODEL] --batch N ...                               RK4 rollout throughput (steps/s)

MODEL is a built-in model's name or an MJCF (.xml) or URDF (.urdf) file
(``--floating-base`` puts a URDF robot on a free joint; ``--keyframe NAME``
starts every member from a keyframe of an MJCF file).  ``jaxmbd`` alone
runs ``jaxmbd simulate`` with its defaults: the built-in quadruped
(:func:`jaxmbd.models.quadruped`: 12 position servos holding its legs
straight, a floor) dropped from 64 randomized states, 2 s, RK4 at 1 ms; the
summary adds the contacts (active pairs, deepest penetration, first touch),
the PNG shows the torso height of every member with its first contact
marked, and the HTML page shows the first 16 members in 3-D with a time
slider (:mod:`jaxmbd.view`; it opens in a browser with no network); the
outputs (jaxmbd_run.npz, .png, .html) replace the previous default run's.
An MJCF file's run takes its step and method from the file's ``<option>``
(includes resolved): see :func:`_choose_method`.  The inputs are checked
before the outputs; bad input gives one line on stderr and exit
status 2; Ctrl-C, one line and exit status 130."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import signal
import sys
import threading
import time

import numpy as np

from . import integrators as _integrators
from .runtime import set_xla_flags

MODELS = {
    "quadruped": lambda m: m.quadruped(),
    "quadruped_scene": lambda m: m.load_quadruped_scene(),
    "humanoid30": lambda m: m.humanoid30(),
    "chain30": lambda m: m.chain(30),
    "binary_tree5": lambda m: m.binary_tree(5),
    "grid_tree4": lambda m: m.grid_tree(4),
    "pendulum": lambda m: m.pendulum(),
    "double_pendulum": lambda m: m.double_pendulum(),
    "stiff_double_pendulum": lambda m: m.stiff_double_pendulum(),
    "stiff_chain10": lambda m: m.stiff_chain(10),
    "spinning_body": lambda m: m.spinning_body(),
    "andrews_squeezer": lambda m: m.andrews_squeezer(),
    "slider_crank": lambda m: m.slider_crank(),
    "four_bar": lambda m: m.four_bar(),
    "cartesian_double_pendulum": lambda m: m.cartesian_double_pendulum(),
    "hmmwv14": lambda m: m.hmmwv14(),
    "hmmwv14_stiff": lambda m: m.hmmwv14(stiffened=True),
}
INTEGRATORS = {name: cls.__name__ for name, cls in _integrators.REGISTRY.items()}
"""--integrator's choices: every registered integrator (jaxmbd.integrators.REGISTRY), by name."""
FIXED_STEP = tuple(name for name, cls in _integrators.REGISTRY.items()
                   if not issubclass(cls, _integrators.AbstractAdaptive))
MODEL_HELP = f"built-in model ({', '.join(sorted(MODELS))}) or an MJCF (.xml) / URDF (.urdf) file"


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2."""


def _load_model(name, floating_base=False, options=False):
    """A built-in model by name, or an MJCF (.xml) / URDF (.urdf) file.  The
    loader's warning (what it does not model) is printed as one line.
    options=True: (model, the MJCF file's :class:`jaxmbd.io.MJCFImport`, whose
    ``timestep``, ``integrator`` and ``option`` are the file's ``<option>`` with
    its includes resolved; None for other models)."""
    import warnings

    import jaxmbd
    if name in MODELS:
        model = MODELS[name](jaxmbd.models)
        return (model, None) if options else model
    ext = os.path.splitext(name)[1].lower()
    if ext in (".xml", ".mjcf", ".urdf"):
        if not os.path.isfile(name):
            raise UsageError(f"{name}: no such model file")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                info = None if ext == ".urdf" else jaxmbd.load_mjcf(name, return_info=True)
                model = jaxmbd.load_urdf(name, floating_base=floating_base) if info is None else info.model
            except ValueError as e:
                raise UsageError(str(e)) from None
        for w in caught:
            print(f"jaxmbd: warning: {w.message}", file=sys.stderr)
        return (model, info) if options else model
    if os.path.exists(name):
        raise UsageError(f"{name}: unknown model file type (expected .xml for MJCF or .urdf)")
    raise UsageError(f"unknown model {name!r}; built-in models: {', '.join(sorted(MODELS))}, "
                     "or an MJCF (.xml) / URDF (.urdf) file")


def _initial_states(model, batch, seed, scale, start=None):
    """Randomized initial states around the model's own (q0, v0), or around ``start`` = (q, v) (a
    keyframe's): q ⊕ scale·N(0, 1), v + scale·N(0, 1).  Members of a contact scene start out of
    contact (:func:`_above_the_floor`) unless they start from ``start``; scale 0 with ``start``:
    every member starts at ``start`` exactly (a mechanism's projected onto its constraints)."""
    import jax
    import jax.numpy as jnp

    import jaxmbd
    qc, vc = (model.q0, model.v0) if start is None else start
    rng = np.random.default_rng(seed)
    dq = scale * rng.standard_normal((batch, model.nv))
    v = scale * rng.standard_normal((batch, model.nv)) + np.asarray(vc)
    if start is not None and scale == 0 and not isinstance(model, jaxmbd.Mechanism):
        return np.tile(np.asarray(qc, np.float64), (batch, 1)), v
    if isinstance(model, jaxmbd.Mechanism):
        # perturb in the tree, then project onto the constraints (jaxmbd.assemble)
        tq0 = model.to_tree(jnp.asarray(qc))
        q = jax.vmap(lambda d: model.from_tree(jaxmbd.integrate_q(model.tree, tq0, model.to_tree(d))))(jnp.asarray(dq))
        q, v, info = jax.vmap(lambda qq, vv: jaxmbd.assemble(model, qq, vv))(q, jnp.asarray(v))
        if not np.all(np.asarray(info["residual"]) < 1e-9):
            raise UsageError("could not assemble the randomized initial states (try a smaller --init-scale)")
    else:
        q0 = jnp.asarray(qc)
        q = jax.vmap(lambda d: jaxmbd.integrate_q(model, q0, d))(jnp.asarray(dq))
        if start is None:
            q = _above_the_floor(model, q)
    q, v = np.asarray(q), np.asarray(v)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
        raise UsageError("non-finite initial state (check --init-scale)")
    return q, v


def _contact_element(model):
    from jaxmbd.forces.base import elements
    from jaxmbd.forces.contact import Contact
    tree = getattr(model, "tree", model)
    found = [e for e in elements(tree) if isinstance(e, Contact)] if getattr(tree, "forces", None) else []
    return found[0] if found else None


def _above_the_floor(model, q):
    """Members of a contact scene whose root is a free joint start out of contact: each one's root is
    raised by its deepest penetration with the world's geoms (a randomized state may reach into the
    floor; the run then starts with a drop, not an explosion)."""
    import jax
    import jax.numpy as jnp
    c = _contact_element(model)
    if c is None or model.topo.jtype[0] != "free":
        return q
    if not any((c.geom_body[a] < 0) != (c.geom_body[b] < 0) for _, _, rows in c.groups for a, b in rows):
        return q

    def deepest(qq):
        cand = c.candidates(model, qq)
        world = (jnp.asarray(cand["body1"]) < 0) != (jnp.asarray(cand["body2"]) < 0)
        return jnp.min(jnp.where(world, cand["dist"], jnp.inf))
    dmin = jax.vmap(deepest)(q)
    return q.at[:, 2].add(jnp.maximum(-dmin, 0.0))


def _contact_summary(model, ts, qs, vs):
    """Per member and save: active pairs (a pair with a positive normal force), the deepest
    penetration; per member the first save with a contact (NaN if none)."""
    import jax
    import jax.numpy as jnp
    from jaxmbd import contact_forces
    B, S = qs.shape[:2]
    ok = np.all(np.isfinite(qs), axis=2) & np.all(np.isfinite(vs), axis=2)
    q = np.where(ok[..., None], qs, np.asarray(model.q0)).reshape(B * S, -1)
    v = np.where(ok[..., None], vs, 0.0).reshape(B * S, -1)
    npairs = _contact_element(model).n_pairs

    @jax.jit
    def one(qq, vv):
        f = contact_forces(model, qq, vv)
        on = f["normal_force"] > 0
        active = jnp.zeros(npairs, bool).at[f["pair"]].max(on)
        return jnp.sum(active), jnp.max(jnp.where(on, f["penetration"], 0.0))
    n, pen = jax.lax.map(lambda x: one(*x), (jnp.asarray(q), jnp.asarray(v)), batch_size=256)
    n = np.where(ok, np.asarray(n).reshape(B, S), np.nan)
    pen = np.where(ok, np.asarray(pen).reshape(B, S), np.nan)
    first = np.array([ts[np.flatnonzero(n[b] > 0)[0]] if np.any(n[b] > 0) else np.nan for b in range(B)])
    return n, pen, first


# --- simulate -------------------------------------------------------------------------------

SETTINGS = ("model", "floating_base", "batch", "t1", "integrator", "rtol", "atol", "dt0", "saves", "chunks", "seed",
            "init_scale", "max_steps", "ctrl", "keyframe", "contact_rows", "contact_capacity")
# per chunk: accepted/rejected count only the members alive at the chunk's start (a failed member is
# run again in every later chunk, its results discarded); t_end: the time each of them reached (NaN
# for the others), a failed member's last sound state
CHUNK_KEYS = ("ts", "qs", "vs", "q_end", "v_end", "status", "accepted", "rejected", "t_end")
DEFAULT_OUT = "jaxmbd_run.npz"
DEFAULT_STEP = 1e-3   # the fixed-step methods' step unless --dt0 or a model file says


def _model_digest(model):
    """(sha256 of the model's static structure: pytree and kinematic tree;
    {parameter: sha256 of its dtype, shape and bytes} for every array leaf)."""
    import jax

    import jaxmbd
    leaves, treedef = jax.tree_util.tree_flatten_with_path(model)
    topo = (model.tree if isinstance(model, jaxmbd.Mechanism) else model).topo
    structure = f"{treedef}|{topo.names}|{topo.parent}|{topo.jtype}"
    params = {}
    for path, x in leaves:
        x = np.ascontiguousarray(x)
        h = hashlib.sha256(f"{x.dtype}{x.shape}".encode())
        h.update(x.tobytes())
        params[jax.tree_util.keystr(path).lstrip(".")] = h.hexdigest()[:16]
    return hashlib.sha256(structure.encode()).hexdigest(), params


def _settings(a, model):
    """Everything a run's numbers depend on: the command's settings, the
    model by content (the file's sha256 for a model file; for every model its
    structure and parameters), float64 or not, and the versions."""
    import jax

    import jaxmbd
    s = {k: getattr(a, k) for k in SETTINGS}
    if a.model not in MODELS:
        with open(a.model, "rb") as f:
            s["model_file_sha256"] = hashlib.sha256(f.read()).hexdigest()
    s["model_structure_sha256"], s["model_parameters"] = _model_digest(model)
    s.update(x64=bool(jax.config.jax_enable_x64), jaxmbd=jaxmbd.__version__, jax=jax.__version__)
    return s


def _settings_diff(old, new):
    """What differs between an unfinished run's settings and this command's, in words."""
    out = []
    for k in dict.fromkeys([*new, *old]):
        o, n = old.get(k), new.get(k)
        if o == n:
            continue
        if k == "model_file_sha256":
            out.append(f"content of the model file {new['model']} (sha256 {str(o)[:12]} -> {str(n)[:12]})")
        elif k == "model_structure_sha256":
            out.append("the model's structure")
        elif k == "model_parameters":
            o, n = o or {}, n or {}
            changed = [p for p in dict.fromkeys([*n, *o]) if o.get(p) != n.get(p)]
            out.append(f"model parameters {', '.join(changed[:6])}{', ...' if len(changed) > 6 else ''}")
        else:
            out.append(f"{k.replace('_', '-')}: {o!r} -> {n!r}")
    return "; ".join(out)


def _check_simulate_args(a):
    if a.resume and a.overwrite:
        raise UsageError("--resume continues a run and --overwrite starts it over: give one of them")
    if a.batch < 1:
        raise UsageError(f"--batch must be >= 1, got {a.batch}")
    if not (math.isfinite(a.t1) and a.t1 > 0):
        raise UsageError(f"--t1 must be a positive time, got {a.t1}")
    if not (math.isfinite(a.rtol) and math.isfinite(a.atol)) or a.rtol < 0 or a.atol < 0 or a.rtol + a.atol <= 0:
        raise UsageError(f"impossible tolerances rtol={a.rtol}, atol={a.atol} (need rtol, atol >= 0, not both 0)")
    if 0 < a.rtol < 1e-14 or (a.rtol == 0 and a.atol < 1e-300):
        raise UsageError(f"rtol={a.rtol} is below what float64 can deliver (>= 1e-14)")
    if a.dt0 is not None and not (math.isfinite(a.dt0) and 0 < a.dt0 <= a.t1):
        raise UsageError(f"--dt0 must be in (0, t1], got {a.dt0}")
    if a.saves < 1 or a.chunks < 1:
        raise UsageError("--saves and --chunks must be >= 1")
    if a.chunks > a.saves:
        raise UsageError(f"--chunks ({a.chunks}) cannot exceed --saves ({a.saves})")
    if a.max_steps < 1:
        raise UsageError("--max-steps must be >= 1")
    if a.init_scale is not None and not (math.isfinite(a.init_scale) and a.init_scale >= 0):
        raise UsageError(f"--init-scale must be a finite number >= 0, got {a.init_scale}")
    if a.contact_rows is not None and a.contact_rows < 1:
        raise UsageError(f"--contact-rows must be >= 1, got {a.contact_rows}")
    if a.contact_capacity is not None and a.contact_capacity != "all":
        given = a.contact_capacity
        a.contact_capacity = int(given) if given.isdigit() else 0
        if a.contact_capacity < 1:
            raise UsageError(f"--contact-capacity must be an integer >= 1 or 'all', got {given!r}")


def _choose_method(a, model, mjcf):
    """Fill in --integrator and --dt0 where not given, and say why (the run's first line).

    Built-in models and URDF files: RK4 at 1 ms.  An MJCF file (``mjcf``: its
    :class:`jaxmbd.io.MJCFImport`, ``<option>`` read through its includes) gets a
    method that holds what MuJoCo holds with the file's ``<option integrator>``:
    ``implicit`` and ``implicitfast``, and MuJoCo's default ``Euler`` on a model
    with joint damping (which MuJoCo's Euler integrates implicitly), get the
    L-stable adaptive ``rosenbrock`` at --rtol/--atol; ``RK4`` gets rk4 at the
    file's ``timestep``; ``Euler`` without damping rk4 at 1 ms.  A fixed-step
    method chosen with --integrator steps at 1 ms, or at the file's
    ``timestep`` where that is smaller."""
    step = None if mjcf is None else mjcf.timestep
    step_from_file = False
    if a.integrator is not None:
        why = f"given by --integrator {a.integrator}"
    elif mjcf is None:
        a.integrator = "rk4"
        why = "the default for " + ("built-in models" if a.model in MODELS else "URDF files")
    else:
        asked = mjcf.integrator
        damped = bool(np.any(np.asarray(getattr(model, "tree", model).damping) > 0))
        if asked in ("implicit", "implicitfast") or (asked == "Euler" and damped):
            a.integrator = "rosenbrock"
            why = (f"the file asks MuJoCo for {asked}" if asked != "Euler" else
                   "the file asks MuJoCo for Euler, which integrates the joints' damping implicitly")
        elif asked == "RK4":
            a.integrator = "rk4"
            why = "the file asks MuJoCo for RK4"
            step_from_file = a.dt0 is None
        else:
            a.integrator = "rk4"
            why = "the file asks MuJoCo for Euler and the model has no joint damping: an explicit method"
    if a.integrator in FIXED_STEP and a.dt0 is None:
        if step is not None and not (math.isfinite(step) and step > 0):
            raise UsageError(f"{a.model}: <option timestep> is {step:g}, not a step; give --dt0")
        if step_from_file:
            a.dt0, how = min(step, a.t1), "the file's <option timestep>"
        elif step is not None and step < DEFAULT_STEP:
            a.dt0, how = min(step, a.t1), "the file's <option timestep>, below 1 ms"
        else:
            a.dt0, how = min(DEFAULT_STEP, a.t1), "1 ms, the default step"
        return f"{a.integrator}: {why} (fixed step dt0 = {a.dt0:g} s: {how})"
    if a.integrator in FIXED_STEP:
        return f"{a.integrator}: {why} (fixed step dt0 = {a.dt0:g} s: --dt0)"
    return f"{a.integrator}: {why} (adaptive steps, rtol = {a.rtol:g}, atol = {a.atol:g})"


def _divergence_advice(a, n):
    """What to do when members ended with status DIVERGED."""
    if a.integrator in FIXED_STEP:
        fix = (f"{INTEGRATORS[a.integrator]} at dt0 = {a.dt0:g} is unstable on this scene: use a smaller --dt0 "
               f"(e.g. {a.dt0 / 4:g})")
    else:
        fix = f"{INTEGRATORS[a.integrator]} lost stability at rtol = {a.rtol:g}: use a smaller --rtol/--atol"
    other = " or ".join(f"--integrator {m}" for m in ("rosenbrock", "sdirk4") if m != a.integrator)
    return (f"diverged: {n} member(s) gained energy that neither the actuators' work nor the start's stored "
            f"energy explains (jaxmbd.divergence); {fix} or an implicit adaptive method ({other})")


def _with_contact_options(model, label, rows=None, capacity=None):
    """The model with its contact element's soft-solve ``rows`` and broad-phase ``capacity``
    replaced (:func:`jaxmbd.forces.contact.with_contact_options`)."""
    from jaxmbd.forces.contact import with_contact_options
    if _contact_element(model) is None:
        raise UsageError(f"--contact-rows/--contact-capacity: {label} has no contacts")
    return with_contact_options(model, rows, capacity)


def _overflow_advice(model):
    """What to change when members ended with CONTACT_OVERFLOW: the limit(s) this model can exceed."""
    el = _contact_element(model)
    out = []
    if el is not None and el.has_soft and el.n_candidates > el.rows:
        out.append(f"raise --contact-rows (now {el.rows}: how many of the {el.n_candidates} candidate contacts, "
                   "the deepest, enter the soft solve; its cost grows with them)")
    if el is not None and el.culled:
        caps = ", ".join(f"{t1}-{t2} {k} of {len(rows)}" for (t1, t2, rows), k in zip(el.groups, el.capacity)
                         if k < len(rows))
        out.append(f"raise --contact-capacity (now {caps} pairs kept by the broad phase) or give "
                   "--contact-capacity all")
    return " or ".join(out) or "raise --contact-rows or --contact-capacity"


def _failure_advice(a, model, status, n):
    """(a short name, what to change) for members that ended with ``status`` (n of them)."""
    from jaxmbd.integrators import base as S
    others = lambda *names: " or ".join(f"--integrator {m}" for m in names if m != a.integrator)  # noqa: E731
    fixed = a.integrator in FIXED_STEP
    tol = f"--rtol/--atol (now {a.rtol:g}, {a.atol:g})"
    if status == S.DIVERGED:
        advice = _divergence_advice(a, n)
        return "diverged", advice[len("diverged: "):] if advice.startswith("diverged: ") else advice
    if status == S.CONTACT_OVERFLOW:
        return "contact overflow", _overflow_advice(model)
    if status == S.MAX_STEPS:
        need = (f"; a chunk of {a.t1 / a.chunks:g} s at dt0 = {a.dt0:g} takes {math.ceil(a.t1 / a.chunks / a.dt0):,} "
                "steps" if fixed else "")
        stiff = "" if fixed or issubclass(_integrators.REGISTRY[a.integrator], _integrators.AbstractImplicit) else \
            f", or an implicit method ({others('rosenbrock', 'sdirk4')}): an explicit one creeps on a stiff model"
        return "max_steps reached", (f"more than --max-steps ({a.max_steps:,}) step attempts in one chunk{need}: "
                                     f"raise --max-steps or --chunks{stiff}")
    if status == S.STEP_UNDERFLOW:
        return "step size underflow", (f"the step shrank below what float64 resolves: loosen {tol}, or "
                                       f"{others('rosenbrock', 'sdirk4')}")
    if status == S.NEWTON_FAILURE:
        return "Newton failure", (f"the implicit stages did not converge even at small steps: loosen {tol}, or "
                                  f"{others('rosenbrock', 'sdirk4')} (rosenbrock has no Newton iteration)")
    if status == S.NONFINITE:
        fix = f"a smaller --dt0 (e.g. {a.dt0 / 4:g})" if fixed else f"a smaller {tol}"
        return "non-finite state", f"the state became NaN or infinite: {fix}, or {others('rosenbrock', 'sdirk4')}"
    if status == S.CONSTRAINT_FAILURE:
        return "constraint failure", ("the loop constraints could not be solved (a singular configuration): a "
                                      f"smaller --init-scale (now {a.init_scale:g}) or a smaller {tol}")
    return S.STATUS_NAMES[int(status)].split(":")[0], S.STATUS_NAMES[int(status)]


def _check_outputs(a):
    """Every output path, checked once the inputs are and before any simulation: the parent
    directory exists and is writable, no output is a directory, and (without --resume or
    --overwrite) none exists yet, except with the default --out, where a previous run's
    finished outputs are replaced (an unfinished run there is kept: --resume or --overwrite).
    Returns (png or None, the chunk directory, the previous outputs this run replaces)."""
    out = a.out
    png = None if a.no_plot else os.path.splitext(out)[0] + ".png"
    a.html = _page_path(a)
    parts = out + ".parts"
    if png == out:
        raise UsageError(f"--out {out}: the plot would overwrite it; name the output .npz (or add --no-plot)")
    d = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(d):
        raise UsageError(f"--out {out}: " + (f"{d} is not a directory" if os.path.exists(d) else
                                             f"directory {d} does not exist"))
    if not os.access(d, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: directory {d} is not writable")
    if os.path.isdir(out):
        raise UsageError(f"--out {out} is a directory; name a file, e.g. {os.path.join(out, 'jaxmbd_run.npz')}")
    if png is not None and os.path.isdir(png):
        raise UsageError(f"the plot {png} would overwrite a directory; choose another --out (or add --no-plot)")
    if a.html is not None and a.html in (out, png):
        raise UsageError(f"--html {a.html}: the page would overwrite {a.html}; name the page .html")
    if a.html is not None:
        hd = os.path.dirname(os.path.abspath(a.html))
        if os.path.isdir(a.html) or not os.path.isdir(hd) or not os.access(hd, os.W_OK | os.X_OK):
            raise UsageError(f"--html {a.html}: " + ("is a directory" if os.path.isdir(a.html) else
                                                     f"directory {hd} does not exist or is not writable"))
    if os.path.exists(parts) and not os.path.isdir(parts):
        raise UsageError(f"{parts} (where the chunks go) exists and is not a directory")
    if a.resume:
        if not os.path.isdir(parts):
            raise UsageError(f"--resume: no unfinished run at {parts}"
                             + (f" ({out} is finished)" if os.path.exists(out) else ""))
    replaced = []
    if not (a.resume or a.overwrite):
        if os.path.isdir(parts):
            raise UsageError(f"{parts} holds an unfinished run; continue it with --resume, "
                             "or start over with --overwrite")
        for path in (out, png, a.html):
            if path is None or not os.path.exists(path):
                continue
            if a.out_given or not (path == out and _is_a_run(out) or path in (png, a.html) and replaced):
                raise UsageError(f"{path} exists; use --overwrite to replace it (or choose another --out)")
            replaced.append(path)
    return png, parts, replaced


def _is_a_run(path):
    """Whether ``path`` is the output of a finished ``jaxmbd simulate`` (an .npz with its settings)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return isinstance(z, np.lib.npyio.NpzFile) and {"settings", "qs", "status"} <= set(z.files)
    except Exception:  # noqa: BLE001 - anything np.load raises on a file that is not an .npz
        return False


def _read_chunk(path, ts, batch, nq, nv):
    """A finished chunk's arrays, every one read in full (zip CRCs checked) and
    of the right shape; a damaged chunk is a UsageError naming the file."""
    want = dict(ts=ts.shape, qs=(batch, ts.size, nq), vs=(batch, ts.size, nv), q_end=(batch, nq),
                v_end=(batch, nv), status=(batch,), accepted=(batch,), rejected=(batch,), t_end=(batch,))
    try:
        with np.load(path, allow_pickle=False) as z:
            d = {k: z[k] for k in CHUNK_KEYS}
        bad = [f"{k} has shape {d[k].shape}, not {want[k]}" for k in CHUNK_KEYS if d[k].shape != want[k]]
        if not bad and not np.array_equal(d["ts"], ts):
            bad = ["its save times are not this run's"]
        if bad:
            raise ValueError(bad[0])
    except Exception as e:  # noqa: BLE001 - whatever np.load raises on a broken file (zip, zlib, header, key ...)
        why = (str(e).splitlines() or [""])[0][:120]
        raise UsageError(f"{path} is damaged ({type(e).__name__}: {why}); delete it and --resume again "
                         "(it is recomputed), or start over with --overwrite") from None
    return d


def _check_resume(a, settings, parts, ts_all, per, model):
    """--resume: the unfinished run's settings must equal this command's, and
    every finished chunk must be intact.  Returns the number of finished chunks."""
    meta = os.path.join(parts, "settings.json")
    try:
        with open(meta) as f:
            old = json.load(f)
        if not isinstance(old, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        raise UsageError(f"--resume: no unfinished run at {parts} (no settings.json)") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"--resume: {meta} is damaged ({e}); start over with --overwrite") from None
    if old != settings:
        raise UsageError(f"--resume: the unfinished run at {parts} differs from this command in "
                         f"{_settings_diff(old, settings)}; run the same command, or start over with --overwrite")
    done = 0
    while done < a.chunks and os.path.exists(os.path.join(parts, f"chunk_{done:05d}.npz")):
        done += 1
    for c in range(done):
        _read_chunk(os.path.join(parts, f"chunk_{c:05d}.npz"), ts_all[c * per:(c + 1) * per], a.batch, model.nq,
                    model.nv)
    return done


def _atomic_savez(path, **arrays):
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def _progress(done, total, t, t1, steps, elapsed, tty):
    width = 30
    fill = int(width * done / total)
    line = (f"[{'#' * fill}{'.' * (width - fill)}] chunk {done}/{total}  t = {t:.4g}/{t1:.4g}  "
            f"steps {steps:,}  {elapsed:.1f} s")
    if tty:
        sys.stderr.write("\r" + line + ("\n" if done == total else ""))
    else:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _keyframe(model, name, label):
    """The model's keyframe ``name`` (:attr:`jaxmbd.Model.keyframes`), or a UsageError listing them."""
    keys = getattr(model, "keyframes", {})
    if name not in keys:
        raise UsageError(f"--keyframe {name!r}: {label} has no keyframe of that name (its keyframes: "
                         f"{', '.join(keys)})" if keys else f"--keyframe {name!r}: {label} has no keyframes")
    return keys[name]


def cmd_simulate(a):
    # the inputs first (arguments, model, keyframe, ctrl, method), then the outputs, then the work
    a.out_given = a.out is not None
    a.out = a.out if a.out_given else DEFAULT_OUT
    _check_simulate_args(a)
    if not a.no_compile_cache:
        _enable_compile_cache()  # before anything compiles, model building included
    import jax.numpy as jnp

    import jaxmbd
    from jaxmbd import integrators

    model, mjcf = _load_model(a.model, a.floating_base, options=True)
    if a.contact_rows is not None or a.contact_capacity is not None:
        model = _with_contact_options(model, a.model, a.contact_rows, a.contact_capacity)
    key = None if a.keyframe is None else _keyframe(model, a.keyframe, a.model)
    if key is not None and getattr(getattr(model, "tree", model), "mocap", None) is not None:
        model = jaxmbd.set_mocap(model, key.mpos, key.mquat)      # the key's mocap poses, as MuJoCo's reset
    if a.init_scale is None:      # a contact scene starts near its own posture (a robot lands on its feet)
        a.init_scale = 0.0 if key is not None else 0.1 if _contact_element(model) is not None else 0.3
    nu = getattr(model, "nu", 0)
    if a.ctrl is not None:
        if nu == 0:
            raise UsageError(f"--ctrl: {a.model} has no actuators")
        if len(a.ctrl) not in (1, nu) or not all(math.isfinite(x) for x in a.ctrl):
            raise UsageError(f"--ctrl needs 1 or {nu} finite numbers (the model's actuators), got {len(a.ctrl)}")
        a.ctrl = [float(x) for x in (a.ctrl * nu if len(a.ctrl) == 1 else a.ctrl)]
    ctrl_note = "0" if a.ctrl is None else f"{a.ctrl[0]:g}" if len(set(a.ctrl)) == 1 else "given"
    if key is not None and a.ctrl is None and nu:
        a.ctrl = [float(x) for x in key.ctrl]
        ctrl_note = f"of keyframe {a.keyframe!r}"
    chosen = _choose_method(a, model, mjcf)
    png, parts, replaced = _check_outputs(a)
    method = integrators.REGISTRY[a.integrator]()
    out = a.out
    settings = _settings(a, model)
    per = int(math.ceil(a.saves / a.chunks))
    n_save = per * a.chunks
    ts_all = np.linspace(0.0, a.t1, n_save + 1)[1:]

    done_chunks = _check_resume(a, settings, parts, ts_all, per, model) if a.resume else 0
    # the divergence check's energy balance, carried from chunk to chunk (unset: the first chunk's own)
    ref_keys = jaxmbd.divergence.DivergenceReference.__dataclass_fields__
    ref = {k: np.full(a.batch, np.nan) for k in ref_keys}
    if done_chunks:
        with np.load(os.path.join(parts, f"chunk_{done_chunks - 1:05d}.npz")) as last:
            q, v, status = last["q_end"], last["v_end"], last["status"]
            ref = {k: last[f"ref_{k}"] if f"ref_{k}" in last.files else ref[k] for k in ref_keys}
    else:
        q, v = _initial_states(model, a.batch, a.seed, a.init_scale,
                               None if key is None else (key.qpos, key.qvel))
        status = np.zeros(a.batch, np.int32)
    print(chosen)   # the first line: the method, and why
    print(f"jaxmbd {jaxmbd.__version__}: {a.model} ({model.summary()})")
    if a.resume:
        print(f"resuming at chunk {done_chunks}/{a.chunks} (t = {ts_all[done_chunks * per - 1] if done_chunks else 0.0:.4g})")
    else:
        if os.path.exists(parts):  # --overwrite
            shutil.rmtree(parts)
        os.makedirs(parts)
        with open(os.path.join(parts, "settings.json"), "w") as f:
            json.dump(settings, f)
    _ctrl_c.message = f"jaxmbd: interrupted; finished chunks are kept in {parts}, continue with --resume"

    print(f"{a.batch} members, t1 = {a.t1}, {INTEGRATORS[a.integrator]}, rtol = {a.rtol}, atol = {a.atol}"
          + (f", dt0 = {a.dt0}" if a.dt0 else "") + f", {n_save} save points in {a.chunks} chunks"
          + (f"; {nu} actuators, ctrl {ctrl_note}" if nu else "")
          + (f"; from keyframe {a.keyframe!r}" if key is not None else ""))
    steps = jaxmbd.Steps(dt0=None if a.dt0 is None else jnp.asarray(a.dt0), rtol=jnp.asarray(a.rtol),
                         atol=jnp.asarray(a.atol), max_steps=a.max_steps)
    inputs = jaxmbd.Inputs(ctrl=None if a.ctrl is None else jnp.asarray(np.asarray(a.ctrl, np.float64)))
    solver = jaxmbd.Solver(adjoint="none")
    tty = sys.stderr.isatty()
    walls, steps_total = [], 0
    drift = np.zeros(2)
    f64 = lambda x: jnp.asarray(np.asarray(x, np.float64))  # noqa: E731 - same types every chunk: one compile
    t_start = time.perf_counter()
    for c in range(done_chunks, a.chunks):
        ts = ts_all[c * per:(c + 1) * per]
        ta = 0.0 if c == 0 else ts_all[c * per - 1]
        w0 = time.perf_counter()
        start = jaxmbd.Start(f64(q), f64(v), f64(ta),
                             reference=jaxmbd.divergence.DivergenceReference(**{k: f64(x) for k, x in ref.items()}))
        r = jaxmbd.rollout(model, start, f64(ts[-1]), integrator=method,
                           inputs=inputs, steps=steps, save=jaxmbd.Save(ts=f64(ts)), solver=solver)
        qs, vs = np.array(r.qs), np.array(r.vs)
        walls.append(time.perf_counter() - w0)
        st = np.asarray(r.status)
        alive = status == 0
        newly = alive & (st != 0)
        status = np.where(alive, st, status).astype(np.int32)
        dead = status != 0
        # saves a failed member did not reach (all of them if it failed in an earlier chunk) are NaN; see status
        reached = (ts[None, :] <= np.asarray(r.t)[:, None]) & (alive & (st == 0) | newly)[:, None]
        qs[~reached], vs[~reached] = np.nan, np.nan
        # a member's steps count in the chunks it started alive (a failed one is run again, then discarded)
        acc, rej = (np.where(alive, np.asarray(r.stats[k]), 0) for k in ("accepted", "rejected"))
        t_end = np.where(alive, np.asarray(r.t, np.float64), np.nan)
        if r.residuals is not None:
            res = np.asarray(r.residuals)[reached]
            drift = np.maximum(drift, res.max(0) if res.size else 0.0)
        steps_total += int(acc[alive].sum())
        q = np.where(dead[:, None], q, qs[:, -1])
        v = np.where(dead[:, None], v, vs[:, -1])
        ref = {k: np.where(dead, ref[k], np.asarray(getattr(r.reference, k))) for k in ref_keys}
        _atomic_savez(os.path.join(parts, f"chunk_{c:05d}.npz"), ts=ts, qs=qs, vs=vs, q_end=q, v_end=v,
                      status=status, accepted=acc, rejected=rej, t_end=t_end,
                      **{f"ref_{k}": x for k, x in ref.items()})
        _progress(c + 1, a.chunks, float(ts[-1]), a.t1, steps_total, time.perf_counter() - t_start, tty)

    # assemble
    chunks = [_read_chunk(os.path.join(parts, f"chunk_{c:05d}.npz"), ts_all[c * per:(c + 1) * per], a.batch,
                          model.nq, model.nv) for c in range(a.chunks)]
    ts = np.concatenate([ch["ts"] for ch in chunks])
    qs = np.concatenate([ch["qs"] for ch in chunks], axis=1)
    vs = np.concatenate([ch["vs"] for ch in chunks], axis=1)
    accepted = np.sum([ch["accepted"] for ch in chunks], axis=0)
    rejected = np.sum([ch["rejected"] for ch in chunks], axis=0)
    status = chunks[-1]["status"]
    # the time each member reached: t1, or a failed member's last sound state (in the chunk it failed)
    t_end = np.full(a.batch, np.nan)
    for ch in chunks:
        t_end = np.where(np.isfinite(ch["t_end"]), ch["t_end"], t_end)
    assert np.all(np.diff(ts) > 0) and ts.size == n_save
    _atomic_savez(out, ts=ts, qs=qs, vs=vs, status=status, accepted=accepted, rejected=rejected, t_end=t_end,
                  settings=np.array(json.dumps(settings)), nq=np.array(model.nq), nv=np.array(model.nv))
    _ctrl_c.message = f"jaxmbd: interrupted after writing {out}"
    shutil.rmtree(parts)

    # summary
    print(f"members: {a.batch}; accepted steps: {int(accepted.sum()):,} (mean {accepted.mean():.1f} per member); "
          f"rejected: {int(rejected.sum()):,}")
    _print_failures(a, model, status, t_end)
    if isinstance(model, jaxmbd.Mechanism):
        print(f"constraint drift (this run's chunks): max |Φ| = {drift[0]:.1e}, max |Φ_q v| = {drift[1]:.1e} "
              f"({model.nc} constraint equations)")
    else:
        print("constraint drift: n/a (kinematic tree, no loop constraints)")
    if walls:
        # the first chunk includes compilation; estimate it as the excess over the later chunks' mean
        compile_s = max(walls[0] - (np.mean(walls[1:]) if len(walls) > 1 else 0.0), 0.0)
        sps = steps_total / max(sum(walls) - compile_s, 1e-9)
        print(f"throughput: {sps:,.0f} member-steps/s; compile (first chunk minus a typical chunk): "
              f"{compile_s:.2f} s; wall {sum(walls):.2f} s")
    first = None
    if _contact_element(model) is not None and not isinstance(model, jaxmbd.Mechanism) \
            and not np.all(np.isnan(qs)):   # a run that reached no save time has no contacts to count
        n, pen, first = _contact_summary(model, ts, qs, vs)
        touched = np.isfinite(first)
        print(f"contacts: {np.nanmean(n):.1f} active pairs on average over members and saves "
              f"(of {_contact_element(model).n_pairs}); deepest penetration {np.nanmax(pen) * 1e3:.2f} mm; "
              f"{int(touched.sum())}/{a.batch} members touched"
              + (f", first at t = {np.nanmin(first):.3f} s (median {np.nanmedian(first):.3f} s)" if touched.any()
                 else "") + f"; rejected steps {int(rejected.sum()):,}")
    print(f"wrote {out}")
    if png is not None:
        if first is not None and model.topo.jtype[0] == "free":
            _plot_heights(png, ts, qs, first, a.model, a.keyframe)
        else:
            _plot(png, ts, qs, a.model)
        print(f"wrote {png}")
    if a.html is not None:
        _write_page(model, ts, qs, a.html, f"{a.model} ({a.batch} members)")
        print(f"wrote {a.html} (open it in a browser: the first {min(a.batch, _VIEW_MEMBERS)} members in 3-D, "
              "with a time slider)")
    if replaced:
        names = ", ".join(replaced[:-1]) + (" and " if len(replaced) > 1 else "") + replaced[-1]
        print(f"replaced {names} of the previous run (the default --out; give --out to keep a run's files)")
    return 0


_VIEW_MEMBERS = 16


def _page_path(a):
    """The simulate command's web page: --html, else beside --out (None with --no-html)."""
    if getattr(a, "no_html", False):
        return None
    return a.html if getattr(a, "html", None) else os.path.splitext(a.out)[0] + ".html"


def _drawable(qs):
    """The first members of a run that have a state to draw (a member that failed at its start has none)."""
    return np.flatnonzero(np.any(np.all(np.isfinite(qs), -1), -1))[:_VIEW_MEMBERS]


def _write_page(model, ts, qs, path, title):
    """A run's page (jaxmbd.view): the first members, their saves after a failure held at the last
    good state.  Members with no finite state (failed at the start) are left out."""
    from jaxmbd.view import view
    ok = _drawable(qs)
    if ok.size == 0:
        print(f"no page: no member has a state to draw ({path} not written)")
        return
    view(model, qs=qs, ts=ts, members=ok, title=title).save(path)


def cmd_view(a):
    """jaxmbd view RUN.npz: the finished run's page."""
    if not os.path.isfile(a.run):
        raise UsageError(f"{a.run}: no such run file (a .npz written by jaxmbd simulate)")
    try:
        with np.load(a.run, allow_pickle=False) as z:
            ts, qs = z["ts"], z["qs"]
            settings = json.loads(str(z["settings"]))
    except Exception as e:  # noqa: BLE001 - whatever np.load raises on a file that is not a run
        raise UsageError(f"{a.run} is not a run written by jaxmbd simulate ({type(e).__name__}: "
                         f"{(str(e).splitlines() or [''])[0][:100]})") from None
    page = a.out or os.path.splitext(a.run)[0] + ".html"
    if os.path.exists(page) and not a.overwrite:
        raise UsageError(f"{page} exists; use --overwrite to replace it (or choose another --out)")
    name = settings.get("model")
    if name not in MODELS and not os.path.isfile(str(name)):
        raise UsageError(f"{a.run}: its model file {name!r} is not there any more (run from the folder it was run "
                         "in)")
    model = _load_model(name, settings.get("floating_base", False))
    if name not in MODELS:
        with open(name, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != settings.get("model_file_sha256"):
                print(f"jaxmbd: warning: {name} changed since the run; drawing the run with the file as it is now",
                      file=sys.stderr)
    if qs.shape[-1] != model.nq:
        raise UsageError(f"{a.run}: its states have {qs.shape[-1]} coordinates, the model {name} has {model.nq}")
    members = a.members
    if members is not None and any(not 0 <= m < qs.shape[0] for m in members):
        raise UsageError(f"--members must be in 0..{qs.shape[0] - 1}")
    from jaxmbd.view import view
    try:
        v = view(model, qs=qs, ts=ts, members=members or _drawable(qs), layout=a.layout, contacts=a.contacts,
                 title=f"{name} ({qs.shape[0]} members)")
    except ValueError as e:
        raise UsageError(str(e)) from None
    v.save(page)
    print(f"wrote {page} ({len(v.members)} of {qs.shape[0]} members, {len(ts)} saves, {v.duration:.3g} s)")
    return 0


def _print_failures(a, model, status, t_end, shown=6):
    """One line counting the failures by status; then per status, the members (the first ``shown``)
    with the time each one reached (its last sound state) and what to change."""
    if not np.any(status != 0):
        print("failures: none")
        return
    groups = {int(s): np.flatnonzero(status == s) for s in np.unique(status) if s != 0}
    named = {s: _failure_advice(a, model, s, len(m)) for s, m in groups.items()}
    print("failures: " + ", ".join(f"{named[s][0]}: {len(m)}" for s, m in groups.items())
          + "; a member's saves after its failure are NaN")
    for s, members in groups.items():
        name, advice = named[s]
        who = ", ".join(f"member {b} at t = {t_end[b]:.4g} s" for b in members[:shown])
        more = f" and {len(members) - shown} more" if len(members) > shown else ""
        print(f"{name} ({who}{more}): {advice}")


def _plot_heights(path, ts, qs, first, title, keyframe=None):
    """The root body's height over time, every member, its first contact marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for b in range(qs.shape[0]):
        ax.plot(ts, qs[b, :, 2], lw=0.7, alpha=0.7)
        if np.isfinite(first[b]):
            k = int(np.searchsorted(ts, first[b]))
            ax.plot(ts[k], qs[b, k, 2], "k.", ms=4)
    ax.plot([], [], "k.", label="first contact")
    ax.set_xlabel("t (s)")
    ax.set_ylabel("torso (root body) height z (m)")
    what = f"from keyframe {keyframe!r}" if keyframe else "dropped onto the floor"
    ax.set_title(f"{title}: {qs.shape[0]} member{'s' if qs.shape[0] != 1 else ''} {what}")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot(path, ts, qs, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    k = min(qs.shape[2], 6)
    fig, axes = plt.subplots(k, 1, figsize=(7, 1.6 * k + 0.6), sharex=True, squeeze=False)
    for i in range(k):
        ax = axes[i, 0]
        for b in range(min(qs.shape[0], 8)):
            ax.plot(ts, qs[b, :, i], lw=0.8)
        ax.set_ylabel(f"q[{i}]")
    axes[-1, 0].set_xlabel("t (s)")
    fig.suptitle(f"{title}: first {k} coordinates, first {min(qs.shape[0], 8)} members")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- info, bench ---------------------------------------------------------------------------

def cmd_info(a):
    from jaxmbd import cost
    import jaxmbd
    model = _load_model(a.model, a.floating_base)
    print(f"{a.model}: {model.summary()}")
    if isinstance(model, jaxmbd.Mechanism):
        kinds = ", ".join(f"{n} ({k[0]})" for n, k in zip(model.loop_names, model.loops))
        print(f"loop constraints: {kinds}; coordinates: {', '.join(model.joint_names)}")
        print("the tree (cut open at the loop constraints):")
        model = model.tree
    r = cost.analyze(model)
    print(f"D0 = {r.D0}, D1 = {r.D1}, D2 = {r.D2} (expanded graph), nnz(H) = {r.nnz}")
    fmt = lambda c: f"{c[0]}m + {c[1]}a"  # noqa: E731
    print(f"predicted operations: CRBA {fmt(r.crba)}, LTDL factor {fmt(r.factor_ltdl)}, solve {fmt(r.solve_ltdl)}, "
          f"dense factor {fmt(r.factor_dense)}, RNEA {fmt(r.rnea)}, ABA {fmt(r.aba)}")
    print(f"predicted factor+solve speed-up sparse over dense: {cost.predicted_factor_solve_speedup(model):.2f}x")
    return 0


def rk4_rollout_rate(model, q, v, steps, dt, dynamics, shard=False):
    """RK4 rollout throughput of a batch (q, v): (member-steps per second, best
    of 2 timed runs after a warm-up; seconds to compile; final positions).
    shard: spread the batch over every JAX device (rollout's ``shard``)."""
    import jax

    import jaxmbd
    from jaxmbd import integrators
    f = jax.jit(lambda q, v: jaxmbd.rollout(model, jaxmbd.Start(q, v), dt * steps, integrator=integrators.RK4(),
                                            steps=jaxmbd.Steps(dt0=dt, max_steps=steps + 1),
                                            solver=jaxmbd.Solver(dynamics=dynamics, adjoint="none"),
                                            shard=shard).qs)
    best, t_compile, out = compile_and_time(f, q, v)
    return q.shape[0] * steps / best, t_compile, np.asarray(out)


def compile_and_time(f, *args):
    """(best of 2 wall times after a warm-up, seconds to lower and compile,
    the result) for the jitted f on args."""
    t0 = time.perf_counter()
    c = f.lower(*args).compile()
    t_compile = time.perf_counter() - t0
    c(*args).block_until_ready()
    best = np.inf
    for _ in range(2):
        t0 = time.perf_counter()
        out = c(*args).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return best, t_compile, out


def cmd_bench(a):
    import jax
    import jax.numpy as jnp

    import jaxmbd
    model = _load_model(a.model, a.floating_base)
    if isinstance(model, jaxmbd.Mechanism):
        raise UsageError(f"{a.model} has loop constraints; jaxmbd bench measures kinematic trees "
                         "(use jaxmbd simulate, or bench/dae.py)")
    print(f"jaxmbd {jaxmbd.__version__} on {jax.devices()[0]}: {a.model}, RK4, dt = {a.dt0}, "
          f"{a.steps} steps per member")
    for B in a.batch:
        if B < 1:
            raise UsageError(f"--batch must be >= 1, got {B}")
        q, v = (jnp.asarray(x) for x in _initial_states(model, B, 0, 0.1))
        for method in ("aba", "aba_unrolled", "crba"):
            rate, comp, _ = rk4_rollout_rate(model, q, v, a.steps, a.dt0, method)
            print(f"batch {B:6d} {method:12s}: {rate:12,.0f} steps/s  (compile {comp:.2f} s)")
    print("for the comparison with MuJoCo, see bench/throughput.py")
    return 0


# --- entry point -------------------------------------------------------------------------------

def _parser():
    p = argparse.ArgumentParser(prog="jaxmbd", description="Differentiable, batched multibody dynamics in JAX.")
    sub = p.add_subparsers(dest="cmd", metavar="{simulate,view,info,bench}")
    s = sub.add_parser("simulate", help="batched rollout of a model, saved to .npz (and a .png plot)")
    s.add_argument("model", nargs="?", default="quadruped", help=MODEL_HELP)
    s.add_argument("--batch", type=int, default=64, help="members (randomized initial states)")
    s.add_argument("--t1", type=float, default=2.0, help="end time (s)")
    s.add_argument("--integrator", default=None, choices=sorted(INTEGRATORS),
                   help="default: rk4; for an MJCF file, what holds what MuJoCo holds with its <option integrator>: "
                        "rosenbrock for implicit, implicitfast, or Euler with joint damping; rk4 at the file's "
                        "timestep for RK4")
    s.add_argument("--rtol", type=float, default=1e-6)
    s.add_argument("--atol", type=float, default=1e-6)
    s.add_argument("--dt0", type=float, default=None,
                   help="step (fixed-step methods; default 1e-3, or an MJCF file's smaller <option timestep>, "
                        "read through its includes) or first step")
    s.add_argument("--saves", type=int, default=100, help="save points, uniform in (0, t1]")
    s.add_argument("--chunks", type=int, default=10, help="time chunks; each is written when done")
    s.add_argument("--max-steps", type=int, default=100_000, help="step attempts per member and chunk")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--init-scale", type=float, default=None,
                   help="spread of the random initial states (default 0.3; 0.1 for a scene with contacts; "
                        "0 with --keyframe)")
    s.add_argument("--ctrl", type=float, nargs="+", default=None,
                   help="constant inputs of the model's actuators: one number for all or one per actuator "
                        "(default: every input 0, as MuJoCo starts)")
    s.add_argument("--keyframe", default=None, metavar="NAME",
                   help="start every member from this keyframe of the model file (its qpos and qvel; its ctrl as "
                        "the constant inputs unless --ctrl is given; the run starts at t = 0 whatever its time); "
                        "--init-scale then defaults to 0")
    s.add_argument("--contact-rows", type=int, default=None, metavar="N",
                   help="candidate contacts (the deepest) in the soft contact solve (default: from the model's pairs, "
                        "jaxmbd.forces.contact_rows.default_rows); more within their margin at once stops a member "
                        "with CONTACT_OVERFLOW")
    s.add_argument("--contact-capacity", default=None, metavar="N|all",
                   help="geom pairs per group of two geom types that the contact broad phase keeps (default: "
                        "a rule from the model's pairs at q0; all: every pair)")
    s.add_argument("--out", default=None,
                   help=f"the output .npz (default {DEFAULT_OUT}, which replaces a previous run's {DEFAULT_OUT} "
                        "and .png; an --out given is never replaced without --overwrite)")
    s.add_argument("--resume", action="store_true", help="continue an interrupted run with the same settings")
    s.add_argument("--overwrite", action="store_true",
                   help="replace an existing output or unfinished run at --out (its finished chunks are deleted)")
    s.add_argument("--no-plot", action="store_true")
    s.add_argument("--html", default=None, metavar="PAGE",
                   help="the run's web page (the robot in 3-D with a time slider; opens offline in a browser; "
                        "default: beside --out, e.g. jaxmbd_run.html)")
    s.add_argument("--no-html", action="store_true", help="write no web page")
    s.add_argument("--no-compile-cache", action="store_true",
                   help="do not keep compiled programs on disk (default: in $JAXMBD_CACHE_DIR, else "
                        "$XDG_CACHE_HOME/jaxmbd/jax, else ~/.cache/jaxmbd/jax)")
    s.set_defaults(func=cmd_simulate)
    w = sub.add_parser("view", help="a finished run's web page: its robot in 3-D with a time slider")
    w.add_argument("run", help="a .npz written by jaxmbd simulate (resumed runs included)")
    w.add_argument("--out", default=None, metavar="PAGE", help="the page (default: the run's name with .html)")
    w.add_argument("--members", type=int, nargs="+", default=None,
                   help=f"which members to draw (default: the first {_VIEW_MEMBERS} that have states)")
    w.add_argument("--layout", choices=("grid", "overlay"), default="grid",
                   help="members side by side (grid) or on top of each other (overlay)")
    w.add_argument("--contacts", action="store_true", help="draw contact points and normal forces")
    w.add_argument("--overwrite", action="store_true", help="replace an existing page")
    w.set_defaults(func=cmd_view)
    i = sub.add_parser("info", help="topology and predicted operation counts of a model")
    i.add_argument("model", help=MODEL_HELP)
    i.set_defaults(func=cmd_info)
    b = sub.add_parser("bench", help="RK4 rollout throughput (steps/s) at several batch sizes")
    b.add_argument("model", nargs="?", default="humanoid30", help=MODEL_HELP)
    b.add_argument("--batch", type=int, nargs="+", default=[1, 64, 1024])
    b.add_argument("--steps", type=int, default=100)
    b.add_argument("--dt0", type=float, default=1e-3)
    b.set_defaults(func=cmd_bench)
    for sp in (s, i, b):
        sp.add_argument("--floating-base", action="store_true",
                        help="URDF files: a free joint between the world and the root link")
    return p


def cache_dir():
    """Where ``jaxmbd simulate`` keeps compiled programs: :func:`jaxmbd.runtime.cache_dir`."""
    from .runtime import cache_dir
    return cache_dir()


def _enable_compile_cache():
    """JAX's persistent compilation cache in cache_dir(): a repeated run loads
    its compiled programs instead of compiling them again
    (:func:`jaxmbd.enable_compilation_cache`).  A directory that cannot be made or
    written is a one-line warning, and the run goes on without the cache."""
    from .runtime import enable_compilation_cache
    try:
        enable_compilation_cache()
    except OSError as e:
        print(f"jaxmbd: warning: compilation cache off ({e.filename or cache_dir()}: {e.strerror or e})",
              file=sys.stderr)


class _CtrlC:
    """Within ``with``: Ctrl-C ends the command at once with one line on
    stderr (``message``) and exit status 130.  Python runs signal handlers only
    in the main thread between bytecodes, which could wait out a long XLA
    compile; so the signal's wakeup byte wakes a watcher thread instead, which
    writes the line and ends the process (finished chunks are on disk)."""

    _STOP = b"\xff"

    def __init__(self):
        self.message = "jaxmbd: interrupted"
        self._once = threading.Lock()
        self._armed = False

    def __enter__(self):
        self.__init__()
        self._armed = threading.current_thread() is threading.main_thread()
        if self._armed:
            self._r, self._w = os.pipe()
            os.set_blocking(self._w, False)
            self._watcher = threading.Thread(target=self._watch, name="jaxmbd-ctrl-c", daemon=True)
            self._watcher.start()
            self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
            self._old_handler = signal.signal(signal.SIGINT, lambda *_: None)  # the watcher acts
        return self

    def __exit__(self, *exc):
        if self._armed:
            signal.signal(signal.SIGINT, self._old_handler)
            signal.set_wakeup_fd(self._old_fd)
            os.write(self._w, self._STOP)
            self._watcher.join()
            os.close(self._r)
            os.close(self._w)
        return False

    def report(self):
        """Write the line, once (the watcher and main() may both get here)."""
        if not self._once.acquire(blocking=False):
            return False
        try:
            sys.stderr.write(("\n" if sys.stderr.isatty() else "") + self.message + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        return True

    def _watch(self):
        while True:
            data = os.read(self._r, 64)
            if not data or self._STOP in data:
                return
            if signal.SIGINT in data and self.report():
                try:
                    sys.stdout.flush()
                except (OSError, ValueError):
                    pass
                os._exit(130)


_ctrl_c = _CtrlC()


def main(argv=None):
    try:
        with _ctrl_c:
            set_xla_flags(command=True)   # done at import where the command started the process
            p = _parser()
            argv = list(sys.argv[1:] if argv is None else argv)
            if not argv or argv[0] not in ("simulate", "view", "info", "bench", "-h", "--help"):
                argv = ["simulate"] + argv
            args = p.parse_args(argv)
            try:
                return args.func(args)
            except UsageError as e:
                print(f"jaxmbd: error: {e}", file=sys.stderr)
                return 2
    except KeyboardInterrupt:  # only where the watcher is not armed: outside the main thread, or in a tiny window
        _ctrl_c.report()
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
