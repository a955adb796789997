import jax
import pytest

import dy2st

jax.config.update("jax_platforms", "cpu")


@pytest.fixture(autouse=True)
def _reset_global_switches():
    yield
    dy2st.enable_to_static(True)
