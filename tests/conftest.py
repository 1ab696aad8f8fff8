import os
import sys

import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
sys.path.insert(0, os.path.dirname(__file__))

from hypothesis import settings  # noqa: E402

# Few, deterministic examples: each one compiles a new topology.
settings.register_profile("jaxmbd", max_examples=8, deadline=None, derandomize=True, print_blob=True)
settings.load_profile("jaxmbd")
