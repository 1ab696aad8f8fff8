"""Friction as MuJoCo's soft constraints give it, through impacts and sliding, with
elliptic and pyramidal cones (jaxmbd.forces.soft, jaxmbd.forces.contact): each scene
written as MJCF and run in MuJoCo as the reference.

- the pyramidal cone's rows (edges J_n ± μ_j J_j, their regularizer with impratio) equal
  MuJoCo's efc rows, and the accelerations of a sliding, a sticking and a frictionless
  contact equal MuJoCo's;
- a box thrown onto the floor stops where MuJoCo's stops (both cones), and its
  sensitivity to the throw equals MuJoCo's central differences;
- a box pushed across the floor, a box dropped onto an edge and boxes on an incline at
  and past the cone's edge move as MuJoCo's;
- the go2-class quadruped with ``cone="pyramidal"`` and ``impratio="100"`` stands as
  MuJoCo's (tests/test_robots_on_floors.py's comparison, with the file's cone)."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd import Inputs, Save, Start, Steps, simulate
from jaxmbd.integrators import RosenbrockNystrom4

jax.config.update("jax_enable_x64", True)


def box_scene(cone, *, z=0.2, quat="1 0 0 0", floor_quat="1 0 0 0", friction="0.6", impratio=1,
              timestep=0.0002):
    return f"""<mujoco model="box">
  <option timestep="{timestep}" integrator="RK4" cone="{cone}" impratio="{impratio}"/>
  <default><default class="collision"><geom group="3" friction="{friction}"/></default></default>
  <worldbody>
    <geom name="floor" class="collision" type="plane" size="5 5 0.1" quat="{floor_quat}"/>
    <body name="box" pos="0 0 {z}" quat="{quat}">
      <freejoint/>
      <geom name="box" class="collision" type="box" size="0.05 0.05 0.05" density="800"/>
    </body>
  </worldbody>
</mujoco>"""


def mujoco_run(xml, qvel0, t1, qfrc=None, qpos0=None):
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    if qpos0 is not None:
        d.qpos[:] = qpos0
    d.qvel[:] = qvel0
    if qfrc is not None:
        d.qfrc_applied[:] = qfrc
    for _ in range(int(round(t1 / m.opt.timestep))):
        mujoco.mj_step(m, d)
    return d.qpos.copy(), d.qvel.copy()


def jaxmbd_run(model, q0, v0, t1, tau=None, tol=1e-8):
    sol = simulate(model, Start(jnp.asarray(q0), jnp.asarray(v0)), t1, integrator=RosenbrockNystrom4(),
                   inputs=Inputs(tau=None if tau is None else jnp.asarray(tau)),
                   steps=Steps(rtol=tol, atol=tol, max_steps=20000), save=Save(ts=jnp.array([t1])))
    assert int(sol.status) == 0, sol.status
    return np.asarray(sol.qs[-1]), np.asarray(sol.vs[-1])


# --- the rows and one evaluation ----------------------------------------------------------------

SPHERE = """<mujoco><option cone="{cone}" impratio="{impratio}"/>
  <default><geom friction="{mu} 0.02 0.003" condim="{condim}"/></default>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="b" pos="0 0 0.099"><freejoint/><geom type="sphere" size="0.1" mass="{mass}"/></body>
  </worldbody></mujoco>"""


@pytest.mark.parametrize("condim,mu,impratio,mass", [(3, 0.5, 1, 1.0), (4, 0.25, 3, 2.0), (6, 0.8, 100, 0.5),
                                                     (1, 0.5, 1, 1.0)])
def test_pyramidal_rows_and_accelerations_are_mujocos(condim, mu, impratio, mass):
    """One sphere 1 mm in the floor, sliding and spinning: the edges' regularizers equal MuJoCo's
    efc_R, and qacc equals MuJoCo's to round-off: the active-set iterations find MuJoCo's solution
    of the complementarity problem (with impratio 100 and condim 6, half the edges are off)."""
    xml = SPHERE.format(cone="pyramidal", impratio=impratio, mu=mu, mass=mass, condim=condim)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    v = np.array([0.03, -0.02, 0.0, 0.0, 0.0, 0.05])
    d.qvel[:] = v
    mujoco.mj_forward(m, d)
    model = jaxmbd.load_mjcf(xml)
    from jaxmbd.forces import soft
    q = jnp.asarray(d.qpos)
    N, T, _ = soft.rows(model, q, jnp.asarray(v))
    _, R, s, _ = soft.normal_parameters(N)
    on = np.asarray(s) > 0
    assert on.sum() == d.nefc == (1 if condim == 1 else 2 * (condim - 1))
    np.testing.assert_allclose(np.sort(np.asarray(R)[on]), np.sort(d.efc_R[:d.nefc]), rtol=1e-9)
    a = jaxmbd.forward_dynamics(model, q, jnp.asarray(v), jnp.zeros(6))
    np.testing.assert_allclose(np.asarray(a), d.qacc, rtol=1e-6, atol=1e-6 * np.abs(d.qacc).max())


# --- runs -------------------------------------------------------------------------------------

@pytest.mark.long
@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_a_thrown_box_stops_where_mujocos_stops(cone):
    """A 10 cm box (density 800, friction 0.6) thrown at 1.5 m/s from 0.2 m, no spin: it lands flat,
    slides and stops.  The friction impulse at the landing (bounded by μ times the normal impulse)
    decides where: the final x within 5 mm of MuJoCo's (RK4 at 0.2 ms), and dx/dvx (jax.grad through
    the Rosenbrock run) within 5% of MuJoCo's central differences."""
    xml = box_scene(cone)
    model = jaxmbd.load_mjcf(xml)
    q0 = np.array([0, 0, 0.2, 1, 0, 0, 0.])
    t1 = 0.8

    def final_x(vx):
        v0 = jnp.zeros(6).at[0].set(vx)
        sol = simulate(model, Start(jnp.asarray(q0), v0), t1, integrator=RosenbrockNystrom4(),
                       steps=Steps(rtol=1e-8, atol=1e-8, max_steps=20000), save=Save(ts=jnp.array([t1])))
        return sol.qs[-1, 0], sol.status
    (x, status), dx = jax.value_and_grad(final_x, has_aux=True)(1.5)
    assert int(status) == 0
    mj = lambda vx: mujoco_run(xml, [vx, 0, 0, 0, 0, 0], t1)[0][0]  # noqa: E731
    h = 1e-3
    mj_dx = (mj(1.5 + h) - mj(1.5 - h)) / (2 * h)
    assert abs(float(x) - mj(1.5)) < 5e-3, (float(x), mj(1.5))
    assert abs(float(dx) - mj_dx) < 0.05 * abs(mj_dx), (float(dx), mj_dx)
    assert abs(float(x) - 0.2) > 0.05                 # it slid: not a landing that sticks at once
