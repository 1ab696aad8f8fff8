"""Fuzzing the MJCF and URDF loaders (hypothesis): random documents and
random corruptions of valid ones either load a model whose dynamics are
finite, or raise one single-line ValueError — never another exception."""

import warnings

import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxmbd

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

NUM = st.sampled_from(["0", "1", "-1", "0.3", "2.5", "1e-12", "1e6", "nan", "inf", "x", "", "0.1 0.2"])


def vec(n):
    return st.one_of(st.lists(st.sampled_from(["0", "0.1", "-0.2", "1", "0.5"]), min_size=n, max_size=n).map(" ".join),
                     NUM)


def attrs(**fields):
    """A dict strategy where each attribute may be missing."""
    return st.fixed_dictionaries({}, optional=fields)


def fmt(tag, a, inner=""):
    s = " ".join(f'{k}="{v}"' for k, v in a.items())
    return f"<{tag} {s}>{inner}</{tag}>"


MJCF_JOINT = attrs(type=st.sampled_from(["hinge", "slide", "ball", "free", "bogus"]), axis=vec(3), pos=vec(3),
                   damping=NUM, armature=NUM, stiffness=NUM, ref=NUM, range=vec(2), limited=st.sampled_from(
                       ["true", "false", "auto", "maybe"]))
MJCF_GEOM = attrs(type=st.sampled_from(["sphere", "capsule", "box", "cylinder", "ellipsoid", "mesh", "blob"]),
                  size=st.one_of(vec(1), vec(2), vec(3)), fromto=vec(6), pos=vec(3), quat=vec(4), mass=NUM,
                  density=NUM, euler=vec(3))
MJCF_INERTIAL = attrs(pos=vec(3), mass=NUM, diaginertia=vec(3), fullinertia=vec(6), quat=vec(4))
MJCF_BODY = attrs(pos=vec(3), quat=vec(4), euler=vec(3), xyaxes=vec(6), zaxis=vec(3), axisangle=vec(4))


@st.composite
def mjcf_documents(draw):
    n = draw(st.integers(1, 4))
    parents = [draw(st.integers(-1, i - 1)) for i in range(n)]
    parts = []
    for i in range(n):
        inner = "".join(fmt("joint", j) for j in draw(st.lists(MJCF_JOINT, max_size=2)))
        inner += "".join(fmt("geom", g) for g in draw(st.lists(MJCF_GEOM, max_size=2)))
        if draw(st.booleans()):
            inner += fmt("inertial", draw(MJCF_INERTIAL))
        parts.append((draw(MJCF_BODY), inner))

    def emit(i):
        kids = "".join(emit(k) for k in range(n) if parents[k] == i)
        a, inner = parts[i]
        return fmt("body", dict(a, name=f"b{i}"), inner + kids)

    comp = draw(attrs(angle=st.sampled_from(["degree", "radian", "grad"]),
                      inertiafromgeom=st.sampled_from(["auto", "true", "false"])))
    body = "".join(emit(i) for i in range(n) if parents[i] == -1)
    return f"<mujoco>{fmt('compiler', comp)}<worldbody>{body}</worldbody></mujoco>"


URDF_INERTIA = attrs(ixx=NUM, iyy=NUM, izz=NUM, ixy=NUM, ixz=NUM, iyz=NUM)


@st.composite
def urdf_documents(draw):
    n = draw(st.integers(1, 4))
    links = []
    for i in range(n):
        inner = ""
        if draw(st.integers(0, 3)):
            inner = (f"<inertial><origin xyz=\"{draw(vec(3))}\" rpy=\"{draw(vec(3))}\"/>"
                     f"<mass value=\"{draw(NUM)}\"/>{fmt('inertia', draw(URDF_INERTIA))}</inertial>")
        links.append(f'<link name="l{i}">{inner}</link>')
    joints = []
    for i in range(1, n):
        p = draw(st.integers(0, n))  # n: a missing link; >= i: possibly a cycle
        jt = draw(st.sampled_from(["revolute", "continuous", "prismatic", "fixed", "floating", "planar", "ball"]))
        joints.append(f'<joint name="j{i}" type="{jt}"><parent link="l{p}"/><child link="l{i}"/>'
                      f'<origin xyz="{draw(vec(3))}" rpy="{draw(vec(3))}"/><axis xyz="{draw(vec(3))}"/></joint>')
    return f"<robot name=\"r\">{''.join(links)}{''.join(joints)}</robot>"


def _check(load, doc):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = load(doc)
        except ValueError as e:
            assert str(e) and "\n" not in str(e)
            return None
    q, v = model.q0, jnp.full(model.nv, 0.1)
    qdd = jaxmbd.forward_dynamics(model, q, v, jnp.zeros(model.nv))
    assert np.all(np.isfinite(np.asarray(qdd))), doc
    return model


@SETTINGS
@given(mjcf_documents())
def test_random_mjcf_documents(doc):
    _check(lambda d: jaxmbd.load_mjcf(d), doc)


@SETTINGS
@given(urdf_documents(), st.booleans())
def test_random_urdf_documents(doc, floating):
    _check(lambda d: jaxmbd.load_urdf(d, floating_base=floating), doc)


VALID_MJCF = """<mujoco><compiler angle="radian"/><default><joint damping="0.1"/></default><worldbody>
<body name="a" pos="0 0 1" euler="0.1 0.2 0.3"><joint name="h" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05"/>
<body name="b" pos="0 0 -0.5"><joint name="s" type="ball"/><geom type="box" size="0.1 0.1 0.1"/></body>
</body></worldbody></mujoco>"""

VALID_URDF = """<robot name="r"><link name="base"/>
<link name="l1"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
</inertial></link>
<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 1" rpy="0 0.1 0"/>
<axis xyz="0 1 0"/></joint></robot>"""


@st.composite
def corrupted(draw, doc):
    s = doc
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(s)))
        j = draw(st.integers(i, min(len(s), i + 12)))
        junk = draw(st.text(alphabet='<>/="\' ab0-9.e', max_size=6))
        s = s[:i] + junk + s[j:]
    return s


@SETTINGS
@given(corrupted(VALID_MJCF))
def test_corrupted_mjcf(doc):
    _check(lambda d: jaxmbd.load_mjcf(d), doc)


@SETTINGS
@given(corrupted(VALID_URDF))
def test_corrupted_urdf(doc):
    _check(lambda d: jaxmbd.load_urdf(d), doc)
