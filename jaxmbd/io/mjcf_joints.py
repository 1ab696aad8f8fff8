"""MJCF ``<joint>``: joint types and frames, their springs, damping, armature and limits, and the soft-constraint parameters (solref, solimp) of limits and friction loss as MuJoCo resolves them.

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

import numpy as np

from .. import checks as _checks
from .. import joints as jtypes
from ..builder import ModelBuilder
from . import _common as C
from ..mujoco_defaults import SOLIMP, SOLREF
from .mjcf_base import MJCFError, joint_types


class Joints:
    def _apply_springdampers(self, gravity):
        """<joint springdamper="timeconst dampratio">, as MuJoCo compiles it: with m the
        joint's effective mass at qpos0 (1 / diagonal of the inverse mass matrix,
        armature included), stiffness = m / (timeconst * dampratio)^2 and
        damping = 2 m / timeconst, replacing the joint's stiffness and damping."""
        masses = self._effective_masses([j for j, _, _ in self.springdampers])
        by_joint = {kw.get("joint_name"): kw for kw in self._planned}
        for (jname, tc, zeta), m in zip(self.springdampers, masses):
            by_joint[jname].update(stiffness=m / (tc * zeta) ** 2, damping=2.0 * m / tc)
        self.builder = ModelBuilder(gravity=gravity)
        for kw in self._planned:
            self.builder.add_body(**kw)

    @staticmethod
    def _leading(text, default, what):
        """1 to len(default) numbers, completed from ``default`` (MuJoCo's reading of a vector given in part)."""
        vals = np.array(default, np.float64)
        if text is not None:
            got = C.numbers(text, None, what)
            if not 1 <= got.size <= vals.size:
                raise MJCFError(f"{what}: expected 1 to {vals.size} numbers, got {text!r}")
            vals[:got.size] = got
        return vals

    def _solimp(self, text, what):
        """solimp (1 to 5 numbers; MuJoCo's defaults for the missing ones), checked; entries outside
        MuJoCo's ranges are kept (clamped where used, as MuJoCo does) and named in the warning."""
        si = _checks.solimp(self._leading(text, SOLIMP, what), what)
        moved = _checks.solimp_clamped(si)
        if moved:
            self.solimp_notes.append(f"{what.replace(': solimp', ' solimp')} ({', '.join(moved)})")
        return si

    def _solref_attr(self, text, what):
        """solref (1 or 2 numbers; MuJoCo's defaults for the missing one), checked."""
        return _checks.solref(self._leading(text, SOLREF, what), what)

    def _solref(self, solref):
        """solref with MuJoCo's refsafe rule: a time constant below twice the timestep is raised to it."""
        tc, dr = float(solref[0]), float(solref[1])
        if tc > 0 and self.refsafe:
            tc = max(tc, 2.0 * self.timestep)
        return tc, dr

    def _effective_masses(self, joints):
        """1 / (H⁻¹)_ii at qpos0 for the DoF of each named scalar joint (MuJoCo's A_ii of a joint row
        there; armature included), from the bodies planned so far."""
        from ..forces.contact import inverse_weights
        self.builder.set_initial_state(q0=np.concatenate(self.q0) if self.q0 else np.zeros(0))
        model = self.builder.build()
        dof_iw = np.asarray(inverse_weights(model, model.q0)[1])
        names = list(model.joint_names)
        return [1.0 / dof_iw[int(model.joint_dof_adr[names.index(j)])] for j in joints]

    def _apply_limits(self):
        """Limited hinge and slide joints get a :class:`jaxmbd.forces.JointLimit`: MuJoCo's soft
        constraint with solreflimit/solimplimit (:mod:`jaxmbd.forces.soft`), its Â the DoF's
        dof_invweight0 at qpos0; ball-joint limits and limit margins stay in the warning."""
        scalar = [d for d in self.limited if d["kind"] in ("hinge", "slide")]
        other = [d["joint"] for d in self.limited if d["kind"] not in ("hinge", "slide")]
        if other:
            self.unsupported.append(f"ball-joint limits ({', '.join(other)})")
        margins = [d["joint"] for d in scalar if d["margin"] != 0]
        if margins:
            self.unsupported.append(f"joint limit margins ({', '.join(margins)})")
        if not scalar:
            return
        body_of = {kw.get("joint_name"): kw["name"] for kw in self._planned}
        if self.law == "penalty":
            from ..forces.law import from_mujoco
            masses = self._effective_masses([d["joint"] for d in scalar])
            for d, m in zip(scalar, masses):
                k, p, c, w, b = from_mujoco(self._solref(d["solref"]), d["solimp"], m)
                self.builder.add_joint_limit(body_of[d["joint"]], d["lower"], d["upper"], stiffness=k, damping=c,
                                             exponent=p, width=w, viscous=b)
            return
        for d in scalar:
            self.builder.add_joint_limit(body_of[d["joint"]], d["lower"], d["upper"],
                                         solref=self._solref(d["solref"]), solimp=d["solimp"])

    def _joints(self, name, parent, R, p, joints, body, top):
        """Plan the builder bodies of one MJCF body; returns the name of the last."""
        what = f"body {name!r}"
        quat = C.rot_to_quat(R)
        if not joints:
            self._planned.append(dict(name=name, parent=parent, joint="fixed", pos=p, quat=quat, body=body))
            return name
        specs = []
        for k, (el, cls) in enumerate(joints):
            if el.tag == "freejoint":
                a = dict(el.attrib, type="free")
            else:
                a = self.attrs(el, cls)
            jt = a.get("type", "hinge")
            jname = a.get("name") or (name if len(joints) == 1 else f"{name}:{k}")
            jwhat = f"joint {jname!r} (in body {name!r})"
            known = joint_types()
            if jt not in known:
                names = list(known)
                raise MJCFError(f"{jwhat}: unknown joint type {jt!r}; expected "
                                f"{', '.join(names[:-1])} or {names[-1]}")
            if jname in self.joint_names:
                if a.get("name"):
                    raise MJCFError(f"duplicate joint name {jname!r}")
                while jname in self.joint_names:
                    jname += "_"
            self.joint_names.add(jname)
            self.joint_attrs[jname] = (jt, a)     # for the actuators (mjcf_actuator)
            specs.append((jname, jwhat, known[jt], a))
        self.body_joints[name] = [s[0] for s in specs]
        if any(jtypes.get(s[2]).floating for s in specs):
            if len(specs) > 1:
                raise MJCFError(f"{what}: a free joint must be the body's only joint")
            if not top:
                raise MJCFError(f"{what}: a free joint is only allowed in a child of <worldbody> (as in MuJoCo)")
        cur_parent = parent
        for k, (jname, jwhat, jt, a) in enumerate(specs):
            lastk = k == len(specs) - 1
            bname = name if lastk else f"{name}/{jname}"
            while not lastk and bname in self.taken_names:
                bname += "_"
            self.taken_names.add(bname)
            if not lastk:
                self.chain_alias[bname] = name     # one MuJoCo body (its parent filter, its exclusions)
            kw = self._joint_kwargs(jwhat, jt, a)
            ref = kw.pop("ref")
            if k == 0:
                Rp, pp = R, p
            else:
                Rp, pp = np.eye(3), np.zeros(3)
            spec = jtypes.get(jt)
            if spec.floating:
                self.q0.append(np.concatenate([pp, C.rot_to_quat(Rp)]))
                Rp, pp = np.eye(3), np.zeros(3)
            elif not spec.scalar_coords:
                self.q0.append(jtypes.neutral_np(jt))
            else:
                self.q0.append(np.array([ref]))
                # fold the reference into the placement: the joint moves by q - ref (MuJoCo's qpos0)
                if ref != 0.0:
                    ax = kw["axis"] / np.linalg.norm(kw["axis"])
                    if a.get("type", "hinge") == "hinge":
                        Rr = C.quat_to_rot(C.quat_axis_angle(ax, -ref))
                        anc = kw["anchor"]
                        pp = pp + Rp @ (anc - Rr @ anc)
                        Rp = Rp @ Rr
                    else:
                        pp = pp - ref * (Rp @ ax)
            self._planned.append(dict(name=bname, parent=cur_parent, joint=jt, pos=pp, quat=C.rot_to_quat(Rp),
                                      joint_name=jname, body=body if lastk else None, **kw))
            cur_parent = bname
        return cur_parent

    def _joint_kwargs(self, jwhat, jt, a):
        def num(key, default="0"):
            return C.number(a.get(key, default), f"{jwhat}: {key}")

        kw = dict(damping=num("damping"), armature=num("armature"), stiffness=num("stiffness"))
        spec, mt = jtypes.get(jt), a.get("type", "hinge")
        sd = C.numbers(a.get("springdamper", "0 0"), 2, f"{jwhat}: springdamper")
        if np.any(sd != 0):
            if np.any(sd <= 0):
                raise MJCFError(f"{jwhat}: springdamper values must both be positive (as in MuJoCo), got {sd}")
            if jt not in ("revolute", "prismatic"):
                raise MJCFError(f"{jwhat}: springdamper on a {jt} joint is not supported "
                                "(jaxmbd has joint stiffness for hinge and slide joints only)")
            self.springdampers.append((jwhat.split("'")[1], float(sd[0]), float(sd[1])))
        is_angle = mt == "hinge"
        conv = self.angle if is_angle else (lambda x: x)
        ref = conv(num("ref"))
        if spec.uses_axis:
            kw["axis"] = C.numbers(a.get("axis", "0 0 1"), 3, f"{jwhat}: axis")
            if np.linalg.norm(kw["axis"]) < 1e-12:
                raise MJCFError(f"{jwhat}: axis is zero")
            kw["spring_ref"] = conv(num("springref"))
        if spec.uses_anchor:
            kw["anchor"] = C.numbers(a.get("pos", "0 0 0"), 3, f"{jwhat}: pos")
        kw["ref"] = ref
        if num("frictionloss"):
            if num("frictionloss") < 0:
                raise MJCFError(f"{jwhat}: frictionloss must be >= 0, got {num('frictionloss')}")
            self.frictionloss.append(dict(joint=jwhat.split("'")[1], loss=num("frictionloss"),
                                          solref=C.numbers(a.get("solreffriction", "0.02 1"), 2,
                                                           f"{jwhat}: solreffriction"),
                                          solimp=self._solimp(a.get("solimpfriction"), f"{jwhat}: solimpfriction")))
        rng = a.get("range")
        limited = a.get("limited", "auto")
        if limited not in ("true", "false", "auto"):
            raise MJCFError(f"{jwhat}: limited={limited!r}: expected true, false or auto")
        if rng is not None:
            r = C.numbers(rng, 2, f"{jwhat}: range")
            if limited == "true" or (limited == "auto" and self.autolimits):
                if r[0] > r[1]:
                    raise MJCFError(f"{jwhat}: range lower bound exceeds the upper ({rng!r})")
                jname = jwhat.split("'")[1]
                lo, hi = (self.angle(r[0]), self.angle(r[1])) if mt in ("hinge", "ball") else r
                self.joint_range[jname] = (float(lo), float(hi))
                self.limited.append(dict(joint=jname, kind=mt, lower=float(lo), upper=float(hi),
                                         solref=self._solref_attr(a.get("solreflimit"), f"{jwhat}: solreflimit"),
                                         solimp=self._solimp(a.get("solimplimit"), f"{jwhat}: solimplimit"),
                                         margin=num("margin")))
        elif limited == "true":
            raise MJCFError(f"{jwhat}: limited='true' without a range")
        return kw
