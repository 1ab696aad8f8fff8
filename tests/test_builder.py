"""The ModelBuilder's own contract: its whole state is declared in ``__init__``, and what a build
skips is reported on the builder, not written into its options."""

import ast
import pathlib

import pytest

from jaxmbd import ModelBuilder

SRC = pathlib.Path(__file__).resolve().parents[1] / "jaxmbd" / "builder.py"


def _builder_class():
    return next(n for n in ast.parse(SRC.read_text()).body
                if isinstance(n, ast.ClassDef) and n.name == "ModelBuilder")


def _self_attributes(node, stores):
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "self" and isinstance(n.ctx, ast.Store) == stores}


def test_every_attribute_of_the_builder_is_declared_in_init():
    cls = _builder_class()
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    constants = {t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    declared = _self_attributes(methods["__init__"], stores=True) | constants
    # read or written anywhere: every data attribute must be one __init__ sets (methods are class attributes)
    used = set().union(*(_self_attributes(f, s) for f in methods.values() for s in (True, False))) - set(methods)
    assert declared and not used - declared, sorted(used - declared)
    dynamic = [n.lineno for n in ast.walk(cls) if isinstance(n, ast.Attribute) and n.attr == "__dict__"
               or isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "setattr")
               and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == "self"]
    assert not dynamic, f"builder state reached through __dict__/getattr at lines {dynamic}"


def test_a_fresh_builder_holds_every_declared_attribute():
    cls = _builder_class()
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    b = ModelBuilder()
    assert all(hasattr(b, a) for a in _self_attributes(init, stores=True))


def _plane_on_a_body(skip):
    b = ModelBuilder()
    b.add_body("ball", joint="free", pos=(0, 0, 0.5), mass=1.0, inertia=(0.004, 0.004, 0.004))
    b.add_body("paddle", joint="free", pos=(1, 0, 0.5), mass=1.0, inertia=(0.01, 0.01, 0.02))
    b.add_geom("world", "plane", (0, 0, 1), name="floor")
    b.add_geom("ball", "sphere", (0.1,), name="ball")
    b.add_geom("paddle", "plane", (0, 0, 1), name="paddle")
    b.add_contact_pair("floor", "paddle")       # two flat geoms collide only when a pair names them
    if skip:
        b.set_contact_options(skip_unsupported=True)
    return b


def test_unsupported_pairs_raise_by_default_naming_the_types():
    with pytest.raises(ValueError, match="plane and plane"):
        _plane_on_a_body(False).build()


def test_skipped_pairs_are_reported_on_the_builder_and_the_rest_is_kept():
    b = _plane_on_a_body(True)
    model = b.build()
    assert b.contact_skipped == [(("plane", "plane"), 1)]
    assert "skipped" not in b._contact_opts
    contact = [e for e in model.forces if type(e).__name__ == "Contact"]
    assert len(contact) == 1 and contact[0].geom_names == ("floor", "ball", "paddle")
    assert [(g[:2], len(g[2])) for g in contact[0].groups] == [(('plane', 'sphere'), 2)]   # floor-ball, paddle-ball
    b.set_contact_options(skip_unsupported=False)
    b._pairs.clear()
    b.build()
    assert b.contact_skipped == []
