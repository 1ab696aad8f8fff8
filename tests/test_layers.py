"""The package's layers, read from its import graph (every import statement,
module level or inside a function): no import cycles; the integrators import
only their own modules and the ODE interface; the physics kernels import no
force element, no ODE, no integrator and no composition above them;
``simulate`` knows no mechanism internals; the contact geometry imports
only the algebra (``spatial``); ``rollout`` and ``design`` use no
private name of another module."""

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "jaxmbd"

KERNELS = ("jaxmbd.spatial", "jaxmbd.spatial_unrolled", "jaxmbd.tangents", "jaxmbd.joints", "jaxmbd.topology",
           "jaxmbd.kinematics",
           "jaxmbd.rnea", "jaxmbd.rnea_partials",
           "jaxmbd.crba", "jaxmbd.aba", "jaxmbd.aba_unrolled", "jaxmbd.coriolis", "jaxmbd.ltdl",
           "jaxmbd.linalg", "jaxmbd.cost", "jaxmbd.contact")
ABOVE_KERNELS = ("jaxmbd.forces", "jaxmbd.dynamics", "jaxmbd.odes", "jaxmbd.integrators", "jaxmbd.simulate",
                 "jaxmbd.systems", "jaxmbd.constraints", "jaxmbd.dae", "jaxmbd.model", "jaxmbd.builder", "jaxmbd.rollout",
                 "jaxmbd.design", "jaxmbd.cli", "jaxmbd.io", "jaxmbd.models", "jaxmbd.view",
                 "jaxmbd.browser", "jaxmbd.sensors")


def _module_name(path):
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _imports(name, path, modules):
    """(imported jaxmbd module, imported names) for every import in the file."""
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, ()) for a in node.names if a.name.startswith("jaxmbd")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("jaxmbd"):
                continue
            names = tuple(a.name for a in node.names)
            # "from . import spatial": the submodules themselves
            subs = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in modules]
            if subs:
                out += [(s, ()) for s in subs]
                rest = tuple(n for n in names if f"{mod}.{n}" not in modules)
                if rest:
                    out.append((mod, rest))
            else:
                out.append((mod, names))
    return [(m, n) for m, n in out if m in modules]


def _graph():
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def find_cycle(edges):
    """A cycle in the directed graph {node: [node, ...]} as a list of nodes, or None."""
    state, stack = {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in edges.get(u, ()):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state:
                c = visit(v)
                if c:
                    return c
        stack.pop()
        state[u] = 2
        return None
    for u in list(edges):
        if u not in state:
            c = visit(u)
            if c:
                return c
    return None


def _under(mod, prefixes):
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}) is None


def test_no_import_cycles():
    g = _graph()
    # the package's own __init__ re-exports everything; nothing inside may import it back, except the
    # command (cli, __main__), the application on top, which imports it lazily (Ctrl-C before jax loads)
    apps = ("jaxmbd", "jaxmbd.cli", "jaxmbd.__main__")
    inward = sorted(n for n, imps in g.items() if n not in apps and any(m == "jaxmbd" for m, _ in imps))
    assert not inward, f"modules importing the package root: {inward}"
    edges = {n: sorted({m for m, _ in imps if m != n}) for n, imps in g.items()}
    assert find_cycle(edges) is None, f"import cycle: {' -> '.join(find_cycle(edges))}"


def test_integrators_import_only_the_ode_interface():
    bad = {n: sorted({m for m, _ in imps if not _under(m, ("jaxmbd.integrators", "jaxmbd.odes.base"))})
           for n, imps in _graph().items() if _under(n, ("jaxmbd.integrators",))}
    assert not {n: b for n, b in bad.items() if b}, bad


def test_kernels_import_nothing_above_them():
    bad = {n: sorted({m for m, _ in imps if _under(m, ABOVE_KERNELS)})
           for n, imps in _graph().items() if _under(n, KERNELS)}
    assert not {n: b for n, b in bad.items() if b}, bad


def test_contact_imports_only_the_algebra():
    bad = {n: sorted({m for m, _ in imps if not _under(m, ("jaxmbd.contact", "jaxmbd.spatial",
                                                            "jaxmbd.mujoco_defaults"))})
           for n, imps in _graph().items() if _under(n, ("jaxmbd.contact",))}
    assert bad and not {n: b for n, b in bad.items() if b}, bad


def test_odes_and_forces_import_no_method_and_no_loop():
    g = _graph()
    for n, imps in g.items():
        if _under(n, ("jaxmbd.odes", "jaxmbd.forces", "jaxmbd.dynamics")):
            bad = sorted({m for m, _ in imps if _under(m, ("jaxmbd.integrators", "jaxmbd.simulate",
                                                              "jaxmbd.systems", "jaxmbd.rollout"))})
            assert not bad, (n, bad)


def test_simulate_knows_no_mechanism_internals():
    imps = _graph()["jaxmbd.simulate"]
    bad = sorted({m for m, _ in imps if _under(m, ("jaxmbd.constraints", "jaxmbd.dae", "jaxmbd.odes",
                                                     "jaxmbd.kinematics"))})
    assert not bad, bad


@pytest.mark.parametrize("name", ["jaxmbd.rollout", "jaxmbd.design"])
def test_compositions_use_no_private_names(name):
    private = [(m, n) for m, names in _graph()[name] for n in names if n.startswith("_")]
    assert not private, private


def test_the_viewer_is_on_top():
    """Only the package root, the command and the viewer itself import the viewer and its browser
    driver; the viewer reads models and states and imports no integrator, loop or ODE."""
    g = _graph()
    users = sorted(n for n, imps in g.items() if n not in ("jaxmbd", "jaxmbd.cli", "jaxmbd.view")
                   and any(_under(m, ("jaxmbd.view", "jaxmbd.browser")) for m, _ in imps))
    assert not users, users
    bad = sorted({m for m, _ in g["jaxmbd.view"] if _under(m, ("jaxmbd.integrators", "jaxmbd.simulate",
                                                                 "jaxmbd.systems", "jaxmbd.rollout", "jaxmbd.odes"))})
    assert "jaxmbd.view" in g and not bad, bad


def test_the_force_elements_import_nothing_above_them():
    """The force elements (contact included) sit below the dynamics: no module of jaxmbd.forces
    imports the dynamics, the contact report or anything built on them."""
    above = ("jaxmbd.dynamics", "jaxmbd.contact_report", "jaxmbd.odes", "jaxmbd.model", "jaxmbd.builder",
             "jaxmbd.constraints",
             "jaxmbd.dae", "jaxmbd.divergence", "jaxmbd.io", "jaxmbd.models", "jaxmbd.view", "jaxmbd.cli")
    g = _graph()
    bad = {n: sorted({m for m, _ in imps if _under(m, above)})
           for n, imps in g.items() if _under(n, ("jaxmbd.forces",))}
    assert "jaxmbd.forces.contact_rows" in g and not {n: b for n, b in bad.items() if b}, bad


def test_the_contact_wing_is_split_and_its_report_is_above_the_dynamics():
    """Broad phase, rows and element are modules of their own, the element importing the other two
    and neither importing it; the report (contact_forces) imports the dynamics."""
    g = _graph()
    deps = {n: {m for m, _ in g[n]} for n in ("jaxmbd.forces.contact", "jaxmbd.forces.contact_broadphase",
                                               "jaxmbd.forces.contact_rows", "jaxmbd.contact_report")}
    assert {"jaxmbd.forces.contact_broadphase", "jaxmbd.forces.contact_rows"} <= deps["jaxmbd.forces.contact"]
    assert "jaxmbd.forces.contact" not in deps["jaxmbd.forces.contact_broadphase"] | deps["jaxmbd.forces.contact_rows"]
    assert "jaxmbd.dynamics" in deps["jaxmbd.contact_report"]


def test_the_loop_imports_no_force_element():
    """simulate and the systems' hooks reach a force element's overflow through the element
    interface (jaxmbd.forces.base), never by importing an element."""
    g = _graph()
    for n in ("jaxmbd.simulate", "jaxmbd.systems"):
        bad = sorted({m for m, _ in g[n] if _under(m, ("jaxmbd.forces",)) and m != "jaxmbd.forces.base"})
        assert not bad, (n, bad)


def test_the_joint_types_import_the_unrolled_algebra_openly():
    """The joint types' closed forms for the unrolled ABA import the component algebra
    (jaxmbd.spatial_unrolled), which imports nothing of the package; no module hands itself over
    through sys.modules."""
    g = _graph()
    assert not [m for m, _ in g["jaxmbd.spatial_unrolled"]], g["jaxmbd.spatial_unrolled"]
    users = sorted(n for n, imps in g.items() if any(m == "jaxmbd.spatial_unrolled" for m, _ in imps))
    assert "jaxmbd.aba_unrolled" in users and "jaxmbd.joints.revolute" in users, users
    handed = sorted(n for n, p in _modules().items() if "sys.modules[" in p.read_text())
    assert not handed, handed


def test_the_model_record_is_below_its_builder():
    """jaxmbd.model holds the Model record and imports no builder, force element, loader or
    mechanism; the builder (jaxmbd.builder) imports it, and the loaders build through the builder."""
    g = _graph()
    bad = sorted({m for m, _ in g["jaxmbd.model"] if _under(m, ("jaxmbd.builder", "jaxmbd.forces", "jaxmbd.io",
                                                                  "jaxmbd.constraints", "jaxmbd.dynamics"))})
    assert not bad, bad
    assert "jaxmbd.model" in {m for m, _ in g["jaxmbd.builder"]}
    for loader in ("jaxmbd.io.mjcf", "jaxmbd.io.urdf"):
        assert "jaxmbd.builder" in {m for m, _ in g[loader]}, loader


def _literal_tuples(path):
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List)) and node.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, (int, float, str)) for e in node.elts):
            out.append((tuple(e.value for e in node.elts), node.lineno))
    return out


def test_mujocos_defaults_are_written_once():
    """MuJoCo's default solref, solimp and friction and its geom type names live in
    jaxmbd.mujoco_defaults, a leaf; no other module writes them out."""
    from jaxmbd import mujoco_defaults as MJ
    g = _graph()
    assert not g["jaxmbd.mujoco_defaults"], g["jaxmbd.mujoco_defaults"]
    watched = {MJ.SOLREF, MJ.SOLIMP, MJ.FRICTION, MJ.PAIR_FRICTION, MJ.GEOM_TYPES, MJ.SOLID_TYPES}
    assert (0.02, 1) in watched and (0.9, 0.95, 0.001, 0.5, 2) in watched      # the table's values, as numbers
    found = [(n, line) for n, p in _modules().items() if n != "jaxmbd.mujoco_defaults"
             for t, line in _literal_tuples(p) if t in watched or tuple(sorted(map(str, t))) in
             {tuple(sorted(w)) for w in (MJ.GEOM_TYPES, MJ.SOLID_TYPES)}]
    assert not found, found
    users = sorted(n for n, imps in g.items() if any(m == "jaxmbd.mujoco_defaults" for m, _ in imps))
    for n in ("jaxmbd.builder", "jaxmbd.io.mjcf_geoms", "jaxmbd.forces.soft", "jaxmbd.forces.contact",
              "jaxmbd.contact.geometry"):
        assert n in users, (n, users)


MJCF_STAGES = ("jaxmbd.io.mjcf_defaults", "jaxmbd.io.mjcf_assets", "jaxmbd.io.mjcf_attach", "jaxmbd.io.mjcf_bodies",
               "jaxmbd.io.mjcf_joints", "jaxmbd.io.mjcf_geoms", "jaxmbd.io.mjcf_actuator", "jaxmbd.io.mjcf_equality",
               "jaxmbd.io.mjcf_keyframes", "jaxmbd.io.mjcf_sensors", "jaxmbd.io.mjcf_tendons")


def test_the_mjcf_compiler_is_split_by_stage():
    """jaxmbd.io.mjcf composes one module per stage of MuJoCo's compiler; a stage imports no other
    stage and not the composer (shared names come from jaxmbd.io.mjcf_base), except that <attach>
    reads an attached model's actuator defaults, and none is large."""
    g, mods = _graph(), _modules()
    composer = {m for m, _ in g["jaxmbd.io.mjcf"]}
    assert set(MJCF_STAGES) <= composer, sorted(set(MJCF_STAGES) - composer)
    for n in MJCF_STAGES:
        allowed = {n, "jaxmbd.io.mjcf_actuator"} if n == "jaxmbd.io.mjcf_attach" else {n}
        bad = sorted({m for m, _ in g[n] if m in MJCF_STAGES + ("jaxmbd.io.mjcf",) and m not in allowed})
        assert not bad, (n, bad)
    sizes = {n: len(mods[n].read_text().splitlines()) for n in MJCF_STAGES + ("jaxmbd.io.mjcf",)}
    assert max(sizes.values()) <= 500, sizes


def test_the_sensors_sit_above_the_contact_report():
    """jaxmbd.sensors reads the contact report (touch, force, torque) and the spatial tendons; nothing
    below it (the kernels, the force elements, the dynamics, the report, the ODEs, the integrators and
    the loop) imports it, and the kinematics hand the mocap poses on without importing the model."""
    g = _graph()
    below = KERNELS + ("jaxmbd.forces", "jaxmbd.dynamics", "jaxmbd.contact_report", "jaxmbd.odes",
                       "jaxmbd.integrators", "jaxmbd.simulate")
    bad = sorted(n for n, imps in g.items() if _under(n, below) and any(m == "jaxmbd.sensors" for m, _ in imps))
    assert not bad, bad
    reads = {m for m, _ in g["jaxmbd.sensors"]}
    assert {"jaxmbd.contact_report", "jaxmbd.forces.spatial_tendon"} <= reads, reads
    assert "jaxmbd.model" not in {m for m, _ in g["jaxmbd.kinematics"]}
