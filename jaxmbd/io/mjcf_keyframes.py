"""MJCF ``<keyframe>``: every ``<key>`` (and the attached models') as ``model.keyframes``.

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

import numpy as np

from .. import joints as jtypes
from . import _common as C
from .mjcf_base import KEY_ATTRS, MJCFError


class Keyframes:
    def _attached_key_elements(self, model):
        """The attached models' keyframes as full <key> elements of this model (qpos0 and zeros but for
        the joints and actuators that came along)."""
        out = []
        if not self.attached_keys:
            return out
        tree = getattr(model, "tree", model)
        names, acts = list(tree.joint_names), list(model.actuators.names) if model.nu else []
        for k in self.attached_keys:
            qpos, qvel, ctrl = np.array(model.q0, np.float64), np.zeros(model.nv), np.zeros(model.nu)
            for j, v in k["qpos"].items():
                if j in names:
                    adr = int(tree.joint_qpos_adr[names.index(j)])
                    qpos[adr:adr + v.size] = v
            for j, v in k["qvel"].items():
                if j in names:
                    adr = int(tree.joint_dof_adr[names.index(j)])
                    qvel[adr:adr + v.size] = v
            for a, v in k["ctrl"].items():
                if a in acts:
                    ctrl[acts.index(a)] = v
            fmt = lambda x: " ".join(repr(float(y)) for y in x)  # noqa: E731
            attrs = dict(time=k["time"], qpos=fmt(qpos), qvel=fmt(qvel))
            if model.nu:
                attrs["ctrl"] = fmt(ctrl)
            if k["name"] is not None:
                attrs["name"] = k["name"]
            out.append(ET.Element("key", attrs))
        return out

    def _with_keyframes(self, model):
        """The model with its keyframes (``Model.keyframe_data``): every ``<key>`` as MuJoCo compiles it,
        then default keys (qpos0, zeros) up to ``<size nkey>``, as MuJoCo allocates them."""
        keys = [el for sec in self.root.findall("keyframe") for el in sec] + self._attached_key_elements(model)
        size = {}
        for el in self.root.findall("size"):
            size.update(el.attrib)
        nkey = int(C.number(size.get("nkey", "-1"), "<size nkey>"))
        keys += [ET.Element("key")] * max(nkey - len(keys), 0)
        if not keys:
            return model
        tree = getattr(model, "tree", model)   # a mechanism from the loader keeps the tree's (MuJoCo's) order
        qpos0 = np.asarray(model.q0, np.float64)
        mc = tree.mocap      # a key's mocap poses default to the bodies' own (as MuJoCo's)
        mpos0 = np.zeros(0) if mc is None else np.asarray(mc.pos, np.float64).ravel()
        mquat0 = np.zeros(0) if mc is None else np.asarray(mc.quat, np.float64).ravel()
        sizes = dict(qpos=(qpos0, "nq"), qvel=(np.zeros(model.nv), "nv"), ctrl=(np.zeros(model.nu), "nu"),
                     act=(np.zeros(self.n_act), "na"), mpos=(mpos0, "3 x nmocap"), mquat=(mquat0, "4 x nmocap"))
        taken = {el.get("name") for el in keys if el.get("name")}
        data, names = [], set()
        for i, el in enumerate(keys):
            name = el.get("name")
            what = f"<key name={name!r}>" if name else f"<key> #{i}"
            if el.tag != "key":
                raise MJCFError(f"<keyframe>: unknown element <{el.tag}>")
            for k in el.attrib:
                if k not in KEY_ATTRS:
                    raise MJCFError(f"{what}: unknown attribute {k!r}")
            if name:
                if name in names:
                    raise MJCFError(f"{what}: duplicate keyframe name")
            else:
                name = f"key{i}"
                while name in taken or name in names:
                    name += "_"
            names.add(name)
            vals = {}
            for k, (default, label) in sizes.items():
                v = np.array(default, np.float64)
                if k in el.attrib:
                    got = C.numbers(el.get(k), None, f"{what}: {k}")
                    if got.size > v.size:
                        raise MJCFError(f"{what}: {k} has {got.size} numbers, more than the model's {label} = "
                                        f"{v.size} (MuJoCo refuses it too)")
                    v[:got.size] = got
                vals[k] = v
            q = vals["qpos"]
            for jt, adr in zip(tree.topo.jtype, tree.topo.q_adr):
                for sl in jtypes.quaternion_slices(jt, adr):
                    n = np.linalg.norm(q[sl])
                    q[sl] = q[sl] / n if n > 1e-15 else np.array([1.0, 0.0, 0.0, 0.0])   # as MuJoCo does
            mq = vals["mquat"].reshape(-1, 4)          # normalized, as MuJoCo's compiler does
            nrm = np.linalg.norm(mq, axis=1, keepdims=True)
            vals["mquat"] = np.where(nrm > 1e-15, mq / np.maximum(nrm, 1e-300), [1.0, 0.0, 0.0, 0.0]).ravel()
            data.append((name, C.number(el.get("time", "0"), f"{what}: time"))
                        + tuple(tuple(float(x) for x in vals[k])
                                for k in ("qpos", "qvel", "ctrl", "act", "mpos", "mquat")))
        data = tuple(data)
        if tree is model:
            return dataclasses.replace(model, keyframe_data=data)
        return dataclasses.replace(model, tree=dataclasses.replace(tree, keyframe_data=data))
