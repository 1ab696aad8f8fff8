"""Compile time of one small contact program (a box on a floor, Rosenbrock, tol 1e-6) under the
XLA_FLAGS given in the environment: python bench/compile_flags_probe.py ros|rk4.  Results:
bench/results/compile_flags_cpu.md."""
import os, sys, time
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import jaxmbd
from jaxmbd import integrators as I
from jax._src import monitoring
from jaxmbd import Start, Steps, Save
acc = {}
monitoring.register_event_duration_secs_listener(lambda e, d, **k: acc.__setitem__(e.rsplit("/",1)[-1], acc.get(e.rsplit("/",1)[-1],0)+d))
H=0.1
b = jaxmbd.ModelBuilder()
b.add_geom("world", "plane", name="floor", contype=0)
b.add_body("box", "world", "free", mass=1.0, com=(0, 0, 0), inertia=(1 / 150, 1 / 150, 1 / 150))
b.add_geom("box", "box", (H, H, H), name="box")
b.add_contact_pair("floor", "box", stiffness=1e5, damping=100.0, exponent=1.0, width=0.0, condim=3, friction=(0.5, 0, 0))
b.set_initial_state(np.array([0, 0, H, 1, 0, 0, 0.0]), np.zeros(6))
m = b.build()
integ = dict(ros=I.RosenbrockNystrom4(), rk4=I.RK4(), sdirk=I.SDIRK4() if hasattr(I,'SDIRK4') else None)[sys.argv[1]]
q0 = jnp.array([0,0,H-1e-4,1,0,0,0.]); v0 = jnp.array([2.,0,0,0,0,0])
t = time.perf_counter()
sol = jaxmbd.simulate(m, Start(q0, v0), 0.2, integrator=integ, steps=Steps(rtol=1e-6, atol=1e-6, max_steps=200_000),
                      save=Save(ts=jnp.array([0.1, 0.2]))) if sys.argv[1] != "rk4" else jaxmbd.simulate(m,
                                                                                                                                                                               Start(q0,
                                                                                                                                                                                     v0),
                                                                                                                                                                               0.2,
                                                                                                                                                                               integrator=integ,
                                                                                                                                                                               steps=Steps(dt0=1e-3),
                                                                                                                                                                               save=Save(ts=jnp.array([0.1,0.2])))
jax.block_until_ready(sol)
print(sys.argv[1], os.environ.get("XLA_FLAGS","")[:80], "total", round(time.perf_counter()-t,1), {k: round(v,1) for k,v in acc.items() if "duration" in k})
