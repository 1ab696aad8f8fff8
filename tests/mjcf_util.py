"""Test helper: write the same mechanism as MJCF text, for MuJoCo as an oracle.

Only hinge (revolute), slide (prismatic), ball (spherical) and free joints exist
in MuJoCo; the builder's body specs are written out unchanged (placement,
joint axis/anchor, inertia about the COM in body axes), so states and
generalized forces pass between the two with no conversion.
"""

import numpy as np

MJ_TYPE = {"revolute": "hinge", "prismatic": "slide", "spherical": "ball", "free": "free"}


def _f(x):
    return " ".join(f"{float(v):.17g}" for v in np.ravel(x))


def builder_to_mjcf(builder):
    bodies = builder._bodies
    children = {}
    for b in bodies:
        children.setdefault(b["parent"], []).append(b)

    def rot_to_quat(R):
        # robust matrix -> quaternion (w, x, y, z)
        K = np.array([
            [R[0, 0] - R[1, 1] - R[2, 2], R[1, 0] + R[0, 1], R[2, 0] + R[0, 2], R[2, 1] - R[1, 2]],
            [R[1, 0] + R[0, 1], R[1, 1] - R[0, 0] - R[2, 2], R[2, 1] + R[1, 2], R[0, 2] - R[2, 0]],
            [R[2, 0] + R[0, 2], R[2, 1] + R[1, 2], R[2, 2] - R[0, 0] - R[1, 1], R[1, 0] - R[0, 1]],
            [R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1], R[0, 0] + R[1, 1] + R[2, 2]],
        ]) / 3.0
        w, V = np.linalg.eigh(K)
        x, y, z, qw = V[:, np.argmax(w)]
        return np.array([qw, x, y, z])

    def emit(b, indent):
        pad = " " * indent
        jt = b["jtype"]
        out = [f'{pad}<body name="{b["name"]}" pos="{_f(b["p"])}" quat="{_f(rot_to_quat(b["R"]))}">']
        I = b["inertia"]
        out.append(f'{pad}  <inertial pos="{_f(b["com"])}" mass="{b["mass"]:.17g}" '
                   f'fullinertia="{_f([I[0,0], I[1,1], I[2,2], I[0,1], I[0,2], I[1,2]])}"/>')
        if jt != "fixed":
            if jt not in MJ_TYPE:
                raise ValueError(f"MuJoCo has no {jt} joint")
            arm = float(np.max(b["armature"])) if len(b["armature"]) else 0.0
            damp = float(np.max(b["damping"])) if len(b["damping"]) else 0.0
            attrs = f'type="{MJ_TYPE[jt]}" armature="{arm:.17g}" damping="{damp:.17g}"'
            if jt != "free":
                attrs += f' pos="{_f(b["anchor"])}"'
            if jt in ("revolute", "prismatic"):
                attrs += f' axis="{_f(b["axis"])}"'
            out.append(f'{pad}  <joint name="j_{b["name"]}" {attrs}/>')
        for c in children.get(b["name"], []):
            out.extend(emit(c, indent + 2))
        out.append(f"{pad}</body>")
        return out

    lines = ['<mujoco model="jaxmbd">',
             '  <compiler angle="radian" inertiafromgeom="false" boundmass="0" boundinertia="0"/>',
             f'  <option gravity="{_f(builder.gravity)}" integrator="Euler" timestep="0.001">',
             '    <flag contact="disable" constraint="disable"/>',
             '  </option>',
             '  <worldbody>']
    for b in children.get("world", []):
        lines.extend(emit(b, 4))
    lines += ["  </worldbody>", "</mujoco>"]
    return "\n".join(lines)


def depth_first(builder):
    """The same builder with its bodies in depth-first (MJCF document) order,
    so jaxmbd's DoF order equals MuJoCo's."""
    import copy
    children = {}
    for b in builder._bodies:
        children.setdefault(b["parent"], []).append(b)
    order = []

    def visit(name):
        for c in children.get(name, []):
            order.append(c)
            visit(c["name"])
    visit("world")
    nb = copy.copy(builder)
    nb._bodies = order
    return nb
